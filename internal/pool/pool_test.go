package pool

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"boxer"
	"boxer/internal/sandbox"
	"boxer/internal/sandbox/nsinit"
	"boxer/internal/sandbox/warm"
)

// A sandbox's pid 1 is this test binary started again (see nsinit.Init).
func init() { nsinit.Init() }

func newTestPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	return newTestPoolLog(t, cfg, slog.New(slog.DiscardHandler))
}

func newTestPoolLog(t *testing.T, cfg Config, log *slog.Logger) *Pool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the pool runs real sandboxes and needs root")
	}
	dir, err := os.MkdirTemp("/run", "boxer-pool-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
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

// Limits a warm child cannot give route a job cold, where it runs: a
// tmpfs of another size, more open files than a zygote has.
func TestLimitsRouteCold(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 2, PreImports: []string{"json"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := warmProbe + "\nimport resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
	for _, tc := range []struct {
		name string
		lim  boxer.Limits
		want string
	}{
		{"defaults", boxer.Limits{}, "True\n256\n"},
		{"another disk size", boxer.Limits{DiskBytes: 64 << 20}, "False\n256\n"},
		{"more open files than a zygote", boxer.Limits{OpenFiles: 9000}, "False\n9000\n"},
	} {
		res, err := p.Run(ctx, &boxer.Job{Argv: []string{"python", "main.py"}, Limits: tc.lim,
			Files: []boxer.File{{Path: "main.py", Content: []byte(code)}}})
		if err != nil {
			if be, ok := err.(*boxer.Error); ok && tc.lim.OpenFiles > 0 && be.Code == boxer.ECodeInvalidRequest {
				t.Skipf("this host cannot give %d open files: %v", tc.lim.OpenFiles, err)
			}
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Status != boxer.StatusOK || string(res.Stdout.Data) != tc.want {
			t.Errorf("%s: %s %q %q, want %q", tc.name, res.Status, res.Stdout.Data, res.Stderr.Data, tc.want)
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
	l := p.lanes[0]
	l.mu.Lock()
	old := l.zyg
	l.mu.Unlock()
	old.Close() // as if it had crashed
	if res := run(t, p, "python", "main.py"); res.Status != boxer.StatusOK {
		t.Fatal(res.Status)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		l.mu.Lock()
		z := l.zyg
		l.mu.Unlock()
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
// and children of different zygotes draw different hash seeds. The old
// zygote serves until the fresh one is ready, which can take longer than
// a dozen quick jobs: so jobs run until a second seed shows, up to 200.
func TestRotation(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 2, RotateAfter: 3})
	seeds := map[string]bool{}
	for i := 0; i < 200 && len(seeds) < 2; i++ {
		res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", "print(hash('x'))"}})
		if err != nil || res.Status != boxer.StatusOK {
			t.Fatalf("job %d: %v %+v", i, err, res)
		}
		seeds[string(res.Stdout.Data)] = true
	}
	if len(seeds) < 2 {
		t.Fatalf("200 jobs with RotateAfter 3 drew one hash seed: no rotation")
	}
}

// With Lean, a job whose code names a pre-import runs on the zygote that
// has it, and any other job on the zygote without: warm either way.
func TestLeanLane(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 2, PreImports: []string{"json"}, Lean: true})
	// Spelled so that the probe itself names no pre-import.
	const probe = "import sys; print('js' + 'on' in sys.modules)"
	for _, tc := range []struct {
		name  string
		files map[string]string
		lane  string
		out   string
	}{
		{"names none", map[string]string{"main.py": probe}, "lean", "False\n"},
		{"names one", map[string]string{"main.py": "import json\n" + probe}, "preimports", "True\n"},
		{"a module of the job names one", map[string]string{"main.py": "import util\n" + probe, "util.py": "import json.decoder\n"}, "preimports", "True\n"},
		{"only a data file names one", map[string]string{"main.py": probe, "notes.txt": "import json"}, "lean", "False\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &boxer.Job{Argv: []string{"python", "main.py"}}
			for path, content := range tc.files {
				job.Files = append(job.Files, boxer.File{Path: path, Content: []byte(content)})
			}
			before := served(p)
			res, err := p.Run(context.Background(), job)
			if err != nil || res.Status != boxer.StatusOK {
				t.Fatalf("%v %+v", err, res)
			}
			if got := string(res.Stdout.Data); got != tc.out {
				t.Errorf("stdout %q, want %q", got, tc.out)
			}
			after := served(p)
			for lane, n := range after {
				want := before[lane]
				if lane == tc.lane {
					want++
				}
				if n != want {
					t.Errorf("lane %s served %d jobs, want %d", lane, n, want)
				}
			}
		})
	}
	// -c code is read as a file's would be.
	before := served(p)["preimports"]
	res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", "import json; " + probe}})
	if err != nil || string(res.Stdout.Data) != "True\n" || served(p)["preimports"] != before+1 {
		t.Errorf("-c naming a pre-import: %v %+v, served %d", err, res, served(p)["preimports"]-before)
	}
}

// The lean pre-imports are in both zygotes and route nothing: a job that
// names one runs lean.
func TestLeanPreImports(t *testing.T) {
	p := newTestPool(t, Config{Min: 1, Max: 2, PreImports: []string{"json"}, LeanPreImports: []string{"csv"}, Lean: true})
	const probe = "import sys; print('c' + 'sv' in sys.modules, 'js' + 'on' in sys.modules)"
	for _, tc := range []struct{ code, lane, out string }{
		{probe, "lean", "True False\n"},
		{"import csv; " + probe, "lean", "True False\n"},
		{"import json; " + probe, "preimports", "True True\n"},
	} {
		before := served(p)[tc.lane]
		res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", tc.code}})
		if err != nil || res.Status != boxer.StatusOK {
			t.Fatalf("%q: %v %+v", tc.code, err, res)
		}
		if got := string(res.Stdout.Data); got != tc.out || served(p)[tc.lane] != before+1 {
			t.Errorf("%q: stdout %q on lane %s (served %d more), want %q", tc.code, got, tc.lane, served(p)[tc.lane]-before, tc.out)
		}
	}
}

// An own lane takes the jobs that name its module and nothing its zygote
// lacks, and runs them as the other lanes would; its zygote learned the
// pages pytest's first run writes, and that run left nothing behind.
func TestOwnLane(t *testing.T) {
	// pytest brings json with it, not wave.
	p := newTestPool(t, Config{Min: 1, Max: 2, PreImports: []string{"wave", "json", "pytest"}, Lean: true, OwnLanes: []string{"pytest"}})
	lanes := map[string]*lane{}
	for _, l := range p.lanes {
		lanes[l.name] = l
	}
	own, lean := lanes["pytest"], lanes["lean"]
	if own == nil || !slices.Contains(own.holds, "pytest") || !slices.Contains(own.holds, "json") || slices.Contains(own.holds, "wave") {
		t.Fatalf("lanes %v, want one named pytest that holds pytest and json, not wave", slices.Collect(maps.Keys(lanes)))
	}
	// Its learned pages are print(2+2)'s and pytest's: many more than the
	// lean zygote's, which learned print(2+2)'s alone.
	if got, base := own.zyg.LearnedPages, lean.zyg.LearnedPages; got < 2*base {
		t.Errorf("the pytest lane's zygote learned %d pages, the lean one %d: want at least twice as many", got, base)
	}
	const probe = "import os, sys\nprint(sorted(os.listdir('.')), 'pyt' + 'est' in sys.modules, 'wa' + 've' in sys.modules)\n"
	const test = "def test_one():\n    assert 1 + 1 == 2\n"
	for _, tc := range []struct {
		name  string
		argv  []string
		files map[string]string
		lane  string
		out   string
	}{
		{"python -m pytest", []string{"python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"},
			map[string]string{"test_one.py": test}, "pytest", "1 passed"},
		{"names pytest", []string{"python", "main.py"}, map[string]string{"main.py": "# pytest\n" + probe}, "pytest", "['main.py'] True False\n"},
		{"names pytest and json", []string{"python", "main.py"}, map[string]string{"main.py": "# pytest, json\n" + probe}, "pytest", "['main.py'] True False\n"},
		{"names pytest and wave", []string{"python", "main.py"}, map[string]string{"main.py": "# pytest, wave\n" + probe}, "preimports", "['main.py'] True True\n"},
		{"names wave", []string{"python", "main.py"}, map[string]string{"main.py": "# wave\n" + probe}, "preimports", "['main.py'] True True\n"},
		{"names none", []string{"python", "main.py"}, map[string]string{"main.py": probe}, "lean", "['main.py'] False False\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &boxer.Job{Argv: tc.argv}
			for path, content := range tc.files {
				job.Files = append(job.Files, boxer.File{Path: path, Content: []byte(content)})
			}
			before := served(p)[tc.lane]
			res, err := p.Run(context.Background(), job)
			if err != nil || res.Status != boxer.StatusOK || res.ExitCode != 0 {
				t.Fatalf("%v %+v", err, res)
			}
			if got := string(res.Stdout.Data); !strings.Contains(got, tc.out) || served(p)[tc.lane] != before+1 {
				t.Errorf("stdout %q on lane %s (served %d more), want %q there", got, tc.lane, served(p)[tc.lane]-before, tc.out)
			}
		})
	}
}

// An own lane for a module that is not installed is not made: it would be
// a second lean lane that no job goes to.
func TestOwnLaneMissingModule(t *testing.T) {
	const absent = "boxer_no_such_module"
	// As if zygote.py knew its first use: it learns none of a missing one.
	samples := warm.Samples
	warm.Samples = append(slices.Clone(samples), absent)
	t.Cleanup(func() { warm.Samples = samples })
	p := newTestPool(t, Config{Min: 1, Max: 2, PreImports: []string{"json", absent}, Lean: true, OwnLanes: []string{absent}})
	var names []string
	for _, l := range p.lanes {
		names = append(names, l.name)
	}
	if !slices.Equal(names, []string{"preimports", "lean"}) {
		t.Fatalf("lanes %v, want preimports and lean", names)
	}
	before := served(p)["preimports"]
	res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", "import " + absent}})
	if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr.Data), "ModuleNotFoundError") || served(p)["preimports"] != before+1 {
		t.Fatalf("%v %+v, served on preimports %d", err, res, served(p)["preimports"]-before)
	}
}

