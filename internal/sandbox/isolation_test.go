package sandbox

import (
	"os"
	"strings"
	"testing"
	"time"

	"boxer"

	"golang.org/x/sys/unix"
)

// pyCheck is a Python program that prints one line per probe; each test
// case names the probe's expected line.
type pyCheck struct {
	name string
	code string // prints exactly want
	want string
}

func runChecks(t *testing.T, paths []runPath, prelude string, checks []pyCheck) {
	t.Helper()
	for _, p := range paths {
		for _, c := range checks {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				res := p.run(t, pyJob(prelude+"\n"+c.code, boxer.Limits{}))
				if res.Status != boxer.StatusOK {
					t.Fatalf("status %s exit %d signal %s\nstderr: %s", res.Status, res.ExitCode, res.Signal, res.Stderr.Data)
				}
				if got := strings.TrimSpace(string(res.Stdout.Data)); got != c.want {
					t.Fatalf("got %q, want %q\nstderr: %s", got, c.want, res.Stderr.Data)
				}
			})
		}
	}
}

// errnoOf prints the errno name an expression raises, or "ok".
const errnoPrelude = `
import errno, os, socket, sys
def errname(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
`

// No network: every connect fails at once, whatever the address. Only
// loopback and documentation addresses are used as targets.
func TestNetworkDenied(t *testing.T) {
	_, paths := bothPaths(t, nil)
	connect := func(fam, addr string) string {
		return `s = socket.socket(socket.` + fam + `, socket.SOCK_STREAM); s.settimeout(5); print(errname(lambda: s.connect(` + addr + `)))`
	}
	// UDP reaches nothing outside the sandbox and is refused outright
	// (its buffers escape cgroup v1's memory limit).
	udp := `print(errname(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("198.51.100.7", 53))))`
	runChecks(t, paths, errnoPrelude, []pyCheck{
		{"tcp to documentation address", connect("AF_INET", `("192.0.2.1", 80)`), "ENETUNREACH"},
		{"tcp to another documentation address", connect("AF_INET", `("203.0.113.9", 443)`), "ENETUNREACH"},
		{"udp refused", udp, "EPERM"},
		{"ipv6 to documentation address", connect("AF_INET6", `("2001:db8::1", 80)`), "ENETUNREACH"},
		{"loopback has no host services", connect("AF_INET", `("127.0.0.1", 22)`), "ECONNREFUSED"},
		{"dns fails", "try:\n    socket.getaddrinfo('example.com', 80)\n    print('resolved')\nexcept socket.gaierror:\n    print('gaierror')", "gaierror"},
		{"interfaces are only lo", `print([l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]])`, "['lo']"},
		{"netlink refused", `print(errname(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)))`, "EPERM"},
		{"netlink stream refused", `print(errname(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_STREAM, 0)))`, "EAFNOSUPPORT"},
		{"packet sockets refused", `print(errname(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)))`, "EPERM"},
		{"vsock refused", `print(errname(lambda: socket.socket(40, socket.SOCK_STREAM, 0)))`, "EAFNOSUPPORT"},
		{"raw inet sockets refused", `print(errname(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)))`, "EPERM"},
	})
}

// The filesystem: read-only everywhere but the work dir and /tmp; host
// secrets and boxer's own files are not there at all.
func TestFilesystem(t *testing.T) {
	e, paths := bothPaths(t, nil)
	w := func(p string) string { return `print(errname(lambda: open("` + p + `", "w")))` }
	exists := func(p string) string { return `print(os.path.exists("` + p + `"))` }
	runChecks(t, paths, errnoPrelude, []pyCheck{
		{"write /etc", w("/etc/x"), "EROFS"},
		{"write /usr", w("/usr/lib/x"), "EROFS"},
		{"write /", w("/x"), "EROFS"},
		{"write /dev", w("/dev/x"), "EROFS"},
		{"write /proc/sys", w("/proc/sys/kernel/hostname"), "EROFS"},
		{"write work dir", w("/work/x"), "ok"},
		{"write /tmp", w("/tmp/x"), "ok"},
		{"write /dev/shm", w("/dev/shm/x"), "ok"},
		{"write /dev/null", w("/dev/null"), "ok"},
		{"no shadow", exists("/etc/shadow"), "False"},
		{"no /root", exists("/root"), "False"},
		{"no /sys", exists("/sys"), "False"},
		{"no /home", exists("/home"), "False"},
		{"no /var", exists("/var"), "False"},
		{"no boxer state dir", exists(e.cfg.StateDir), "False"},
		{"no host resolver", exists("/etc/resolv.conf"), "False"},
		{"no setuid binaries", `print(sorted(os.listdir("/usr/bin")))`, "['python', 'python3', 'python3.11']"},
		{"exec from tmp refused", "open('/tmp/x.sh','w').write('#!/bin/sh\\n'); os.chmod('/tmp/x.sh', 0o755)\nprint(errname(lambda: os.execv('/tmp/x.sh', ['x'])))", "EACCES"},
		{"mknod refused", `print(errname(lambda: os.mknod("/tmp/dev", 0o600 | 0o020000, os.makedev(1, 3))))`, "EPERM"},
		{"hard link to a root file refused", `print(errname(lambda: os.link("/etc/passwd", "/tmp/p")))`, "EXDEV"},
		{"proc/1 hidden", exists("/proc/1/environ"), "False"},
		{"kcore hidden or masked", `print(os.path.exists("/proc/kcore") and os.stat("/proc/kcore").st_size > 0)`, "False"},
		{"cwd is the work dir", `print(os.getcwd(), sorted(os.listdir(".")))`, "/work ['main.py']"},
	})
}

