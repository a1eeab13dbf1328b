package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"boxer"
	"boxer/internal/sandbox/transplant"

	"golang.org/x/sys/unix"
)

// forkSession forks s into a new session on z.
func forkSession(t *testing.T, z *Zygote, s *Session) (*Session, error) {
	t.Helper()
	dst := newTestSession(t, z, nil)
	ctx, cancel := context.WithTimeout(context.Background(), slow(time.Minute))
	defer cancel()
	return dst, s.Fork(ctx, dst)
}

// forkParent starts a session to fork on a zygote that pre-imports numpy
// with one thread, as the sessions' zygote does.
func forkParent(t *testing.T) (*Zygote, *Session) {
	t.Helper()
	z := newTestZygote(t, newTestEngine(t, nil), "numpy")
	return z, newTestSession(t, z, nil)
}

// mustFork forks s into a new session on z, failing the test on an error.
func mustFork(t *testing.T, z *Zygote, s *Session) *Session {
	t.Helper()
	fork, err := forkSession(t, z, s)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	return fork
}

// wantRefused fails the test unless err is a refusal whose reason
// mentions reason.
func wantRefused(t *testing.T, err error, reason string) {
	t.Helper()
	var refused *transplant.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, reason) {
		t.Fatalf("Fork: %v, want refused for %s", err, reason)
	}
}

// cellOut runs code in s and returns its stdout, failing on anything but
// a clean exit.
func cellOut(t *testing.T, s *Session, code string) string {
	t.Helper()
	res := execCell(t, s, code, slow(20*time.Second))
	if res.Status != boxer.StatusOK || !res.Alive {
		t.Fatalf("cell %q: %+v\nstdout %q\nstderr %q", code, res, res.Stdout.Data, res.Stderr.Data)
	}
	return string(res.Stdout.Data)
}

// A fork holds its parent's state at the fork, globals, imports, objects
// of C extensions, open files and files on disk alike, and from then on
// the two diverge: what either changes, in memory or on disk, the other
// does not see.
func TestSessionForkCopiesStateAndDiverges(t *testing.T) {
	z, parent := forkParent(t)

	cellOut(t, parent, `
import os, json, numpy as np, random
x = 41
big = np.arange(3_000_000, dtype=np.int64)   # 24 MB of the parent's own pages
log = open('log.txt', 'w'); log.write('before\n'); log.flush()
os.makedirs('sub/deep', exist_ok=True)
open('sub/deep/data.json', 'w').write(json.dumps({'k': [1, 2]}))
open('/tmp/scratch', 'w').write('tmp')
os.symlink('sub/deep/data.json', 'link')
os.chdir('sub')
os.umask(0o027)
def f(n): return n * 2
`)
	fork := mustFork(t, z, parent)
	if got := cellOut(t, fork, "print(oct(os.umask(0o027)))"); got != "0o27\n" {
		t.Fatalf("the fork's umask: %q, want its parent's 0o27", got)
	}
	got := cellOut(t, fork, `
print(x, f(x), int(big.sum()), os.getcwd())
log.write('fork\n'); log.flush()
print(open('/work/log.txt').read().split())
print(json.load(open('deep/data.json')), open('/tmp/scratch').read(), os.readlink('/work/link'))
x = 'fork'
open('/work/sub/deep/data.json', 'w').write('{}')
`)
	want := "41 82 4499998500000 /work/sub\n['before', 'fork']\n{'k': [1, 2]} tmp sub/deep/data.json\n"
	if got != want {
		t.Fatalf("fork's cell printed %q, want %q", got, want)
	}
	got = cellOut(t, parent, `
print(x, open('/work/log.txt').read().split(), json.load(open('deep/data.json')))
log.write('parent\n'); log.flush()
big[:] = 0
`)
	if want := "41 ['before'] {'k': [1, 2]}\n"; got != want {
		t.Fatalf("parent's cell after the fork printed %q, want %q", got, want)
	}
	if got := cellOut(t, fork, "print(x, int(big.sum()), open('/work/log.txt').read().split())"); got != "fork 4499998500000 ['before', 'fork']\n" {
		t.Fatalf("fork's second cell printed %q", got)
	}
}

