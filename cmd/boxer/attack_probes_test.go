package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// programProbe is one program a run may send, and its exact outcome. Its
// code may name the host's {{STATE}} dir, {{DATA}} dir, boxer {{BIN}}ary
// and the server's {{PORT}}: paths and services a run must not reach.
type programProbe struct {
	name  string   // category/probe
	code  string   // after attackPrelude
	want  outcome  // on both paths
	warm  *outcome // the warm path's, where it differs (and why, in a comment)
	alone bool     // its two runs one after the other: each needs the host's CPUs to itself
	check func(t *testing.T, r *reply)
}

func pr(exprs ...string) string { return "print(" + strings.Join(exprs, ", ") + ")" }

// binary256 is what bytes 0 to 255 on stdout come back as: a JSON string
// carries text, so each byte that is not UTF-8 (0x80 to 0xff, alone) is
// U+FFFD; the response is valid JSON and nothing is lost silently (the
// count of bytes is the caller's to compare with stdout_truncated off).
var binary256 = func() string {
	var b strings.Builder
	for i := 0; i < 128; i++ {
		b.WriteByte(byte(i))
	}
	return b.String() + strings.Repeat("\uFFFD", 128)
}()

// cpuWithinQuota: the run's CPU time is at most its 1-CPU quota's share of
// its wall time (with slack for the quota's period); five busy tasks on a
// 2-core host would take twice the wall time without the quota.
func cpuWithinQuota(t *testing.T, r *reply) {
	t.Helper()
	t.Logf("cpu %d ms in %d ms of wall", r.cpuMs, r.durMs)
	if float64(r.cpuMs) > 1.15*float64(r.durMs)+50 {
		t.Errorf("cpu %d ms in %d ms of wall: more than the 1-CPU quota", r.cpuMs, r.durMs)
	}
}

