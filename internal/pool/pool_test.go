package pool

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"boxer"
	"boxer/internal/sandbox"
)

func newTestPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the pool runs real sandboxes and needs root")
	}
	dir, err := os.MkdirTemp("/run", "boxer-pool-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	log := slog.New(slog.DiscardHandler)
	eng, err := sandbox.New(context.Background(), sandbox.Config{StateDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	p, err := New(context.Background(), eng, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// warmProbe prints whether the pre-imported module is already loaded: true
// only in a child of the zygote.
const warmProbe = "import sys; print('json' in sys.modules)"

func run(t *testing.T, p *Pool, argv ...string) *boxer.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := p.Run(ctx, &boxer.Job{Argv: argv, Files: []boxer.File{{Path: "main.py", Content: []byte(warmProbe)}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != boxer.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Stderr.Data)
	}
	return res
}

func TestRouting(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 4, PreImports: []string{"json"}})
	for _, tc := range []struct {
		argv []string
		warm bool
	}{
		{[]string{"python", "main.py"}, true},
		{[]string{"python3", "-c", warmProbe}, true},
		{[]string{"python", "-u", "main.py"}, false}, // an interpreter flag: run exactly as given, cold
		{[]string{"python", "-I", "-c", warmProbe}, false},
	} {
		res := run(t, p, tc.argv...)
		if got := string(res.Stdout.Data) == "True\n"; got != tc.warm {
			t.Errorf("%q: warm=%v, want %v", tc.argv, got, tc.warm)
		}
	}
}

func TestDisabledPoolRunsCold(t *testing.T) {
	p := newTestPool(t, Config{})
	if res := run(t, p, "python", "main.py"); string(res.Stdout.Data) != "False\n" {
		t.Fatalf("disabled pool ran warm")
	}
}

// A burst larger than the pool: every job runs, all but a few warm.
func TestBurst(t *testing.T) {
	p := newTestPool(t, Config{Min: 2, Max: 4, PreImports: []string{"json"}})
	var wg sync.WaitGroup
	results := make([]*boxer.Result, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", "print(6 * 7)"}})
			if err == nil {
				results[i] = res
			}
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r == nil || r.Status != boxer.StatusOK || string(r.Stdout.Data) != "42\n" {
			t.Errorf("job %d: %+v", i, r)
		}
	}
}

// A zygote that dies is replaced; jobs keep running meanwhile.
func TestZygoteReplaced(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 2, PreImports: []string{"json"}})
	p.mu.Lock()
	old := p.zyg
	p.mu.Unlock()
	old.Close() // as if it had crashed
	if res := run(t, p, "python", "main.py"); res.Status != boxer.StatusOK {
		t.Fatal(res.Status)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		z := p.zyg
		p.mu.Unlock()
		if z != nil && z != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("zygote not replaced within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := run(t, p, "python", "main.py"); string(res.Stdout.Data) != "True\n" {
		t.Fatalf("not warm after the zygote was replaced: %q", res.Stdout.Data)
	}
}

// The zygote is replaced after RotateAfter children: jobs keep running,
// and children of different zygotes draw different hash seeds.
func TestRotation(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 2, RotateAfter: 3})
	seeds := map[string]bool{}
	for i := 0; i < 12; i++ {
		res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", "print(hash('x'))"}})
		if err != nil || res.Status != boxer.StatusOK {
			t.Fatalf("job %d: %v %+v", i, err, res)
		}
		seeds[string(res.Stdout.Data)] = true
	}
	if len(seeds) < 2 {
		t.Fatalf("12 jobs over several rotations drew one hash seed")
	}
}
