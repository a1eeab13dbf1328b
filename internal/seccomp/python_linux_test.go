//go:build amd64 || arm64

package seccomp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// python is the interpreter the sandbox runs: Debian's, with the scientific
// stack from apt, not whatever python3 comes first on PATH.
const python = "/usr/bin/python3"

// pythonProbe replaces the filtered probe process with python, the way the
// sandbox's child execs the job: the filter is already on the thread, and
// exec keeps it. Arguments come from the probe's command line.
func pythonProbe() string {
	argv := append([]string{python}, os.Args[1:]...)
	err := syscall.Exec(python, argv, os.Environ())
	return "execve: " + err.Error()
}

// The scripts assert inside Python and print OK as their last line; a
// refused call that Python does not survive shows as a traceback on stderr.
var pythonScripts = map[string]string{
	// The issue's own check, verbatim.
	"import_stack.py": `import numpy, pandas, matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt; import scipy.linalg, pytest; print(numpy.dot([1,2],[3,4]))
print("OK")
`,
	"use_stack.py": `import os, sys
import numpy as np, pandas as pd, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import scipy.linalg, scipy.optimize, scipy.sparse.linalg
a = np.random.default_rng(0).random((300, 300)) + 300 * np.eye(300)
assert np.allclose(a @ scipy.linalg.inv(a), np.eye(300))
np.linalg.svd(a)
assert abs(scipy.optimize.minimize_scalar(lambda x: (x - 2) ** 2).x - 2) < 1e-6
df = pd.DataFrame({"k": [1, 2, 1], "v": [1.0, 2.0, 3.0]})
assert df.groupby("k").v.sum().to_dict() == {1: 4.0, 2: 2.0}
df.to_csv(os.path.join(sys.argv[1], "df.csv"))
assert pd.read_csv(os.path.join(sys.argv[1], "df.csv")).shape == (3, 3)
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [3, 1, 2])
fig.savefig(os.path.join(sys.argv[1], "plot.png"))
assert os.path.getsize(os.path.join(sys.argv[1], "plot.png")) > 0
print("OK")
`,
	"test_sample.py": `import pytest

@pytest.mark.parametrize("n", [1, 2, 3])
def test_square(n):
    assert n * n == n ** 2

def test_tmp_path(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("x")
    assert p.read_text() == "x"

def test_raises():
    with pytest.raises(ZeroDivisionError):
        1 / 0
`,
	"multiprocessing_all.py": `import multiprocessing as mp
from multiprocessing import shared_memory

def square(x):
    return x * x

if __name__ == "__main__":
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            assert pool.map(square, range(10)) == [x * x for x in range(10)], method
        q = ctx.Queue()
        p = ctx.Process(target=q.put, args=(method,))
        p.start()
        assert q.get(timeout=60) == method
        p.join()
        assert p.exitcode == 0, (method, p.exitcode)
    lock = mp.Lock()
    with lock:
        pass
    shm = shared_memory.SharedMemory(create=True, size=64)
    shm.buf[0] = 7
    other = shared_memory.SharedMemory(name=shm.name)
    assert other.buf[0] == 7
    other.close()
    shm.close()
    shm.unlink()
    print("OK")
`,
	"subprocess_all.py": `import os, subprocess, sys
subprocess.run(["/bin/true"], check=True)
assert subprocess.check_output(["/bin/sh", "-c", "echo hi | cat"]) == b"hi\n"
p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
assert p.communicate(b"echo")[0] == b"echo"
assert os.waitpid(os.posix_spawn("/bin/true", ["true"], os.environ), 0)[1] == 0
pid = os.fork()
if pid == 0:
    os._exit(3)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3
assert os.system("true") == 0
print("OK")
`,
	"threading_all.py": `import threading, queue, concurrent.futures
import numpy as np
q = queue.Queue()
ts = [threading.Thread(target=q.put, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
assert sorted(q.get() for _ in range(8)) == list(range(8))
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    assert list(ex.map(lambda n: float(np.ones((n, n)).sum()), [10, 20])) == [100.0, 400.0]
ev = threading.Event()
threading.Timer(0.01, ev.set).start()
assert ev.wait(60)
print("OK")
`,
	"stdlib_misc.py": `import asyncio, ctypes, errno, fcntl, hashlib, mmap, os, resource, select, shutil
import signal, socket, sqlite3, ssl, sys, tempfile, termios, time, uuid, zlib
d = sys.argv[1]
# Sockets of the allowed families work; the others fail the way a kernel
# without them would.
srv = socket.create_server(("127.0.0.1", 0))
c = socket.create_connection(srv.getsockname())
s, _ = srv.accept()
c.sendall(b"ping"); assert s.recv(4) == b"ping"
a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
socket.getaddrinfo("localhost", 80)
# No datagram-type sockets outside AF_UNIX (UDP, raw, packet).
for fam, typ in ((socket.AF_INET6, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):
    try:
        socket.socket(fam, typ)
        raise AssertionError(fam)
    except OSError as e:
        assert e.errno == errno.EPERM, e
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    raise AssertionError("vsock")
except OSError as e:
    assert e.errno == errno.EAFNOSUPPORT, e
# The refusals Python can see.
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    raise AssertionError("TIOCSTI")
except OSError as e:
    assert e.errno == errno.EPERM, e
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0) == -1 and ctypes.get_errno() == errno.EPERM
assert libc.abs(-3) == 3
async def main():
    r, w = await asyncio.open_connection(*srv.getsockname())
    w.close()
    await asyncio.sleep(0.01)
asyncio.run(main())
# Files, memory, signals, time, randomness.
p = os.path.join(d, "f"); open(p, "w").write("data"); shutil.copyfile(p, p + "2")
assert open(p + "2").read() == "data"
os.mkfifo(os.path.join(d, "fifo"))
with open(p) as f: fcntl.flock(f, fcntl.LOCK_EX)
with tempfile.TemporaryDirectory() as t: open(os.path.join(t, "x"), "w").close()
m = mmap.mmap(-1, 4096); m[0] = 1; m.close()
os.close(os.memfd_create("x"))
os.close(os.pidfd_open(os.getpid()))
got = []
signal.signal(signal.SIGALRM, lambda *a: got.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)  # repeating: no lost wakeup before pause
while not got: signal.pause()
signal.setitimer(signal.ITIMER_REAL, 0)
ep = select.epoll(); ep.close()
time.sleep(0.001); time.monotonic(); time.process_time()
assert len(os.urandom(16)) == 16; uuid.uuid4()
resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
os.sched_setaffinity(0, os.sched_getaffinity(0)); os.cpu_count(); os.getloadavg()
sqlite3.connect(":memory:").execute("select 1").fetchall()
ssl.create_default_context(); hashlib.sha256(b"x").hexdigest(); zlib.compress(b"x")
import faulthandler; faulthandler.enable()
fd = os.open(p, os.O_RDWR); os.posix_fallocate(fd, 0, 4096); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
with open(p + "3", "wb") as out: os.sendfile(out.fileno(), fd, 0, 4)
os.close(fd); os.statvfs(d); shutil.disk_usage(d)
os.close(os.eventfd(0))
mfd, sfd = os.openpty(); os.get_terminal_size(sfd); os.close(mfd); os.close(sfd)
child = os.fork()
if child == 0: os._exit(0)
assert os.waitid(os.P_PID, child, os.WEXITED).si_status == 0
print("OK")
`,
}

