package sandbox

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"boxer"
)

// Each limit is enforced and reported with the right status.
func TestOutcomes(t *testing.T) {
	_, paths := bothPaths(t, nil)
	type outcomeCase struct {
		name      string
		code      string
		lim       boxer.Limits
		status    boxer.Status
		exit      int
		signal    string
		stdout    string // exact, unless empty
		stderrHas string
		stdoutHas string
	}
	cases := []outcomeCase{
		{name: "ok", code: "print(2 + 2)", status: boxer.StatusOK, stdout: "4\n"},
		{name: "factorial", code: "import math; print(math.factorial(20))", status: boxer.StatusOK, stdout: "2432902008176640000\n"},
		{name: "exit code", code: "import sys; sys.exit(3)", status: boxer.StatusNonzeroExit, exit: 3},
		{name: "exception", code: "print('before')\nraise ValueError('boom')", status: boxer.StatusNonzeroExit, exit: 1,
			stdout: "before\n", stderrHas: "ValueError: boom"},
		{name: "signal", code: "import os, signal; os.kill(os.getpid(), signal.SIGABRT)", status: boxer.StatusSignaled, exit: -1, signal: "SIGABRT"},
		{name: "timeout keeps partial output", code: "import time\nprint('started')\ntime.sleep(60)",
			lim: boxer.Limits{WallTime: time.Second}, status: boxer.StatusTimeout, exit: -1, signal: "SIGKILL", stdout: "started\n"},
		{name: "busy loop timeout", code: "while True: pass",
			lim: boxer.Limits{WallTime: time.Second}, status: boxer.StatusTimeout, exit: -1, signal: "SIGKILL"},
		{name: "oom", code: "x = []\nwhile True: x.append(bytearray(1 << 20))",
			lim: boxer.Limits{MemoryBytes: 64 << 20}, status: boxer.StatusOOM, exit: -1, signal: "SIGKILL"},
		{name: "oom in tmpfs counts as memory", code: "f = open('/tmp/fill', 'wb')\nwhile True: f.write(b'x' * (1 << 20))",
			lim: boxer.Limits{MemoryBytes: 64 << 20, DiskBytes: 512 << 20}, status: boxer.StatusOOM, exit: -1, signal: "SIGKILL"},
		{name: "tmpfs size cap", code: "import errno\nf = open('/tmp/fill', 'wb')\ntry:\n  while True: f.write(b'x' * (1 << 20)); f.flush()\nexcept OSError as e: print(errno.errorcode[e.errno])",
			lim: boxer.Limits{DiskBytes: 8 << 20}, status: boxer.StatusOK, stdout: "ENOSPC\n"},
		{name: "work dir size cap", code: "import errno\nf = open('big', 'wb')\ntry:\n  while True: f.write(b'x' * (1 << 20)); f.flush()\nexcept OSError as e: print(errno.errorcode[e.errno])",
			lim: boxer.Limits{DiskBytes: 8 << 20}, status: boxer.StatusOK, stdout: "ENOSPC\n"},
		{name: "inode cap", code: "import errno, os\nos.mkdir('/tmp/d')\ntry:\n  for i in range(100000): open('/tmp/d/%d' % i, 'w').close()\nexcept OSError as e: print(errno.errorcode[e.errno], i < 20000)",
			status: boxer.StatusOK, stdout: "ENOSPC True\n"},
		{name: "file size rlimit", code: "import errno\ntry:\n  open('/tmp/f', 'wb').write(b'x' * (2 << 20))\nexcept OSError as e: print(errno.errorcode[e.errno])",
			lim: boxer.Limits{FileSizeBytes: 1 << 20}, status: boxer.StatusOK, stdout: "EFBIG\n"},
		{name: "open files rlimit", code: "import errno\nfs = []\ntry:\n  while True: fs.append(open('/dev/null'))\nexcept OSError as e: print(errno.errorcode[e.errno], len(fs) < 64)",
			lim: boxer.Limits{OpenFiles: 64}, status: boxer.StatusOK, stdout: "EMFILE True\n"},
		{name: "no core dumps", code: "import resource; print(resource.getrlimit(resource.RLIMIT_CORE))", status: boxer.StatusOK, stdout: "(0, 0)\n"},
		{name: "locked memory capped", code: "import ctypes, errno, mmap\nlibc = ctypes.CDLL(None, use_errno=True)\nm = mmap.mmap(-1, 1 << 20)\nbuf = ctypes.c_char.from_buffer(m)\nprint(libc.mlock(ctypes.addressof(buf), 1 << 20), errno.errorcode[ctypes.get_errno()])",
			status: boxer.StatusOK, stdout: "-1 ENOMEM\n"},
		{name: "no real-time scheduling", code: "import os, errno\ntry:\n  os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\nexcept OSError as e: print(errno.errorcode[e.errno])",
			status: boxer.StatusOK, stdout: "EPERM\n"},
		// POSIX message queues are refused: their bytes count against one
		// budget for every sandbox and host root (seccomp's doc). Their
		// rlimit is 0 too, for runs without seccomp.
		{name: "no POSIX message queues", code: "import ctypes, errno, os, resource\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.mq_open(b'/q', os.O_CREAT | os.O_RDWR, 0o600, None), errno.errorcode[ctypes.get_errno()], resource.getrlimit(resource.RLIMIT_MSGQUEUE))",
			status: boxer.StatusOK, stdout: "-1 ENOSYS (0, 0)\n"},
		{name: "can raise no stack limit", code: "import resource\ntry:\n  resource.setrlimit(resource.RLIMIT_STACK, (64 << 20, 64 << 20))\nexcept ValueError as e: print('refused', resource.getrlimit(resource.RLIMIT_STACK))",
			status: boxer.StatusOK, stdout: "refused (8388608, 8388608)\n"},
		{name: "can raise no hard limit", code: "import resource, errno\ntry:\n  resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))\nexcept ValueError as e: print('refused')",
			status: boxer.StatusOK, stdout: "refused\n"},
		{name: "fork bomb stops at pids limit", code: "import os, errno\nn = 0\ntry:\n  while True:\n    if os.fork() == 0:\n      import time; time.sleep(30)\n    n += 1\nexcept OSError as e: print(errno.errorcode[e.errno], n < 32)",
			lim: boxer.Limits{Pids: 32}, status: boxer.StatusOK, stdout: "EAGAIN True\n"},
		{name: "thread bomb stops at pids limit", code: "import threading, time\nn = 0\ntry:\n  while True:\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1\nexcept RuntimeError as e: print('stopped', n < 32)",
			lim: boxer.Limits{Pids: 32}, status: boxer.StatusOK, stdout: "stopped True\n"},
		{name: "stdin", code: "import sys; print(sys.stdin.read().upper())", status: boxer.StatusOK, stdout: "HELLO\n\n"},
		{name: "no trailing newline", code: "import sys; sys.stdout.write('a'); sys.stderr.write('b')", status: boxer.StatusOK, stdout: "a"},
		{name: "binary output", code: "import sys; sys.stdout.buffer.write(bytes(range(256)))", status: boxer.StatusOK, stdout: string(func() []byte {
			b := make([]byte, 256)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}())},
		{name: "output after closing stdout", code: "import os, sys\nprint('x')\nos.close(1)\nsys.stderr.write('still here')", status: boxer.StatusOK, stdout: "x\n", stderrHas: "still here"},
	}
	for _, p := range paths {
		for _, tc := range cases {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				if p.name == "warm" && tc.lim.DiskBytes != 0 {
					t.Skip("a warm child's tmpfs size is fixed when it is prepared; jobs asking for another size run cold")
				}
				job := pyJob(tc.code, tc.lim)
				if tc.name == "stdin" {
					job.Stdin = []byte("hello\n")
				}
				res := p.run(t, job)
				if res.Status != tc.status || res.ExitCode != tc.exit || res.Signal != tc.signal {
					t.Fatalf("got status %s exit %d signal %q, want %s %d %q\nstdout: %q\nstderr: %q",
						res.Status, res.ExitCode, res.Signal, tc.status, tc.exit, tc.signal, res.Stdout.Data, res.Stderr.Data)
				}
				if tc.stdout != "" && string(res.Stdout.Data) != tc.stdout {
					t.Errorf("stdout %q, want %q (stderr %q)", res.Stdout.Data, tc.stdout, res.Stderr.Data)
				}
				if !strings.Contains(string(res.Stderr.Data), tc.stderrHas) {
					t.Errorf("stderr %q lacks %q", res.Stderr.Data, tc.stderrHas)
				}
				if !strings.Contains(string(res.Stdout.Data), tc.stdoutHas) {
					t.Errorf("stdout %q lacks %q", res.Stdout.Data, tc.stdoutHas)
				}
			})
		}
	}
}