// served counts the jobs each lane's children have run, by lane name.
func served(p *Pool) map[string]int64 {
	out := make(map[string]int64, len(p.lanes))
	for _, l := range p.lanes {
		out[l.name] = l.served.Load()
	}
	return out
}

func TestNames(t *testing.T) {
	words := []string{"numpy", "pandas"}
	for code, want := range map[string]bool{
		"import numpy as np":           true,
		"from pandas import DataFrame": true,
		"x = numpy.zeros(3)":           true,
		"import os, numpy":             true,
		"numpy":                        true,
		"import numpyro":               false,
		"my_numpy = 1":                 false,
		"import pandasql":              false,
		"print('hello')":               false,
		"":                             false,
		"é_numpy":                      false,
		"numpy_extra; numpy":           true,
	} {
		if got := names([]byte(code), words); got != want {
			t.Errorf("names(%q) = %v, want %v", code, got, want)
		}
	}
	if names([]byte("import numpy"), []string{""}) {
		t.Errorf("an empty name is named")
	}
}

// More jobs in flight than Max (they wait in Prepare for a slot) ask for
// no ready child, not a negative number of them.
func TestTargetNeverNegative(t *testing.T) {
	p := &Pool{cfg: Config{Min: 2, Max: 4}}
	l := p.newLane("test", nil, "")
	for inflight, want := range map[int]int{0: 2, 1: 3, 2: 2, 4: 0, 6: 0} {
		l.inflight = inflight
		if got := l.target(); got != want {
			t.Errorf("inflight %d: target %d, want %d", inflight, got, want)
		}
	}
}