// Identity and privileges: an unprivileged uid, no capabilities, no new
// privileges, seccomp on, its own hostname and PID namespace.
func TestIdentity(t *testing.T) {
	_, paths := bothPaths(t, nil)
	status := `print([l.split()[1] for l in open("/proc/self/status") if l.split(":")[0] == "%s"][0])`
	runChecks(t, paths, errnoPrelude, []pyCheck{
		// uid 1000 in a cold sandbox, 1000+slot in a warm child: never 0,
		// one id for real, effective, saved and group, no other groups.
		{"uid", `print(os.getuid() >= 1000, len(set(os.getresuid() + os.getresgid())), os.getgroups())`, "True 1 []"},
		{"setgroups denied", `print(open("/proc/self/setgroups").read().strip(), errname(lambda: os.setgroups([])))`, "deny EPERM"},
		{"no effective caps", strings.Replace(status, "%s", "CapEff", 1), "0000000000000000"},
		{"no permitted caps", strings.Replace(status, "%s", "CapPrm", 1), "0000000000000000"},
		{"empty bounding set", strings.Replace(status, "%s", "CapBnd", 1), "0000000000000000"},
		{"no ambient caps", strings.Replace(status, "%s", "CapAmb", 1), "0000000000000000"},
		{"no_new_privs", strings.Replace(status, "%s", "NoNewPrivs", 1), "1"},
		{"seccomp filter", strings.Replace(status, "%s", "Seccomp", 1), "2"},
		{"hostname", `print(socket.gethostname())`, "sandbox"},
		{"sees only its own processes", `print([p for p in os.listdir("/proc") if p.isdigit()] == [str(os.getpid())])`, "True"},
		{"cannot signal init", `print(errname(lambda: os.kill(1, 9)))`, "EPERM"},
		{"cgroup namespace", `print(open("/proc/self/cgroup").read().splitlines()[-1])`, "0::/"},
		{"environment is boxer's fixed one", `print(sorted(os.environ))`, "['HOME', 'LANG', 'LOGNAME', 'MPLBACKEND', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED', 'TMPDIR', 'USER']"},
		{"users are the sandbox's", `import pwd; print(sorted(set(p.pw_name for p in pwd.getpwall())), pwd.getpwuid(os.getuid()).pw_name)`, "['nobody', 'root', 'sandbox'] sandbox"},
	})
}

// The host environment never reaches the program.
func TestHostEnvironmentInvisible(t *testing.T) {
	t.Setenv("BOXER_TEST_SECRET", "hunter2")
	e := newTestEngine(t, nil)
	res := runPy(t, e, "import os\nprint(os.environ.get('BOXER_TEST_SECRET'))\nprint(open('/proc/self/environ','rb').read().count(b'hunter2'))", boxer.Limits{})
	if got := string(res.Stdout.Data); got != "None\n0\n" {
		t.Fatalf("got %q", got)
	}
	host, _ := os.Hostname()
	res = runPy(t, e, "import socket; print(socket.gethostname())", boxer.Limits{})
	if strings.TrimSpace(string(res.Stdout.Data)) == host {
		t.Fatalf("sandbox sees the host's hostname %q", host)
	}
}

// The scientific stack the service promises works under every protection.
func TestScientificStack(t *testing.T) {
	_, paths := bothPaths(t, nil)
	code := `
import numpy, pandas, scipy.linalg, matplotlib
import matplotlib.pyplot as plt
df = pandas.DataFrame({"a": [1, 2, 3]})
plt.plot(df["a"]); plt.savefig("chart.png")
import multiprocessing, subprocess, threading
with multiprocessing.Pool(2) as p: r = p.map(abs, [-1, -2])
print(int(numpy.dot([1, 2], [3, 4])), int(df["a"].sum()), r, round(float(scipy.linalg.det([[1, 2], [3, 4]]))))
`
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			// The imports alone take 20 to 40 s of an emulated CPU.
			job := pyJob(code, boxer.Limits{WallTime: slow(30 * time.Second)})
			job.Artifacts = []string{"chart.png"}
			res := p.run(t, job)
			if res.Status != boxer.StatusOK || string(res.Stdout.Data) != "11 6 [1, 2] -2\n" {
				t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout.Data, res.Stderr.Data)
			}
			if len(res.Artifacts) != 1 || !strings.HasPrefix(string(res.Artifacts[0].Content), "\x89PNG") {
				t.Fatalf("no PNG artifact: %+v", res.MissingArtifacts)
			}
		})
	}
}