// A fork's signal dispositions are its parent's, at the kernel's level:
// a handler set, a signal ignored, and one the kernel handles put back
// to the default (SIGPIPE, which a fresh interpreter ignores) all carry
// over.
func TestSessionForkCarriesSignals(t *testing.T) {
	z, parent := forkParent(t)
	const status = "import re; print(re.findall(r'(Sig(?:Ign|Cgt)):\\s*(\\w+)', open('/proc/self/status').read()))"
	cellOut(t, parent, `
import os, signal
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append('usr1'))
signal.signal(signal.SIGUSR2, signal.SIG_IGN)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
`)
	want := cellOut(t, parent, status)
	fork := mustFork(t, z, parent)
	if got := cellOut(t, fork, status); got != want {
		t.Fatalf("the fork's dispositions %s, want its parent's %s", got, want)
	}
	if got := cellOut(t, fork, "os.kill(os.getpid(), signal.SIGUSR1); os.kill(os.getpid(), signal.SIGUSR2); print(got)"); got != "['usr1']\n" {
		t.Fatalf("signals in the fork: %q", got)
	}
}

// A fork is a sandbox of its own: another uid, PID namespace and work
// dir; the parent's processes are not there to see or signal.
func TestSessionForkIsolated(t *testing.T) {
	z, parent := forkParent(t)
	puid := cellOut(t, parent, "import os, random\nprint(os.getuid(), os.getpid())")
	fork := mustFork(t, z, parent)
	fuid := cellOut(t, fork, "print(os.getuid(), os.getpid())")
	if puid == fuid || strings.Fields(puid)[1] != strings.Fields(fuid)[1] {
		t.Errorf("parent is uid/pid %q, fork %q: want other uids, the same pid in their own namespaces", puid, fuid)
	}
	// The fork ran os.fork's after-fork hooks: random is reseeded.
	if p, f := cellOut(t, parent, "print(random.random())"), cellOut(t, fork, "print(random.random())"); p == f {
		t.Errorf("parent and fork drew the same random number %q", p)
	}
	// Every pid the fork can name is its own, or no process it may signal.
	got := cellOut(t, fork, `
import os, signal
seen = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
hit = []
for pid in range(1, 4096):
    try:
        os.kill(pid, 0)
        hit.append(pid)
    except (ProcessLookupError, PermissionError):
        pass
print(seen, hit)
`)
	if got != "[2] [2]\n" {
		t.Errorf("the fork sees and may signal %q, want only itself", got)
	}
}

// A session that runs another thread or process, maps shared memory or
// nests directories past the copy's depth is refused a fork, and goes on
// as it was.
func TestSessionForkRefused(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e, "numpy")
	for _, c := range []struct{ name, setup, undo, reason string }{
		{"thread", "import threading\nev = threading.Event()\nth = threading.Thread(target=ev.wait)\nth.start()", "ev.set(); th.join()", "threads"},
		{"process", "import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])", "p.kill(); p.wait()", "processes"},
		{"shared memory", "import mmap\nm = mmap.mmap(-1, 4096)\nm[:2] = b'hi'", "m.close()", "shared memory"},
		{"deep directories", "import os\nos.makedirs('/'.join(['d'] * 130))", "import shutil\nshutil.rmtree('d')", "nest deeper"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := newTestSession(t, z, nil)
			cellOut(t, parent, "x = 1\n"+c.setup)
			_, err := forkSession(t, z, parent)
			wantRefused(t, err, c.reason)
			cellOut(t, parent, c.undo)
			if got := cellOut(t, parent, "print(x)"); got != "1\n" {
				t.Fatalf("parent after a refused fork printed %q", got)
			}
			fork, err := forkSession(t, z, parent)
			if err != nil {
				t.Fatalf("Fork once %s is gone: %v", c.name, err)
			}
			if got := cellOut(t, fork, "print(x + 1)"); got != "2\n" {
				t.Fatalf("fork printed %q", got)
			}
		})
	}
}

