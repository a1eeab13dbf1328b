package sandbox

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"boxer"
	"boxer/internal/sandbox/nsinit"
	"boxer/internal/testenv"
)

// A sandbox's pid 1 is this test binary started again (see nsinit.Init).
func init() { nsinit.Init() }

// newTestEngine starts an engine with its own state dir and cgroup, so
// tests never touch a running boxer's. It needs root: sandboxes are real.
func newTestEngine(t *testing.T, mod func(*Config)) *Engine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox engine needs root (namespaces, cgroups, mounts)")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 on this host")
	}
	// The state dir must sit below directories others can search, which
	// t.TempDir() (mode 0700) is not.
	dir, err := os.MkdirTemp("/run", "boxer-test-")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		StateDir:   dir,
		CgroupName: filepath.Base(dir),
		Logger:     slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(context.Background(), cfg)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		e.Close()
		os.RemoveAll(dir)
		removeCgroupBases(cfg.CgroupName)
	})
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// runPy runs a Python script as main.py with the given limits.
func runPy(t *testing.T, e *Engine, code string, lim boxer.Limits) *boxer.Result {
	t.Helper()
	return runJob(t, e, pyJob(code, lim))
}

// pyJob is `python main.py` with code as main.py.
func pyJob(code string, lim boxer.Limits) *boxer.Job {
	return &boxer.Job{
		Argv:   []string{"python", "main.py"},
		Files:  []boxer.File{{Path: "main.py", Content: []byte(code)}},
		Limits: lim,
	}
}

// runPath runs a job on one of the engine's two paths: a cold sandbox, or
// a warm child of a zygote.
type runPath struct {
	name string
	run  func(t *testing.T, job *boxer.Job) *boxer.Result
}

// bothPaths starts an engine and a zygote on it, so that a test proves
// each guarantee on both paths.
func bothPaths(t *testing.T, mod func(*Config)) (*Engine, []runPath) {
	t.Helper()
	e, _, paths := bothPathsPreImporting(t, mod)
	return e, paths
}

// bothPathsPreImporting is bothPaths with a zygote that pre-imports
// modules.
func bothPathsPreImporting(t *testing.T, mod func(*Config), modules ...string) (*Engine, *Zygote, []runPath) {
	t.Helper()
	e := newTestEngine(t, mod)
	z := newTestZygote(t, e, modules...)
	return e, z, []runPath{
		{"cold", func(t *testing.T, job *boxer.Job) *boxer.Result { t.Helper(); return runJob(t, e, job) }},
		{"warm", func(t *testing.T, job *boxer.Job) *boxer.Result { t.Helper(); return runWarm(t, z, job) }},
	}
}

// slow is testenv.Slow, short for the many budgets here.
func slow(d time.Duration) time.Duration { return testenv.Slow(d) }

func runJob(t *testing.T, e *Engine, job *boxer.Job) *boxer.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slow(2*time.Minute))
	defer cancel()
	res, err := e.Run(ctx, job)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// wantStdout fails the test unless res is ok with exactly stdout want.
func wantStdout(t *testing.T, res *boxer.Result, want string) {
	t.Helper()
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != want {
		t.Fatalf("%s %q %q, want ok %q", res.Status, res.Stdout.Data, res.Stderr.Data, want)
	}
}
