package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"boxer"
)

// The orphaned-process-group attack: a job moves a stopped process into
// its parent's process group and orphans it, so the kernel SIGHUPs and
// SIGCONTs the whole group. Warm children have sessions of their own, so
// the group is the job's alone: the zygote and a concurrent job survive.
func TestWarmOrphanedGroupSIGHUP(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	attack := `
import os, signal, time
print(os.getsid(0) == os.getpid() == os.getpgid(0))
group = os.getpgid(0)
p = os.fork()
if p == 0:
    os.setpgid(0, 0)
    x = os.fork()
    if x == 0:
        try: os.setpgid(0, group)
        except OSError: pass
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)
    os.waitpid(x, os.WUNTRACED)
    os._exit(0)
os.waitpid(p, 0)
time.sleep(0.5)
`
	victim := make(chan *boxer.Result, 1)
	go func() {
		victim <- runWarm(t, z, pyJob("import time; time.sleep(2); print('victim done')", boxer.Limits{WallTime: 20 * time.Second}))
	}()
	res := runWarm(t, z, pyJob(attack, boxer.Limits{WallTime: 5 * time.Second}))
	if got := strings.TrimSpace(string(res.Stdout.Data)); got != "True" {
		t.Fatalf("warm child is not a session leader: %q (stderr %s)", got, res.Stderr.Data)
	}
	select {
	case <-z.Dead():
		t.Fatal("the zygote died of the attack")
	default:
	}
	if v := <-victim; v.Status != boxer.StatusOK || string(v.Stdout.Data) != "victim done\n" {
		t.Fatalf("a concurrent job was hit: %s %q", v.Status, v.Stdout.Data)
	}
}