// A pre-import that is not installed does not stop the pool: it serves
// with the others, warns once for each missing one with the Debian package
// to install, and a job that imports it fails as under a bare python3.
func TestMissingPreImportWarnsAndServes(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	p := newTestPoolLog(t, Config{Min: 1, Max: 2, PreImports: []string{"json", "boxer_not_installed.sub"}}, log)
	if got := string(run(t, p, "python", "main.py").Stdout.Data); got != "True\n" {
		t.Fatalf("json pre-imported: %q, want True", got)
	}
	res, err := p.Run(context.Background(), &boxer.Job{Argv: []string{"python", "-c", "import boxer_not_installed"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != boxer.StatusNonzeroExit || !strings.Contains(string(res.Stderr.Data), "ModuleNotFoundError: No module named 'boxer_not_installed'") {
		t.Fatalf("importing the missing module: %s %q", res.Status, res.Stderr.Data)
	}
	p.warnMissing([]string{"boxer_not_installed.sub"}) // as a rotated zygote would
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), `"msg":"a pre-import is not installed`); n != 1 ||
		!strings.Contains(logs.String(), `"module":"boxer_not_installed.sub","debian_package":"python3-boxer_not_installed"`) {
		t.Fatalf("%d warnings, want one naming the module and its package:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func TestDebianPackage(t *testing.T) {
	for mod, want := range map[string]string{
		"numpy": "python3-numpy", "matplotlib.pyplot": "python3-matplotlib", "sklearn.linear_model": "python3-sklearn",
		"yaml": "python3-yaml", "PIL.Image": "python3-pil", "cv2": "python3-opencv",
	} {
		if got := DebianPackage(mod); got != want {
			t.Errorf("DebianPackage(%q) = %q, want %q", mod, got, want)
		}
	}
}