// A timed-out run is killed at its limit, not long after.
func TestTimeoutIsPrompt(t *testing.T) {
	e := newTestEngine(t, nil)
	res := runPy(t, e, "import time; time.sleep(60)", boxer.Limits{WallTime: 500 * time.Millisecond})
	if res.Status != boxer.StatusTimeout {
		t.Fatalf("status %s", res.Status)
	}
	if res.Wall < 500*time.Millisecond || res.Wall > 3*time.Second {
		t.Fatalf("wall %v, want just over 500ms", res.Wall)
	}
}

// The CPU quota holds: a busy loop on half a CPU gets about half of the wall.
func TestCPUQuota(t *testing.T) {
	e := newTestEngine(t, nil)
	code := "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 2: pass"
	res := runPy(t, e, code, boxer.Limits{CPUs: 0.25})
	if res.Status != boxer.StatusOK {
		t.Fatalf("status %s: %s", res.Status, res.Stderr.Data)
	}
	ratio := res.CPU.Seconds() / res.Wall.Seconds()
	t.Logf("cpu %v wall %v ratio %.2f", res.CPU, res.Wall, ratio)
	if ratio > 0.4 {
		t.Fatalf("cpu/wall %.2f on a 0.25 CPU quota", ratio)
	}
}

// 10 MiB on each stream: the program is never blocked or killed for it,
// the first 1 MiB is kept and the total is counted.
func TestOutputFlood(t *testing.T) {
	e := newTestEngine(t, nil)
	code := "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(10):\n  sys.stdout.buffer.write(chunk); sys.stderr.buffer.write(chunk)\nprint('done', file=sys.stderr)"
	res := runPy(t, e, code, boxer.Limits{})
	if res.Status != boxer.StatusOK {
		t.Fatalf("status %s", res.Status)
	}
	for name, out := range map[string]boxer.Output{"stdout": res.Stdout, "stderr": res.Stderr} {
		if !out.Truncated || len(out.Data) != 1<<20 || !bytes.Equal(out.Data, bytes.Repeat([]byte("x"), 1<<20)) {
			t.Errorf("%s: truncated %v, kept %d bytes", name, out.Truncated, len(out.Data))
		}
	}
	if res.Stdout.Bytes != 10<<20 || res.Stderr.Bytes != 10<<20+5 {
		t.Errorf("counted %d and %d bytes", res.Stdout.Bytes, res.Stderr.Bytes)
	}
}