func TestPythonUnderFilter(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not installed: %v", python, err)
	}
	check := exec.Command(python, "-c", "import numpy, pandas, matplotlib, scipy, pytest")
	if out, err := check.CombinedOutput(); err != nil {
		t.Skipf("the scientific stack is not installed for %s (apt-get install python3-numpy python3-pandas "+
			"python3-matplotlib python3-scipy python3-pytest): %v\n%s", python, err, out)
	}
	dir := t.TempDir()
	for name, src := range pythonScripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"HOME=" + dir, // matplotlib and pytest write caches
		"MPLCONFIGDIR=" + filepath.Join(dir, "mpl"),
		"PYTHONDONTWRITEBYTECODE=1",
	}
	script := func(name string) []string { return []string{filepath.Join(dir, name), dir} }
	tests := []struct {
		name string
		args []string
		want string // in stdout
	}{
		{"import the stack", script("import_stack.py"), "11\nOK"},
		{"use the stack", script("use_stack.py"), "OK"},
		{"pytest", []string{"-m", "pytest", "-q", "-p", "no:cacheprovider", filepath.Join(dir, "test_sample.py")}, "5 passed"},
		{"multiprocessing", script("multiprocessing_all.py"), "OK"},
		{"subprocess", script("subprocess_all.py"), "OK"},
		{"threading", script("threading_all.py"), "OK"},
		{"stdlib", script("stdlib_misc.py"), "OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runProbe(t, "python", true, tt.args, env)
			if r.code != 0 || strings.HasPrefix(r.outcome, "signal=") || !strings.Contains(r.stdout, tt.want) {
				t.Fatalf("python %s: exit %d, outcome %q, want %q in stdout\nstdout:\n%s\nstderr:\n%s",
					strings.Join(tt.args, " "), r.code, r.outcome, tt.want, r.stdout, r.stderr)
			}
		})
	}
}