// A zygote that dies while a job runs ends the run promptly (an internal
// error), never a run that waits forever.
func TestWarmRunEndsWhenZygoteDies(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	job := pyJob("open('started', 'w').close()\nimport time; time.sleep(60)", boxer.Limits{WallTime: time.Minute})
	_, done := startWarm(t, z, job, "started")
	z.Close()
	select {
	case res := <-done:
		if res != nil && res.Status != boxer.StatusInternalError {
			t.Fatalf("status %s after the zygote died", res.Status)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end within 30 s of the zygote's death")
	}
}

// CLONE_PARENT is refused, so a job cannot hand zombies to the zygote; and
// two warm jobs never share a random stream, Python's or numpy's.
func TestWarmNoStrayChildrenNoSharedRandomness(t *testing.T) {
	e := newTestEngine(t, nil)
	z, err := e.StartZygote(context.Background(), ZygoteConfig{Slots: 4, PreImports: []string{"numpy"}})
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	res := runWarm(t, z, pyJob(`
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0)
if r == 0: libc.syscall(60, 0)
print(r, errno.errorcode.get(ctypes.get_errno()))`, boxer.Limits{}))
	if got := string(res.Stdout.Data); got != "-1 EPERM\n" {
		t.Fatalf("clone(CLONE_PARENT): %q %s", got, res.Stderr.Data)
	}
	for _, draw := range []string{
		"import numpy; print(numpy.random.randint(0, 1 << 30, 3))",
		"import random; print(random.getrandbits(64))",
	} {
		a := runWarm(t, z, pyJob(draw, boxer.Limits{}))
		b := runWarm(t, z, pyJob(draw, boxer.Limits{}))
		if a.Status != boxer.StatusOK || string(a.Stdout.Data) == string(b.Stdout.Data) {
			t.Fatalf("two warm jobs drew the same numbers (%s): %s %s", draw, a.Stdout.Data, a.Stderr.Data)
		}
	}
}

// A warm job has a PID namespace of its own: while other warm children
// wait and a second job runs, kill(2) reaches its own pid (2) and refuses
// its pid 1, and every other pid is not there at all. (A warm pool once
// shared one namespace, and EPERM answered for each neighbour.)
func TestWarmJobsSeeNoNeighbours(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	ctx := context.Background()
	for range 3 {
		w, err := z.Prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Destroy()
	}
	neighbour, err := z.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer neighbour.Destroy()
	sleeper := pyJob("import time; open('started', 'w').close(); time.sleep(60)", boxer.Limits{WallTime: time.Minute})
	go func() { _, _ = neighbour.Run(ctx, sleeper) }()
	waitForFile(t, neighbour.work, "started")
	res := runWarm(t, z, pyJob(killProbe+`print({p: r for p in range(1, 1 << 15) if (r := probe(p)) != "No such process"})
`, boxer.Limits{}))
	wantStdout(t, res, "{1: 'Operation not permitted', 2: 'ok'}\n")
}

// A warm job that walks its stack up from its own frame finds the path
// that ran it and nothing of the zygote's loop: no frame of its serve loop
// or of its start, and so none of their locals (the zygote's other
// children, its requests and its count of them); its own request holds
// its own ids, not the zygote's count. (The loop's frames were once the
// job's callers.)
func TestWarmJobSeesNoZygoteFrames(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	for range 2 { // the second child's zygote has served a job already
		res := runWarm(t, z, pyJob(`import os, sys
f, frames = sys._getframe(), []
while f:
    frames.append(f)
    f = f.f_back
print([f.f_code.co_name for f in frames], frames[2].f_locals["req"][0] == os.getuid(), len(frames[2].f_locals["req"]))
`, boxer.Limits{}))
		wantStdout(t, res, "['<module>', '_run', '_child', '<module>'] True 5\n")
	}
}

// No counter a warm run can read moves with another tenant's work: while
// it waits, a warm neighbour and a cold run fork 50 processes each, and
// its ns_last_pid, /proc/loadavg's last pid and getpriority(PRIO_USER) of
// every other slot's uid read as before (a warm pool once shared one PID
// namespace, and all three counted everyone's processes).
func TestWarmCountersAreOwn(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	probe := pyJob(`import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
def counters():
    prio = []
    for uid in range(1000, 1008):
        ctypes.set_errno(0)
        prio.append((libc.getpriority(2, uid), ctypes.get_errno()))
    return open("/proc/sys/kernel/ns_last_pid").read().split(), open("/proc/loadavg").read().split()[4], prio
before = counters()
open("read", "w").close()
while not os.path.exists("go"):
    time.sleep(0.01)  # the test creates it once its neighbours are done
print(counters() == before, before[:2], sorted({e for _, e in before[2]}))
`, boxer.Limits{WallTime: time.Minute})
	w, done := startWarm(t, z, probe, "read")
	forks := pyJob("import os\nfor _ in range(50):\n    pid = os.fork()\n    if pid == 0: os._exit(0)\n    os.waitpid(pid, 0)\nprint('forked')", boxer.Limits{})
	for _, res := range []*boxer.Result{runWarm(t, z, forks), runJob(t, e, forks)} {
		if string(res.Stdout.Data) != "forked\n" {
			t.Fatalf("neighbour: %s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
		}
	}
	if err := writeFiles(w.work, w.z.userBase+uint32(w.slot), []boxer.File{{Path: "go"}}); err != nil {
		t.Fatal(err)
	}
	// Its own pid 1 and pid 2 only; every uid but its own has no process
	// it can see (ESRCH), and its own answers priority 0.
	if res := <-done; res != nil {
		wantStdout(t, res, "True (['2'], '2') [0, 3]\n")
	}
}

// startWarm prepares a warm child of z and runs job on it in the
// background; it returns once the job has made the file ready in its work
// dir, with the child (destroyed when the test ends) and the channel that
// gets the job's result (nil if Run failed, which fails the test).
func startWarm(t *testing.T, z *Zygote, job *boxer.Job, ready string) (*Warm, <-chan *boxer.Result) {
	t.Helper()
	w, err := z.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Destroy)
	done := make(chan *boxer.Result, 1)
	go func() {
		res, err := w.Run(context.Background(), job)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitForFile(t, w.work, ready)
	return w, done
}