// Memory peak and CPU time are reported from the cgroup.
func TestUsageReported(t *testing.T) {
	e := newTestEngine(t, nil)
	res := runPy(t, e, "b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1", boxer.Limits{})
	if res.Status != boxer.StatusOK {
		t.Fatalf("status %s: %s", res.Status, res.Stderr.Data)
	}
	if res.MemoryPeak < 100<<20 || res.MemoryPeak > 200<<20 {
		t.Errorf("memory peak %d, want a little over 100 MiB", res.MemoryPeak)
	}
	if res.CPU <= 0 {
		t.Errorf("cpu time %v", res.CPU)
	}
}

// Every OOM kill of the run is reported, not only the main process's: eight
// children of 100 MiB under 256 MiB cannot all live, the kernel kills some,
// and the main process, which exits 0, keeps its status. The program counts
// the children it saw die of SIGKILL; the result's count must be the same.
func TestChildOOMKillsReported(t *testing.T) {
	_, paths := bothPaths(t, nil)
	code := `import os, select
go_r, go_w = os.pipe()
alive = []
for i in range(8):
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        b = bytearray(100 << 20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        os.write(ready_w, b"r")
        os.read(go_r, 1)
        os._exit(0)
    os.close(ready_w)
    # Until it holds its memory or is dead: no sleeps.
    select.select([ready_r, os.pidfd_open(pid)], [], [])
    alive.append(pid)
os.close(go_w)
statuses = [os.waitpid(p, 0)[1] for p in alive]
print(sum(1 for s in statuses if os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9))
`
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			res := p.run(t, pyJob(code, boxer.Limits{MemoryBytes: 256 << 20}))
			if res.Status != boxer.StatusOK || res.ExitCode != 0 {
				t.Fatalf("status %s exit %d, want ok 0 (the main process's outcome)\nstderr: %s", res.Status, res.ExitCode, res.Stderr.Data)
			}
			killed := strings.TrimSpace(string(res.Stdout.Data))
			if killed == "0" || killed != fmt.Sprint(res.OOMKills) || !res.OOMKilled() {
				t.Fatalf("the program saw %s children killed; the result says OOMKills %d, OOMKilled %v", killed, res.OOMKills, res.OOMKilled())
			}
		})
	}
}
