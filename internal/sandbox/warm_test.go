package sandbox

import (
	"context"
	"testing"
	"time"

	"boxer"
)

// newTestZygote starts a zygote on a test engine.
func newTestZygote(t *testing.T, e *Engine, preimports ...string) *Zygote {
	t.Helper()
	z, err := e.StartZygote(context.Background(), ZygoteConfig{PreImports: preimports, Slots: 8})
	if err != nil {
		t.Fatalf("StartZygote: %v", err)
	}
	t.Cleanup(z.Close)
	return z
}

// runWarm prepares a warm child and runs job on it.
func runWarm(t *testing.T, z *Zygote, job *boxer.Job) *boxer.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	form, ok := z.e.WarmForm(job.Argv)
	if !ok {
		t.Fatalf("argv %q cannot run warm", job.Argv)
	}
	w, err := z.Prepare(ctx)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer w.Destroy()
	res, err := w.Run(ctx, job, job.Limits.WithDefaults(z.e.cfg.Limits), form)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestWarmSmoke(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	res := runWarm(t, z, &boxer.Job{Argv: []string{"python", "main.py"}, Files: []boxer.File{{Path: "main.py", Content: []byte("print(2+2)")}}})
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != "4\n" {
		t.Fatalf("%s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
	}
	t.Logf("%+v", res.Timing)
}

func init() { zygoteStartTimeout = 20 * time.Second }