var programProbes = []programProbe{
	// filesystem: read-only but for the work dir, /tmp and /dev/shm; the
	// host's secrets and boxer's own files are not there at all.
	{name: "fs/write-etc", code: pr(`do(lambda: open("/etc/evil", "w"))`), want: ok("EROFS\n")},
	// /etc/passwd is a generated file owned by the sandbox's root: the
	// permission check comes before the read-only one.
	{name: "fs/append-etc-passwd", code: pr(`do(lambda: open("/etc/passwd", "a"))`), want: ok("EACCES\n")},
	{name: "fs/write-usr", code: pr(`do(lambda: open("/usr/lib/evil", "w"))`), want: ok("EROFS\n")},
	{name: "fs/write-root", code: pr(`do(lambda: open("/evil", "w"))`), want: ok("EROFS\n")},
	{name: "fs/write-dev", code: pr(`do(lambda: open("/dev/evil", "w"))`), want: ok("EROFS\n")},
	{name: "fs/read-shadow", code: pr(`do(lambda: open("/etc/shadow").read())`), want: ok("ENOENT\n")},
	{name: "fs/read-root-home", code: pr(`do(lambda: os.listdir("/root"))`, `do(lambda: os.listdir("/home"))`), want: ok("ENOENT ENOENT\n")},
	{name: "fs/boxer-state-dir", code: pr(`do(lambda: os.listdir("{{STATE}}"))`, `do(lambda: os.listdir("{{STATE}}/runs"))`, `do(lambda: os.listdir("/run"))`),
		want: ok("ENOENT ENOENT ENOENT\n")},
	{name: "fs/boxer-data-dir", code: pr(`do(lambda: os.listdir("{{DATA}}"))`, `do(lambda: open("{{DATA}}/boxer.db", "rb"))`, `do(lambda: open("{{DATA}}/canary"))`),
		want: ok("ENOENT ENOENT ENOENT\n")},
	// boxer has no config file: its configuration is flags and the
	// environment (info/environment); the binary itself is not there.
	{name: "fs/boxer-binary", code: pr(`do(lambda: os.stat("{{BIN}}"))`, `do(lambda: os.stat("/proc/1/exe"))`), want: ok("ENOENT ENOENT\n")},
	// Another run's work dir: not under the state dir (not visible), not
	// through another process's /proc entry (hidden) on any pid.
	{name: "fs/other-runs-work-dirs", code: `import glob
print(glob.glob("{{STATE}}/runs/*/work"), sorted({do(lambda: os.listdir("/proc/%d/cwd" % p)) for p in range(1, 200) if p != os.getpid()}))`,
		want: ok("[] ['ENOENT']\n")},
	// The interpreter is bound read-only: no overwriting what the next
	// run executes (the runc /proc/self/exe attack).
	// Opened for update, the binary is refused as read-only (6.1) or as
	// not writable (6.18).
	{name: "fs/proc-self-exe", code: pr(`do(lambda: open("/proc/self/exe", "wb"))`, `do(lambda: open("/proc/self/exe", "r+b")) in ("EROFS", "EACCES")`, `os.readlink("/proc/self/exe")`),
		want: ok("EROFS True /usr/bin/python3.11\n")},
	{name: "fs/proc-1-root", code: pr(`do(lambda: os.listdir("/proc/1/root"))`, `do(lambda: os.readlink("/proc/1/root"))`, `do(lambda: open("/proc/1/environ").read())`),
		want: ok("ENOENT ENOENT ENOENT\n")},
	{name: "fs/proc-sys-write", code: pr(`do(lambda: open("/proc/sys/kernel/hostname", "w").write("x"))`, `do(lambda: open("/proc/sys/vm/drop_caches", "w").write("3"))`, `hidden("/proc/sysrq-trigger")`),
		want: ok("EROFS EROFS True\n")},
	{name: "fs/mountinfo-hides-host-paths", code: `mi = open("/proc/self/mountinfo").read()
print([s in mi for s in ("{{STATE}}", "{{DATA}}", "/run", "boxer")])`, want: ok("[False, False, False, False]\n")},
	{name: "fs/device-nodes", code: pr(`sorted(os.listdir("/dev"))`, `do(lambda: os.mknod("/tmp/null", 0o666 | 0o020000, os.makedev(1, 3)))`,
		`do(lambda: os.mknod("/tmp/sda", 0o600 | 0o060000, os.makedev(8, 0)))`, `do(lambda: open("/dev/mem", "rb"))`),
		want: ok("['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'urandom', 'zero'] EPERM EPERM ENOENT\n")},
	// Files of 32 MiB (under the 64 MiB file size limit) until the 128 MiB
	// tmpfs is full: ENOSPC at exactly the cap, not OOM (the 512 MiB
	// memory limit holds the tmpfs pages).
	{name: "fs/tmp-disk-cap", code: fillDisk("/tmp"), want: ok("ENOSPC 128\n")},
	// The work dir also holds main.py: one MiB less fits.
	{name: "fs/work-disk-cap", code: fillDisk("/work"), want: ok("ENOSPC 127\n")},
	{name: "fs/file-size-limit", code: `f = open("/tmp/big", "wb")
n = 0
try:
    while True: f.write(b"x" * (1 << 20)); f.flush(); n += 1
except OSError as e: print(errno.errorcode[e.errno], n)`, want: ok("EFBIG 64\n")},
	// 16384 inodes per tmpfs: its root and the directory take two.
	{name: "fs/inode-cap", code: `os.mkdir("/tmp/d")
i = 0
try:
    for i in range(100000): open("/tmp/d/%d" % i, "w").close()
except OSError as e: print(errno.errorcode[e.errno], i)`, want: ok("ENOSPC 16382\n")},
	// chmod u+s is the owner's right; the writable mounts are noexec and
	// nosuid, so neither a script nor a copied interpreter runs from them.
	{name: "fs/setuid-file", code: `import shutil
open("/work/s", "w").write("#!/bin/sh\n")
shutil.copy("/usr/bin/python3.11", "/tmp/py")
print(do(lambda: os.chmod("/work/s", 0o4755)), oct(os.stat("/work/s").st_mode), do(lambda: os.execv("/work/s", ["s"])),
      do(lambda: os.chmod("/tmp/py", 0o6755)), do(lambda: os.execv("/tmp/py", ["py", "-c", "1"])))`,
		want: ok("ok 0o104755 EACCES ok EACCES\n")},
	// Only within one tmpfs: no link to a host file to keep or to change.
	{name: "fs/hard-links", code: `open("/work/a", "w").close()
print(do(lambda: os.link("/etc/passwd", "/tmp/p")), do(lambda: os.link("/usr/bin/python3.11", "/work/py")),
      do(lambda: os.link("/proc/self/exe", "/tmp/x")), do(lambda: os.link("/work/a", "/work/b")))`,
		want: ok("EXDEV EXDEV EXDEV ok\n")},

	// network: only a loopback interface of the run's own. Targets are
	// loopback and documentation addresses only.
	{name: "net/tcp-192.0.2.1", code: pr(`do(lambda: tcp("192.0.2.1", 80))`), want: ok("ENETUNREACH\n")},
	{name: "net/tcp-198.51.100.1", code: pr(`do(lambda: tcp("198.51.100.1", 443))`), want: ok("ENETUNREACH\n")},
	{name: "net/tcp-203.0.113.1", code: pr(`do(lambda: tcp("203.0.113.1", 22))`), want: ok("ENETUNREACH\n")},
	{name: "net/tcp-2001:db8::1", code: pr(`do(lambda: tcp("2001:db8::1", 80, socket.AF_INET6))`), want: ok("ENETUNREACH\n")},
	// boxer itself listens on the host's 127.0.0.1:{{PORT}}.
	{name: "net/tcp-loopback-boxer-port", code: pr(`do(lambda: tcp("127.0.0.1", {{PORT}}))`), want: ok("ECONNREFUSED\n")},
	{name: "net/tcp-ipv6-loopback", code: pr(`do(lambda: tcp("::1", {{PORT}}, socket.AF_INET6))`), want: ok("ECONNREFUSED\n")},
	// UDP is refused outright (its buffers escape cgroup v1's memory
	// limit), whatever the address.
	{name: "net/udp-loopback", code: pr(`do(lambda: udp("127.0.0.1", 53))`, `do(lambda: udp("::1", 53, socket.AF_INET6))`), want: ok("EPERM EPERM\n")},
	{name: "net/udp-documentation", code: pr(`do(lambda: udp("198.51.100.7", 53))`, `do(lambda: udp("2001:db8::7", 53, socket.AF_INET6))`), want: ok("EPERM EPERM\n")},
	{name: "net/netlink", code: pr(`do(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))`, `do(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 0))`),
		want: ok("EPERM EPERM\n")},
	{name: "net/packet", code: pr(`do(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))`, `do(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0))`),
		want: ok("EPERM EPERM\n")},
	{name: "net/raw", code: pr(`do(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))`, `do(lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6))`),
		want: ok("EPERM EPERM\n")},
	// No resolver configuration and no UDP: the lookup fails at once.
	{name: "net/dns", code: `try:
    socket.getaddrinfo("example.com", 80); print("resolved")
except socket.gaierror as e: print("gaierror", e.errno)`, want: ok("gaierror -2\n")},
	{name: "net/interfaces", code: pr(`[l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]`), want: ok("['lo']\n")},

	// processes: held by the pids limit (128), unable to signal or trace
	// anything but their own, and all gone after the run (host check).
	{name: "proc/fork-bomb", code: `n = 0
try:
    while True:
        if os.fork() == 0:
            import time; time.sleep(30)
        n += 1
except OSError as e: print(errno.errorcode[e.errno], n < 128)`, want: ok("EAGAIN True\n"), alone: true},
	{name: "proc/thread-bomb", code: `import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1
except RuntimeError as e: print("RuntimeError", n < 128)`, want: ok("RuntimeError True\n")},
	{name: "proc/double-fork-daemon", code: `import time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
os.wait()
print("parent done")`, want: ok("parent done\n")},
	// A daemon that keeps the run's stdout open does not hold the answer
	// back: the run ends with its main process.
	{name: "proc/setsid-daemon-holding-stdout", code: `import time
if os.fork() == 0:
    os.setsid(); time.sleep(300)
print("bye")`, want: ok("bye\n")},
	{name: "proc/sigstopped-children", code: `import signal
for _ in range(3):
    if os.fork() == 0:
        os.kill(os.getpid(), signal.SIGSTOP); os._exit(0)
print("x")`, want: ok("x\n")},
	{name: "proc/signal-pid-1", code: pr(`do(lambda: os.kill(1, 9))`, `do(lambda: os.kill(1, 15))`, `do(lambda: os.kill(1, 0))`), want: ok("EPERM EPERM EPERM\n")},
	// Every other pid the run can name refuses it: pid 1, and on the
	// cold path the threads of boxer's pid 1 (a Go process); nothing of
	// another run's is there, on either path.
	{name: "proc/signal-other-pids", code: `own = {os.getpid()} | {int(p) for p in open("/proc/self/task/%d/children" % os.getpid()).read().split()}
print(sorted({do(lambda: os.kill(p, 9)) for p in range(1, 2000) if p not in own} - {"ESRCH"}))`,
		want: ok("['EPERM']\n")},
	// kill(-1): nothing else is there but pid 1, which kill(-1) skips
	// (ESRCH), on either path: each run has a PID namespace of its own.
	// Nothing died: every pid is still there.
	{name: "proc/kill-all", code: `def alive(): return {p for p in range(1, 2000) if do(lambda: os.kill(p, 0)) != "ESRCH"}
before = alive()
print(do(lambda: os.kill(-1, 9)), before <= alive())`,
		want: ok("ESRCH True\n")},
	{name: "proc/ptrace", code: pr(`sc(101, 16, 1, 0, 0)`, `sc(101, 0, 0, 0, 0)`, `sc(310, 1, 0, 0, 0, 0, 0)`), want: ok("EPERM EPERM EPERM\n")},
	// no_new_privs cannot be cleared, seccomp is in filter mode, PR_SET_MM
	// and dropping bounding caps need privileges; setting itself dumpable
	// is harmless.
	{name: "proc/prctl", code: `libc.prctl.restype = ctypes.c_int
def p(*a):
    ctypes.set_errno(0); r = libc.prctl(*[ctypes.c_ulong(x) for x in a])
    return str(r) if r != -1 else errno.errorcode[ctypes.get_errno()]
print(p(38, 0, 0, 0, 0), p(21, 0, 0, 0, 0), p(35, 1, 0, 0, 0), p(24, 0, 0, 0, 0), p(4, 1, 0, 0, 0))`,
		want: ok("EINVAL 2 EPERM EPERM 0\n")},
	{name: "proc/unshare", code: pr(`sc(272, 0x10000000)`, `sc(272, 0x20000000)`, `sc(272, 0x00020000)`, `sc(272, 0x40000000)`, `sc(272, 0x08000000)`, `sc(272, 0x04000000)`),
		want: ok("EPERM EPERM EPERM EPERM EPERM EPERM\n")},
	{name: "proc/setns", code: `fd = os.open("/proc/self/ns/net", os.O_RDONLY)
print(sc(308, fd, 0), sc(308, fd, 0x40000000))`, want: ok("EPERM EPERM\n")},
	{name: "proc/clone-namespaces", code: pr(`sc(56, 0x10000000 | 17, 0, 0, 0, 0)`, `sc(56, 0x20000000 | 17, 0, 0, 0, 0)`, `sc(435, 0, 0)`), want: ok("EPERM EPERM ENOSYS\n")},
	{name: "proc/setuid-root", code: pr(`do(lambda: os.setuid(0))`, `do(lambda: os.setgid(0))`, `do(lambda: os.setgroups([0]))`), want: ok("EPERM EPERM EPERM\n")},

	// memory and CPU
	// Populated mappings of 64 MiB until the 512 MiB limit: the kernel
	// faults the pages in, which is fast where a Python loop is not.
	{name: "mem/allocation-bomb", code: `import mmap
print("start", flush=True)
keep = []
while True: keep.append(mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x8000))`,
		want: killed("oom", "start\n")},
	// 1 TiB of address space is granted (nothing is used yet); writing
	// 1 GiB of it is not.
	{name: "mem/noreserve-map", code: `import mmap
m = mmap.mmap(-1, 1 << 40, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)
print("mapped", flush=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise(ctypes.addressof(ctypes.c_char.from_buffer(m)), 1 << 30, 23)
print("survived")`, want: killed("oom", "mapped\n")},
	{name: "mem/mlock", code: `import mmap, resource
m = mmap.mmap(-1, 1 << 20)
a = ctypes.addressof(ctypes.c_char.from_buffer(m))
print(libc.mlock(ctypes.c_void_p(a), ctypes.c_size_t(1 << 20)), errno.errorcode[ctypes.get_errno()], libc.mlockall(3), errno.errorcode[ctypes.get_errno()], resource.getrlimit(resource.RLIMIT_MEMLOCK))`,
		want: ok("-1 ENOMEM -1 ENOMEM (65536, 65536)\n")},
	{name: "mem/rlimits-fixed", code: `import resource
def up(r):
    try: resource.setrlimit(r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)); return "raised"
    except (ValueError, OSError): return "refused"
print(up(resource.RLIMIT_NOFILE), up(resource.RLIMIT_FSIZE), up(resource.RLIMIT_MEMLOCK), up(resource.RLIMIT_NPROC), resource.getrlimit(resource.RLIMIT_CORE))`,
		want: ok("refused refused refused refused (0, 0)\n")},
	{name: "cpu/sleep-past-timeout", code: `import time
print("partial", flush=True); sys.stderr.write("err-partial\n")
time.sleep(60)`,
		want: outcome{status: "timeout", exit: -1, signal: "SIGKILL", stdout: "partial\n", stderr: "err-partial\n"}},
	{name: "cpu/busy-loop-past-timeout", code: `print("spinning", flush=True)
while True: pass`, want: killed("timeout", "spinning\n")},
	// Five processes burning CPU for 1 s of wall: the quota holds their
	// CPU time to one core's worth.
	{name: "cpu/processes-burning", code: `import time
end = time.monotonic() + 1
kids = 0
for _ in range(4):
    if os.fork() == 0: break
    kids += 1
while time.monotonic() < end: pass
if kids < 4: os._exit(0)
for _ in range(4): os.wait()
print("done")`, want: ok("done\n"), check: cpuWithinQuota, alone: true},
	// Four threads hashing (hashlib lets go of the GIL) for 1 s of wall.
	{name: "cpu/threads-burning", code: `import hashlib, threading, time
data = b"x" * (1 << 20)
end = time.monotonic() + 1
def burn():
    while time.monotonic() < end: hashlib.sha256(data).digest()
ts = [threading.Thread(target=burn) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print("done")`, want: ok("done\n"), check: cpuWithinQuota, alone: true},

	// output: each stream keeps 1 MiB and says it was cut; the program is
	// never blocked or killed for writing.
	{name: "out/stdout-flood", code: `chunk = b"x" * (1 << 20)
for _ in range(10): sys.stdout.buffer.write(chunk)
sys.stdout.flush(); sys.stderr.write("done")`,
		want: outcome{status: "ok", stdout: strings.Repeat("x", 1<<20), stderr: "done", stdoutTruncated: true}},
	{name: "out/stderr-flood", code: `chunk = b"y" * (1 << 20)
for _ in range(10): sys.stderr.buffer.write(chunk)
print("done")`, want: outcome{status: "ok", stdout: "done\n", stderr: strings.Repeat("y", 1<<20), stderrTruncated: true}},
	{name: "out/binary", code: `sys.stdout.buffer.write(bytes(range(256)))`, want: ok(binary256)},
	// Invalid UTF-8 (a lone 0xff, a cut sequence, an encoded surrogate)
	// becomes U+FFFD byte by byte; valid sequences around it are kept.
	{name: "out/invalid-utf8", code: `sys.stdout.buffer.write(b"a\xffb\xc3(\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\x80z")`,
		want: ok("a\uFFFDb\uFFFD(€😀\uFFFD\uFFFD\uFFFDz")},
	{name: "out/no-trailing-newline", code: `sys.stdout.write("a"); sys.stderr.write("b")`, want: outcome{status: "ok", stdout: "a", stderr: "b"}},
	// After close(1) a write fails, and the next file opened takes fd 1:
	// what the program writes there stays in its file.
	{name: "out/write-after-closing-stdout", code: `print("x", flush=True)
os.close(1)
r = do(lambda: os.write(1, b"y"))
f = open("/tmp/f", "w"); f.write("to-file"); f.flush()
print(r, f.fileno(), file=sys.stderr)`, want: outcome{status: "ok", stdout: "x\n", stderr: "EBADF 1\n"}},

	// kernel surface: syscalls the seccomp policy refuses, by number
	// (x86_64) through ctypes.
	// Kernel interfaces with a history of privilege escalations.
	{name: "sys/keyctl-bpf-perf-userfaultfd", code: pr(`sc(250, 0, 0, 0, 0, 0)`, `sc(248, 0, 0, 0, 0, 0)`, `sc(321, 0, 0, 0)`, `sc(298, 0, 0, 0, 0, 0)`, `sc(323, 0)`),
		want: ok("EPERM EPERM EPERM EPERM EPERM\n")},
	// io_uring is refused; io_setup reports ENOSYS, as if the kernel had
	// no AIO (its pool is host-wide).
	{name: "sys/async-io", code: pr(`sc(425, 1, 0)`, `sc(426, 0, 0, 0, 0, 0, 0)`, `sc(427, 0, 0, 0, 0)`, `sc(206, 1, ctypes.addressof(ctypes.c_ulong(0)))`),
		want: ok("EPERM EPERM EPERM ENOSYS\n")},
	{name: "sys/modules-and-kexec", code: pr(`sc(175, 0, 0, 0)`, `sc(313, 0, 0, 0)`, `sc(246, 0, 0, 0, 0)`, `sc(320, 0, 0, 0, 0, 0)`), want: ok("EPERM EPERM EPERM EPERM\n")},
	{name: "sys/open_by_handle_at", code: pr(`sc(304, 0, 0, 0)`, `sc(303, 0, 0, 0, 0, 0)`), want: ok("EPERM EPERM\n")},
	{name: "sys/mount", code: pr(`sc(165, 0, 0, 0, 0, 0)`, `sc(166, 0, 0)`, `sc(155, 0, 0)`, `sc(161, 0)`, `sc(430, 0, 0)`, `sc(428, 0, 0, 0)`),
		want: ok("EPERM EPERM EPERM EPERM EPERM EPERM\n")},
	// The zygote's filter lets process_madvise through with
	// MADV_POPULATE_WRITE for the zygote's own use; a job's filter,
	// stacked on it, refuses the call whatever the advice.
	{name: "sys/process_madvise", code: pr(`sc(440, 0, 0, 1, 23, 0)`, `sc(440, 0, 0, 1, 20, 0)`), want: ok("EPERM EPERM\n")},
	{name: "sys/personality-and-iopl", code: pr(`sc(135, 0x0040000)`, `sc(172, 3)`, `sc(173, 0, 1, 1)`), want: ok("EPERM EPERM EPERM\n")},
	{name: "sys/tiocsti", code: pr(`sc(16, 0, 0x5412, 0)`, `sc(16, 0, 0x100005412, 0)`), want: ok("EPERM EPERM\n")},
	{name: "sys/unknown-syscall", code: pr(`sc(1000)`), want: ok("ENOSYS\n")},
	// An x32 syscall never reaches the kernel: the process is killed.
	{name: "sys/x32-abi", code: `libc.syscall(ctypes.c_long(0x40000000 | 39))
print("survived")`, want: outcome{status: "signaled", exit: -1, signal: "SIGSYS"}},

	// information: nothing of the host or of boxer reaches the run.
	{name: "info/environment", code: pr(`sorted(os.environ)`, `[k for k, v in os.environ.items() if "must-not-leak" in v or "BOXER" in k or "X402" in k]`),
		want: ok("['HOME', 'LANG', 'LOGNAME', 'MPLBACKEND', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED', 'TMPDIR', 'USER'] []\n")},
	// A warm child starts unreadable to itself (it changed uid after the
	// fork); once dumpable it reads the zygote's environment: boxer's
	// fixed one.
	{name: "info/proc-environ", code: `libc.prctl(4, 1, 0, 0, 0)
e = open("/proc/self/environ", "rb").read()
print(sorted(k.split(b"=")[0].decode() for k in e.split(b"\0") if k), e.count(b"must-not-leak"), e.count(b"x402"))`,
		want: ok("['HOME', 'LANG', 'LOGNAME', 'MPLBACKEND', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED', 'TMPDIR', 'USER'] 0 0\n")},
	{name: "info/hostname", code: pr(`socket.gethostname()`, `os.uname().nodename`, `repr(open("/etc/hostname").read())`), want: ok("sandbox sandbox 'sandbox\\n'\n"),
		check: func(t *testing.T, r *reply) {
			if hostname() == "sandbox" {
				t.Skip("the host itself is named sandbox: the check proves nothing here")
			}
		}},
	// The generated /etc/passwd and /etc/group: the sandbox's users only
	// (on the warm path one "sandbox" per warm uid, 1000 to 1015).
	{name: "info/host-users", code: `import pwd, grp
print(sorted({p.pw_name for p in pwd.getpwall()}), sorted({g.gr_name for g in grp.getgrall()}), pwd.getpwuid(os.getuid()).pw_name)`,
		want: ok("['nobody', 'root', 'sandbox'] ['nogroup', 'root', 'sandbox'] sandbox\n")},
	// The payment configuration lives in the server's environment (set by
	// this test) and flags: neither is anywhere the run can read.
	{name: "info/payment-config", code: `libc.prctl(4, 1, 0, 0, 0)
blobs = [repr(dict(os.environ)).encode(), open("/proc/self/environ", "rb").read(), open("/proc/self/cmdline", "rb").read()]
print([sum(b.count(s) for b in blobs) for s in (b"x402-must-not-leak", b"0x1111222233334444", b"X402")], do(lambda: open("/proc/1/cmdline").read()))`,
		want: ok("[0, 0, 0] ENOENT\n")},
	{name: "info/kernel-secrets", code: pr(`len(open("/proc/kallsyms").read())`, `len(open("/proc/keys").read())`, `sc(103, 3, 0, 0)`, `hidden("/proc/kcore")`),
		want: ok("0 0 EPERM True\n")},
	{name: "info/cgroup-path", code: pr(`sorted({l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup")})`), want: ok("['/']\n")},
	// tenants (issue 19): nothing shared with other runs or the host
	// shows their activity or spends their budgets.
	// inotify would watch the read-only binds, seeing every other run's
	// opens, on host root's budget of instances: absent, as on a kernel
	// without it.
	{name: "tenants/inotify", code: `r = libc.inotify_init1(0)
print(r, errno.errorcode.get(ctypes.get_errno()), sc(253), sc(254, 0, 0, 0))`, want: ok("-1 ENOSYS ENOSYS ENOSYS\n")},
	// A POSIX message queue's bytes counted against one budget for every
	// sandbox and host root: absent, as on a kernel without them. (SysV
	// queues are the run's own IPC namespace's.)
	{name: "tenants/posix-mqueue", code: `r = libc.mq_open(b"/q", os.O_CREAT | os.O_RDWR, 0o600, None)
print(r, errno.errorcode.get(ctypes.get_errno()))`, want: ok("-1 ENOSYS\n")},
	// POSIX_FADV_DONTNEED on a host file succeeds and drops nothing
	// from the host's page cache (hostCached checks from outside: inside,
	// mincore says every page of a file one does not own is resident).
	// preadv2's RWF_NOWAIT, which tells a cached page from one that is
	// not, and so whether another run read a host file lately, is refused
	// as a kernel without it refuses it.
	{name: "tenants/fadvise-dontneed", code: `fd = os.open(os.__file__, os.O_RDONLY)
while os.read(fd, 1 << 20): pass
r = [do(lambda: os.posix_fadvise(fd, 0, 0, a)) for a in (os.POSIX_FADV_DONTNEED, os.POSIX_FADV_NOREUSE)]
print(r, do(lambda: os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT)))`, want: ok("['ok', 'ok'] ENOTSUP\n"), check: hostCached},
	// A run that walks its stack up finds nothing of a zygote's loop (its
	// other children, its requests) on the warm path: the frames that ran
	// the job and the zygote's module, whose globals are its config.
	{name: "tenants/zygote-frames", code: `f, names = sys._getframe(), []
while f:
    names.append(f.f_code.co_name)
    f = f.f_back
print(names)`, want: ok("['<module>']\n"), warm: &outcome{status: "ok", stdout: "['<module>', '_run', '_child', '<module>']\n"}},
	// /proc/locks lists every lock on the host: masked, so it shows not
	// even the run's own. (A lock on a shared host file itself still
	// crosses runs: see sandbox's doc.)
	{name: "tenants/proc-locks", code: `import fcntl
fcntl.flock(os.open("lock", os.O_CREAT | os.O_RDWR), fcntl.LOCK_EX)
print(repr(open("/proc/locks").read()))`, want: ok("''\n")},
	{name: "info/other-processes", code: pr(`[p for p in os.listdir("/proc") if p.isdigit()] == [str(os.getpid())]`), want: ok("True\n")},
}

// hostCached checks, as the host sees it, that every page of the
// interpreter's os.py is in the page cache: the probe read it all, then
// advised the kernel to drop it.
func hostCached(t *testing.T, _ *reply) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import os; print(os.__file__)").Output()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	dropped := 0
	for _, v := range vec {
		dropped += int(^v & 1)
	}
	if dropped != 0 {
		t.Errorf("%d of the %d pages of %s left the host's page cache", dropped, len(vec), f.Name())
	}
}

// fillDisk writes 32 MiB files into dir until the tmpfs is full and prints
// the errno and the MiB written.
func fillDisk(dir string) string {
	return `n = 0
try:
    for i in range(10):
        with open("` + dir + `/f%d" % i, "wb") as f:
            for _ in range(32): f.write(b"x" * (1 << 20)); f.flush(); n += 1
except OSError as e: print(errno.errorcode[e.errno], n)`
}
