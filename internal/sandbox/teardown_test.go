package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"boxer"
	"boxer/internal/observe"
)

// After any kind of ending, nothing of the run is left: no process, cgroup,
// mount or directory.
func TestTeardown(t *testing.T) {
	e := newTestEngine(t, nil)
	daemon := "import os, time\nif os.fork() == 0:\n  os.setsid()\n  if os.fork() == 0:\n    time.sleep(300)\n  os._exit(0)\nprint('parent done')"
	for _, tc := range []struct {
		name   string
		code   string
		lim    boxer.Limits
		cancel bool
		status boxer.Status
	}{
		{name: "exit", code: "print(1)", status: boxer.StatusOK},
		{name: "double-forked daemon", code: daemon, status: boxer.StatusOK},
		{name: "daemon holding stdout", code: "import os, time\nif os.fork() == 0:\n  os.setsid(); time.sleep(300)\nprint('bye')", status: boxer.StatusOK},
		{name: "timeout", code: "import time; time.sleep(60)", lim: boxer.Limits{WallTime: 300 * time.Millisecond}, status: boxer.StatusTimeout},
		{name: "oom", code: "x = bytearray(1 << 30)\nfor i in range(0, len(x), 4096): x[i] = 1", lim: boxer.Limits{MemoryBytes: 64 << 20}, status: boxer.StatusOOM},
		{name: "fork bomb", code: "import os\nwhile True:\n  try: os.fork()\n  except OSError: pass", lim: boxer.Limits{Pids: 16, WallTime: time.Second}, status: boxer.StatusTimeout},
		{name: "stopped processes", code: "import os, signal\nif os.fork() == 0:\n  os.kill(os.getpid(), signal.SIGSTOP)\nprint('x')", status: boxer.StatusOK},
		{name: "cancel", code: "import time; time.sleep(60)", cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			job := &boxer.Job{
				Argv:   []string{"python", "main.py"},
				Files:  []boxer.File{{Path: "main.py", Content: []byte(tc.code)}},
				Limits: tc.lim,
			}
			if tc.cancel {
				// Cancel once the program runs: when it has made a file.
				job.Files[0].Content = []byte("open('started', 'w').close()\n" + tc.code)
				go cancelWhenExists(ctx, cancel, e, "started")
			}
			start := time.Now()
			res, err := e.Run(ctx, job)
			switch {
			case tc.cancel && !errors.Is(err, context.Canceled):
				t.Fatalf("cancelled run: err %v", err)
			case !tc.cancel && err != nil:
				t.Fatalf("Run: %v", err)
			case !tc.cancel && res.Status != tc.status:
				t.Fatalf("status %s, want %s (stderr %s)", res.Status, tc.status, res.Stderr.Data)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("run took %v: something held it open", d)
			}
			assertNoTraces(t, e)
		})
	}
}

// A job refused before it starts leaves nothing behind either.
func TestTeardownAfterRefusedJob(t *testing.T) {
	e := newTestEngine(t, nil)
	_, err := e.Run(context.Background(), &boxer.Job{
		Argv:  []string{"python", "main.py"},
		Files: []boxer.File{{Path: "a", Content: []byte("x")}, {Path: "a/b", Content: []byte("y")}},
	})
	var be *boxer.Error
	if !errors.As(err, &be) || be.Code != boxer.ECodeInvalidRequest {
		t.Fatalf("err %v, want invalid_request", err)
	}
	assertNoTraces(t, e)
}

// cancelWhenExists cancels once some live sandbox's work dir holds name.
func cancelWhenExists(ctx context.Context, cancel func(), e *Engine, name string) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if matches, _ := globWork(e, name); len(matches) > 0 {
			cancel()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// assertNoTraces checks the host for anything a run could have left.
func assertNoTraces(t *testing.T, e *Engine) {
	t.Helper()
	if ents, err := os.ReadDir(e.runsDir); err != nil || len(ents) != 0 {
		t.Errorf("state dir holds %d entries (%v)", len(ents), err)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), e.cfg.StateDir) {
		t.Errorf("mounts remain under %s", e.cfg.StateDir)
	}
	if pids := processesInIDRange(e); len(pids) > 0 {
		for _, pid := range pids {
			st, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
			t.Logf("pid %d: %.200s", pid, st)
		}
		t.Errorf("sandbox processes remain: %v", pids)
	}
	if dirs := observe.RunCgroups(e.cfg.CgroupName); len(dirs) > 0 {
		t.Errorf("run cgroups remain: %v", dirs)
	}
}

// processesWithUID lists live host processes whose uid is uid.
func processesWithUID(uid uint32) []int {
	return observe.LiveProcesses(uid, uid+1)
}

// processesInIDRange lists live host processes whose uid is a cold
// sandbox's id.
func processesInIDRange(e *Engine) []int {
	return observe.LiveProcesses(e.cfg.IDBase, e.cfg.IDBase+2*uint32(e.cfg.MaxSandboxes))
}

// globWork finds name in the work dir of any live sandbox of e.
func globWork(e *Engine, name string) ([]string, error) {
	return filepath.Glob(filepath.Join(e.runsDir, "*", "work", name))
}

// removeCgroupBases removes the (empty) base cgroups named name that a test
// engine created.
func removeCgroupBases(name string) {
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == name {
			_ = os.Remove(p)
			return filepath.SkipDir
		}
		if strings.Count(p, "/") > 8 {
			return filepath.SkipDir
		}
		return nil
	})
}

// When every sandbox slot is taken, a run is refused as busy (the caller
// may retry), and the slot is free again once the first run is done.
func TestSlotsExhausted(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.MaxSandboxes = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, pyJob("open('started', 'w').close()\nimport time; time.sleep(60)", boxer.Limits{}))
		first <- err
	}()
	waitCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	for { // until the first run's program is running
		if m, _ := globWork(e, "started"); len(m) > 0 {
			break
		}
		if waitCtx.Err() != nil {
			t.Fatal("the first run never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := e.Run(context.Background(), pyJob("print(1)", boxer.Limits{}))
	var be *boxer.Error
	if !errors.As(err, &be) || be.Code != boxer.ECodeBusy {
		t.Fatalf("second run with the only slot taken: %v, want busy", err)
	}
	cancel()
	<-first
	if res := runPy(t, e, "print(1)", boxer.Limits{}); res.Status != boxer.StatusOK {
		t.Fatalf("after the slot was freed: %s", res.Status)
	}
}