// An interpreter that runs caller code between cells (here a signal
// handler that spins, with no system call, for longer than a fork waits
// for one) cannot be stopped where a copy can be made: refused, and the
// session goes on.
func TestSessionForkRefusedBusy(t *testing.T) {
	z, parent := forkParent(t)
	// The fork's kernel first: under an emulated CPU starting it takes
	// longer than the handler spins.
	dst := newTestSession(t, z, nil)
	// The handler spins on a flag, with no system call (a clock might
	// make one: without the vDSO, as under TCG, it does), until SIGUSR1's
	// handler, run from within it, sets the flag.
	cellOut(t, parent, fmt.Sprintf(`
import signal
x = 1
stop = False
def spin(*_):
    open('/work/spinning', 'w').close()
    while not stop:
        pass
def done(*_):
    global stop
    stop = True
signal.signal(signal.SIGUSR1, done)
signal.signal(signal.SIGALRM, spin)
signal.setitimer(signal.ITIMER_REAL, %g)   # after the cell has answered
`, slow(200*time.Millisecond).Seconds()))
	// Spinning, not on its way: the file made, its descriptor closed
	// (close is the handler's last system call), and the process in user
	// space. A fork that caught it in open or close would find it at a
	// system call, and go ahead.
	deadline := time.Now().Add(slow(20 * time.Second))
	for !spinning(t, parent) {
		if time.Now().After(deadline) {
			t.Fatal("the handler did not start between cells")
		}
		time.Sleep(10 * time.Millisecond) // polling for a state the sandbox reaches
	}
	ctx, cancel := context.WithTimeout(context.Background(), slow(time.Minute))
	defer cancel()
	wantRefused(t, parent.Fork(ctx, dst), "busy")
	if err := unix.Kill(parent.w.jobPid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if got := cellOut(t, parent, "print(x)"); got != "1\n" {
		t.Fatalf("parent after a refused fork printed %q", got)
	}
	fork := mustFork(t, z, parent)
	if got := cellOut(t, fork, "print(x + 1)"); got != "2\n" {
		t.Fatalf("fork printed %q", got)
	}
}

// spinning reports whether s's process has made /work/spinning, closed it,
// and is running in user space (see TestSessionForkRefusedBusy).
func spinning(t *testing.T, s *Session) bool {
	t.Helper()
	f, _, reason, err := s.OpenFile("spinning", 1)
	if err != nil {
		t.Fatal(err)
	}
	if reason != "" {
		return false
	}
	f.Close()
	pid := s.w.jobPid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasSuffix(target, "/spinning") {
			return false
		}
	}
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.HasPrefix(string(sc), "running")
}

// A fork is made on its parent's zygote: a session started on another
// (the sessions' zygote restarted since) is refused, and both go on.
func TestSessionForkRefusedOtherZygote(t *testing.T) {
	z, parent := forkParent(t)
	other := newTestZygote(t, newTestEngine(t, nil), "numpy")
	cellOut(t, parent, "x = 1")
	_, err := forkSession(t, other, parent)
	wantRefused(t, err, "zygote")
	if got := cellOut(t, mustFork(t, z, parent), "print(x)"); got != "1\n" {
		t.Fatalf("fork printed %q", got)
	}
}

// A copy that outlasts copyTimeout is abandoned, its fork killed; the
// parent goes on as it was, and forks once copies are quick again.
func TestSessionForkTimeout(t *testing.T) {
	z, parent := forkParent(t)
	cellOut(t, parent, "x = 1")
	old := copyTimeout
	copyTimeout = time.Nanosecond
	dst, err := forkSession(t, z, parent)
	copyTimeout = old
	if err == nil {
		t.Fatal("Fork within a nanosecond succeeded")
	}
	select {
	case <-dst.dead:
	case <-time.After(slow(10 * time.Second)):
		t.Errorf("the abandoned fork is alive (Fork: %v)", err)
	}
	if got := cellOut(t, parent, "x += 1\nprint(x)"); got != "2\n" {
		t.Fatalf("parent after an abandoned fork printed %q", got)
	}
	if got := cellOut(t, mustFork(t, z, parent), "print(x)"); got != "2\n" {
		t.Fatalf("fork printed %q", got)
	}
}

// A fork outlives its parent, and forks again.
func TestSessionForkOutlivesParent(t *testing.T) {
	z, parent := forkParent(t)
	cellOut(t, parent, "n = 1")
	fork := mustFork(t, z, parent)
	parent.Close()
	cellOut(t, fork, "n += 1")
	grand := mustFork(t, z, fork)
	if got := cellOut(t, grand, "n += 1\nprint(n)"); got != "3\n" {
		t.Fatalf("a fork's fork printed %q", got)
	}
	if got := cellOut(t, fork, "print(n)"); got != "2\n" {
		t.Fatalf("the fork printed %q", got)
	}
}