// pytest runs through the command, the way /v1/run-python uses it, warm
// from a zygote that holds pytest and its plugins ready.
func TestPytestCommand(t *testing.T) {
	_, z, paths := bothPathsPreImporting(t, nil, "pytest")
	// The plugins pytest imports as it configures itself are loaded
	// already (_FIRST_USE in zygote.py).
	res := runWarm(t, z, &boxer.Job{Argv: []string{"python", "-c", "import sys; print('_pytest.junitxml' in sys.modules, 'pdb' in sys.modules)"}})
	wantStdout(t, res, "True True\n")
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			res := p.run(t, &boxer.Job{
				Argv: []string{"python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_math.py"},
				Files: []boxer.File{
					{Path: "utils.py", Content: []byte("def add(a, b):\n    return a + b\n")},
					{Path: "test_math.py", Content: []byte("from utils import add\n\ndef test_add():\n    assert add(2, 2) == 4\n\ndef test_fail():\n    assert add(1, 1) == 3\n")},
				},
			})
			if res.Status != boxer.StatusNonzeroExit || res.ExitCode != 1 || !strings.Contains(string(res.Stdout.Data), "1 failed, 1 passed") {
				t.Fatalf("status %s exit %d stdout %s stderr %s", res.Status, res.ExitCode, res.Stdout.Data, res.Stderr.Data)
			}
		})
	}
}

// A command that does not exist is the caller's outcome, like a shell's.
func TestCommandNotFound(t *testing.T) {
	e := newTestEngine(t, nil)
	res := runJob(t, e, &boxer.Job{Argv: []string{"gcc", "x.c"}})
	if res.Status != boxer.StatusNonzeroExit || res.ExitCode != 127 || !strings.Contains(string(res.Stderr.Data), "cannot run") {
		t.Fatalf("status %s exit %d stderr %q", res.Status, res.ExitCode, res.Stderr.Data)
	}
}

// Kernel budgets the host shares with every run are capped per run
// (socket buffers, pending signals) or out of reach: inotify, charged to
// host root's budget for every sandbox together, is absent.
func TestSharedKernelBudgetsCapped(t *testing.T) {
	_, paths := bothPaths(t, nil)
	for _, tc := range []struct {
		name, code, want string
		lim              boxer.Limits
	}{
		// Loopback TCP with big buffers, never read: on cgroup v1 these sit
		// outside the memory limit unless memory.kmem.tcp caps them.
		{"tcp buffers", `
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(512)
total, keep, chunk = 0, [], b"x" * (1 << 16)
while total < (400 << 20) and len(keep) < 200:
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    c.connect(srv.getsockname()); a, _ = srv.accept(); c.setblocking(False); keep += [c, a]
    while True:
        try: total += c.send(chunk)
        except OSError: break
print(total < (100 << 20))`, "True", boxer.Limits{MemoryBytes: 64 << 20}},
		{"inotify instances", `
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while libc.inotify_init1(0) >= 0: n += 1
print(n, errno.errorcode[ctypes.get_errno()])`, "0 ENOSYS", boxer.Limits{}},
		// sigqueue fails with EAGAIN at the cap (kill() would drop silently).
		{"pending signals", `
import ctypes, os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
libc = ctypes.CDLL(None, use_errno=True)
q = 0
while q < 100000 and libc.sigqueue(os.getpid(), signal.SIGRTMIN, ctypes.c_void_p(0)) == 0: q += 1
print(q)`, "1024", boxer.Limits{}},
	} {
		for _, p := range paths {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				res := p.run(t, pyJob(tc.code, tc.lim))
				if res.Status != boxer.StatusOK || strings.TrimSpace(string(res.Stdout.Data)) != tc.want {
					t.Fatalf("status %s stdout %q, want %q\nstderr: %s", res.Status, res.Stdout.Data, tc.want, res.Stderr.Data)
				}
			})
		}
	}
}

// A run does not depend on the umask boxer was started with: under 077 the
// mount points stay reachable, and the program gets umask 022 and its
// files 0644 in 0755 directories, on both paths.
func TestBoxersUmaskDoesNotReachRuns(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	_, paths := bothPaths(t, nil)
	code := "import os, stat\nm = os.umask(0); print(oct(m), oct(stat.S_IMODE(os.stat('main.py').st_mode)), oct(stat.S_IMODE(os.stat('d').st_mode)), open('d/f.txt').read())"
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			job := pyJob(code, boxer.Limits{})
			job.Files = append(job.Files, boxer.File{Path: "d/f.txt", Content: []byte("x")})
			res := p.run(t, job)
			if got, want := strings.TrimSpace(string(res.Stdout.Data)), "0o22 0o644 0o755 x"; res.Status != boxer.StatusOK || got != want {
				t.Fatalf("status %s stdout %q, want ok %q\nstderr: %s", res.Status, got, want, res.Stderr.Data)
			}
		})
	}
}
