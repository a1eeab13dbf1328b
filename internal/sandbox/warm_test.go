package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"boxer"
	"boxer/internal/observe"
	"boxer/internal/sandbox/warm"
	"boxer/internal/testenv"

	"golang.org/x/sys/unix"
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
	ctx, cancel := context.WithTimeout(context.Background(), slow(time.Minute))
	defer cancel()
	if _, ok := z.e.WarmForm(job.Argv); !ok {
		t.Fatalf("argv %q cannot run warm", job.Argv)
	}
	w, err := z.Prepare(ctx)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer w.Destroy()
	res, err := w.Run(ctx, job)
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
	// The sample job of _learn wrote pages; none learned means the
	// learning broke and every job pays its faults on its own path again.
	if z.LearnedPages == 0 {
		t.Error("the zygote learned no pages from its sample job")
	}
	t.Logf("%+v, %d pages learned", res.Timing, z.LearnedPages)
}

// A job's stdio is blocking, as a shell's is: boxer's ends of the pipes
// are on its poller, non-blocking, and must not make the job's so, or a
// program that writes faster than boxer reads gets BlockingIOError.
func TestWarmStdioBlocking(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	code := "import os, sys\nprint(*(os.get_blocking(fd) for fd in (0, 1, 2)))\nsys.stdout.flush()\nos.write(1, b'x' * (4 << 20))\n"
	res := runWarm(t, z, &boxer.Job{Argv: []string{"python", "-c", code}, Stdin: []byte("in")})
	if res.Status != boxer.StatusOK || !strings.HasPrefix(string(res.Stdout.Data), "True True True\nxxx") {
		t.Fatalf("%s %.40q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
	}
}

func init() { zygoteStartTimeout = 20 * time.Second }

// Nothing of one warm job is visible to the next, even when the next
// reuses its slot (the same uid): files, tmpfs content, processes,
// environment, module state, SysV IPC.
func TestWarmJobsLeaveNothing(t *testing.T) {
	e := newTestEngine(t, nil)
	z, err := e.StartZygote(context.Background(), ZygoteConfig{Slots: 1, PreImports: []string{"json"}})
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	first := `
import os, json, sys, subprocess, time, ctypes
open("/work/left", "w").write("x"); open("/tmp/left", "w").write("x"); open("/dev/shm/left", "w").write("x")
os.environ["LEFT"] = "1"
json.LEFT = 1
sys.LEFT = 1
if os.fork() == 0:
    os.setsid(); time.sleep(300)
libc = ctypes.CDLL(None)
libc.shmget(0x1234, 4096, 0o1666)
print("uid", os.getuid())
`
	second := `
import os, json, sys, ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("uid", os.getuid())
print(os.listdir("/work"), os.listdir("/tmp"), os.listdir("/dev/shm"))
print(os.environ.get("LEFT"), hasattr(json, "LEFT"), hasattr(sys, "LEFT"))
print([p for p in os.listdir("/proc") if p.isdigit()] == [str(os.getpid())])
print(libc.shmget(0x1234, 4096, 0o666) == -1)
`
	a := runWarm(t, z, pyJob(first, boxer.Limits{}))
	// The first job's daemon is gone before the slot serves again.
	slotUID := z.userBase // the one slot's host uid
	if pids := processesWithUID(slotUID); len(pids) > 0 {
		t.Fatalf("processes of the first job remain: %v", pids)
	}
	b := runWarm(t, z, pyJob(second, boxer.Limits{}))
	if a.Status != boxer.StatusOK || b.Status != boxer.StatusOK {
		t.Fatalf("%s %s: %s %s", a.Status, b.Status, a.Stderr.Data, b.Stderr.Data)
	}
	want := string(a.Stdout.Data) + "['main.py'] [] []\nNone False False\nTrue\nTrue\n"
	if got := string(b.Stdout.Data); got != want {
		t.Fatalf("second job saw:\n%s\nwant:\n%s", got, want)
	}
}

// Two warm children alive at once cannot reach each other: not through
// abstract or path sockets, loopback, /tmp, or signals.
func TestWarmChildrenApart(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	ctx := context.Background()
	listener := `
import os, socket, time
s = socket.socket(socket.AF_UNIX); s.bind("\0boxer-test"); s.listen()
t = socket.socket(); t.bind(("127.0.0.1", 7777)); t.listen()
open("/tmp/mine", "w").write(str(os.getpid()))
open("/work/ready", "w").close()
time.sleep(30)
`
	w1, err := z.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Destroy()
	done := make(chan *boxer.Result, 1)
	go func() {
		res, _ := w1.Run(ctx, pyJob(listener, boxer.Limits{WallTime: 20 * time.Second}))
		done <- res
	}()
	waitForFile(t, w1.work, "ready")
	probe := `
import errno, os, socket
def err(f):
    try: f(); return "ok"
    except OSError as e: return errno.errorcode[e.errno]
print(err(lambda: socket.socket(socket.AF_UNIX).connect("\0boxer-test")))
print(err(lambda: socket.create_connection(("127.0.0.1", 7777), timeout=2)))
print(os.listdir("/tmp"))
print(sorted(p for p in os.listdir("/proc") if p.isdigit()) == [str(os.getpid())])
`
	res := runWarm(t, z, pyJob(probe, boxer.Limits{}))
	if got := string(res.Stdout.Data); got != "ECONNREFUSED\nECONNREFUSED\n[]\nTrue\n" {
		t.Fatalf("second child saw: %q (stderr %s)", got, res.Stderr.Data)
	}
	w1.cg.Kill()
	<-done
}

// waitForFile waits until name exists in the work dir open at dirfd.
func waitForFile(t *testing.T, dirfd int, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, 0) == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", name)
}

// The zygote stays one thread on one CPU even after importing numpy and
// pandas (whose BLAS and numexpr pools would start threads), so that the
// copy-on-write faults after each fork flush one CPU's TLB only; a job
// still gets the whole CPU set and the environment a cold run gets.
func TestZygoteOneThreadOneCPU(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e, "numpy", "pandas")
	pid := zygotePid(t, z)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Threads:\t1\n", "Cpus_allowed_list:\t" + firstCPU(t) + "\n"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("zygote status lacks %q:\n%s", want, status)
		}
	}
	probe := pyJob("import os; print(sorted(os.sched_getaffinity(0)), sorted(k for k in os.environ if k.endswith('_NUM_THREADS')))", boxer.Limits{})
	cold, warm := runJob(t, e, probe), runWarm(t, z, probe)
	if string(cold.Stdout.Data) != string(warm.Stdout.Data) || cold.ExitCode != 0 {
		t.Fatalf("cold %q %s, warm %q %s", cold.Stdout.Data, cold.Stderr.Data, warm.Stdout.Data, warm.Stderr.Data)
	}
}

// The zygote gives up, once and before its first fork, what no child may
// have (see _limit_zygote): it keeps its effective capabilities, which it
// needs to isolate each child, but no exec of its could ever regain one.
func TestZygoteLimitsItself(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	st := procStatus(t, zygotePid(t, z))
	want := map[string]string{"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Groups": ""}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("zygote's %s = %q, want %q", k, st[k], v)
		}
	}
	if st["CapEff"] == "0000000000000000" {
		t.Error("the zygote lost its effective capabilities: it cannot isolate its children")
	}
}

// A warm child runs the interpreter's code from the copy the zygote moved
// onto huge pages (text_on_huge_pages): the mapping that holds it is
// anonymous, read and execute only, all of it on huge pages, and byte for
// byte what the executable's file holds there.
func TestWarmTextOnHugePages(t *testing.T) {
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(b), "[never]") {
		t.Skipf("this kernel gives no transparent huge pages (%q, %v)", b, err)
	}
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	if z.HugeText <= 0 || z.HugeText%(2<<20) != 0 {
		t.Fatalf("the zygote moved %d bytes of code, want a positive multiple of 2 MiB", z.HugeText)
	}
	res := runWarm(t, z, pyJob(`
import ctypes, os, struct, sys
fn = ctypes.cast(ctypes.pythonapi.Py_Initialize, ctypes.c_void_p).value
region = cur = None
with open("/proc/self/smaps") as f:
    for line in f:
        k = line.split()
        if not k[0].endswith(":"):
            a, b = (int(x, 16) for x in k[0].split("-"))
            cur = (a, b, k[1], k[5] if len(k) > 5 else "anonymous") if a <= fn < b else None
        elif cur and k[0] == "AnonHugePages:":
            region = cur + (int(k[1]) * 1024,)
a, b, perms, path, huge = region
print(perms, path, b - a, huge)
with open(sys.executable, "rb") as f:
    elf = f.read()
if struct.unpack_from("<H", elf, 16)[0] != 2:
    sys.exit("not ET_EXEC: the load bias is not 0")
phoff, = struct.unpack_from("<Q", elf, 0x20)
phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
same = differ = 0
for i in range(phnum):
    typ, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
    lo, hi = max(vaddr, a), min(vaddr + filesz, b)
    if typ == 1 and lo < hi:
        if ctypes.string_at(lo, hi - lo) == elf[off + lo - vaddr:off + hi - vaddr]:
            same += hi - lo
        else:
            differ += hi - lo
print(same > 0, differ)
`, boxer.Limits{}))
	want := fmt.Sprintf("r-xp anonymous %d %d\nTrue 0\n", z.HugeText, z.HugeText)
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != want {
		t.Fatalf("%s: %q (stderr %q), want %q", res.Status, res.Stdout.Data, res.Stderr.Data, want)
	}
}

// The zygote pins the pages its children write (pin), under its own
// seccomp policy, so that each fork copies them at once; and nothing of
// the pinning reaches a job: no io_uring descriptor, no pinned memory of
// its own, and io_uring refused.
func TestZygotePinsLearnedPages(t *testing.T) {
	testenv.RequireIOUring(t)
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	// Before 6.5 or so the kernel refuses to pin a file's pages (the
	// interpreter's and libraries' data), and the zygote pins the
	// anonymous ones alone (pin).
	if z.LearnedPages == 0 || z.PinnedPages == 0 || z.PinnedPages > z.LearnedPages ||
		testenv.KernelAtLeast(t, 6, 5) && z.PinnedPages != z.LearnedPages {
		t.Fatalf("pinned %d of %d learned pages, want all of them (from 6.5 on) or some", z.PinnedPages, z.LearnedPages)
	}
	// Sealed: the zygote's own filter, and ZygoteSealed's on top.
	if got := procStatus(t, zygotePid(t, z))["Seccomp_filters"]; got != "2" {
		t.Errorf("the zygote runs under %s seccomp filters, want 2", got)
	}
	res := runWarm(t, z, pyJob(`
import ctypes, glob, os
fds = [p for p in glob.glob("/proc/self/fd/*") if os.path.exists(p)]  # not glob's own, closed since
print("rings", sum("io_uring" in os.readlink(p) for p in fds))
print([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmPin:")][0])
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
print(libc.syscall(ctypes.c_long(425), ctypes.c_long(1), params), ctypes.get_errno())
`, boxer.Limits{}))
	if want := "rings 0\n0\n-1 1\n"; res.Status != boxer.StatusOK || string(res.Stdout.Data) != want {
		t.Fatalf("%s: %q (stderr %q), want %q", res.Status, res.Stdout.Data, res.Stderr.Data, want)
	}
}

// A warm child gets copies of the pages it will write before boxer moves
// it into its own cgroup (fork makes them, or pretouch), so every live
// child's copies are charged to the zygote's: its memory limit must have
// room for Slots of them on top of its own.
func TestZygoteMemoryCoversCopies(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e) // 8 slots, the default 1 GiB
	if z.LearnedPages == 0 {
		t.Fatal("no pages learned")
	}
	want := int64(1<<30) + 8*int64(z.LearnedPages)*int64(os.Getpagesize())
	var got int64 = -1
	for _, name := range []string{"memory.limit_in_bytes", "memory.max"} {
		if b, err := os.ReadFile(filepath.Join(z.sb.cg.Path(), name)); err == nil {
			got, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			break
		}
	}
	// cgroup v1 rounds a limit down to whole pages; the sum is whole pages.
	if got != want {
		t.Errorf("zygote's memory limit %d, want %d (1 GiB and 8 slots of %d pages)", got, want, z.LearnedPages)
	}
}

// zygotePid is the host pid of z's python process: the only child of its
// sandbox's pid 1.
func zygotePid(t *testing.T, z *Zygote) int {
	t.Helper()
	init := z.sb.cmd.Process.Pid
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", init, init))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(kids))
	if len(f) != 1 {
		t.Fatalf("pid 1 of the zygote sandbox has children %q", f)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// firstCPU is the lowest CPU this process may run on, as /proc lists it.
func firstCPU(t *testing.T) string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1024; i++ {
		if set.IsSet(i) {
			return strconv.Itoa(i)
		}
	}
	t.Fatal("no CPU")
	return ""
}

// A warm child's pid 1, which holds its address space while the job runs
// in pid 2 (see _drop in zygote.py), is confined as the job is, has no
// capability and no uid the job could signal or see it with, is stopped
// once the child is ready, and is gone once the job is.
func TestWarmInit(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := z.Prepare(ctx)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer w.Destroy()
	job := procStatus(t, w.jobPid)
	initPid := atoi(t, job["PPid"])
	init := procStatus(t, initPid)
	for _, k := range []string{"Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if init[k] != job[k] {
			t.Errorf("pid 1's %s = %q, the job's %q", k, init[k], job[k])
		}
	}
	if !strings.HasSuffix(job["NSpid"], " 2") || !strings.HasSuffix(init["NSpid"], " 1") {
		t.Errorf("NSpid: job %q, pid 1 %q; want 2 and 1 in their own namespace", job["NSpid"], init["NSpid"])
	}
	if job["CapEff"] != "0000000000000000" || job["CapBnd"] != "0000000000000000" || job["NoNewPrivs"] != "1" || job["Seccomp"] != "2" {
		t.Errorf("job: CapEff %s CapBnd %s NoNewPrivs %s Seccomp %s", job["CapEff"], job["CapBnd"], job["NoNewPrivs"], job["Seccomp"])
	}
	// Real and saved uid pid 1's own, effective and file-system uid the
	// job's: the job's signals are refused (they need its real or saved
	// uid) and its /proc entries hidden (hidepid needs all four).
	u, ju := strings.Fields(init["Uid"]), strings.Fields(job["Uid"])
	if len(u) != 4 || len(ju) != 4 || u[0] != u[2] || u[1] != u[3] || u[1] != ju[0] || u[0] == ju[0] ||
		ju[0] != ju[1] || ju[1] != ju[2] || ju[2] != ju[3] {
		t.Errorf("uids: pid 1 %q, job %q", init["Uid"], job["Uid"])
	}
	// Waiting for the job's process to exit or exec (uninterruptible but
	// killable), with the stop pending that it takes when it wakes.
	pending, err := strconv.ParseUint(init["ShdPnd"], 16, 64)
	if st := init["State"]; !strings.HasPrefix(st, "D") || err != nil || pending>>(unix.SIGSTOP-1)&1 == 0 {
		t.Errorf("pid 1's state %q, ShdPnd %s: want waiting, with SIGSTOP pending", st, init["ShdPnd"])
	}
	for _, ns := range []string{"mnt", "net", "ipc", "pid", "user", "cgroup", "uts"} {
		a, errA := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", initPid, ns))
		b, errB := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", w.jobPid, ns))
		if errA != nil || errB != nil || a != b {
			t.Errorf("pid 1's %s namespace %q (%v), the job's %q (%v)", ns, a, errA, b, errB)
		}
	}
	pidfd, err := unix.PidfdOpen(initPid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	code := `import os, signal
for sig in (0, signal.SIGCONT, signal.SIGKILL):
    try:
        os.kill(1, sig)
        print("signalled pid 1", sig)
    except PermissionError:
        pass
try:
    print(os.wait())
except ChildProcessError:
    print(os.getpid(), os.getppid(), "no child to wait for")
`
	j := &boxer.Job{Argv: []string{"python", "main.py"}, Files: []boxer.File{{Path: "main.py", Content: []byte(code)}}}
	res, err := w.Run(ctx, j)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != "2 1 no child to wait for\n" {
		t.Errorf("%s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
	}
	w.Destroy()
	// Destroy returns once the cgroup is empty, so pid 1 has exited.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); n != 1 || err != nil {
		t.Errorf("pid 1 still running after Destroy (poll %d, %v)", n, err)
	}

	// pid 1 is not taken out of the job's process budget: the job forks
	// all but itself of the pids limit (and RLIMIT_NPROC).
	forks := `import os
r, w = os.pipe()
n = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print(n, e.strerror)
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    n += 1
os.close(w)
for _ in range(n):
    os.wait()
`
	res = runWarm(t, z, &boxer.Job{Argv: []string{"python", "main.py"}, Files: []boxer.File{{Path: "main.py", Content: []byte(forks)}}})
	if want := fmt.Sprintf("%d Resource temporarily unavailable\n", e.cfg.Limits.Pids-1); res.Status != boxer.StatusOK || string(res.Stdout.Data) != want {
		t.Errorf("%s %q %q, want stdout %q", res.Status, res.Stdout.Data, res.Stderr.Data, want)
	}
}

// A job that execs wakes its pid 1 (see _drop in zygote.py), which stops
// instead of running on the stack the job rewrote: the exec'd program runs
// to its end and its status is the run's.
func TestWarmJobExecs(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	code := `import os, sys
# Scribble over the stack pid 1 would return on, as a hostile job could.
import ctypes
buf = (ctypes.c_char * (1 << 16))()
ctypes.memset(buf, 0x41, len(buf))
def deep(n):
    return deep(n - 1) if n else 0
deep(500)
os.execv(sys.executable, [sys.executable, "-c", "import os, sys; print('execd', os.getpid(), os.getppid()); sys.exit(7)"])
`
	res := runWarm(t, z, pyJob(code, boxer.Limits{}))
	if res.Status != boxer.StatusNonzeroExit || res.ExitCode != 7 || string(res.Stdout.Data) != "execd 2 1\n" {
		t.Errorf("%s %d %q %q", res.Status, res.ExitCode, res.Stdout.Data, res.Stderr.Data)
	}
}

// procStatus reads /proc/pid/status into a map of trimmed values.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A job that leaves a daemon behind is answered as soon as it exits: the
// daemon dies with the run, not the run with the daemon.
func TestWarmJobLeavesDaemon(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	code := `import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep(300)
    os._exit(0)
print("left a daemon", flush=True)
`
	started := time.Now()
	res := runWarm(t, z, &boxer.Job{Argv: []string{"python", "main.py"}, Files: []boxer.File{{Path: "main.py", Content: []byte(code)}}})
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != "left a daemon\n" {
		t.Errorf("%s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
	}
	if took := time.Since(started); took > 30*time.Second {
		t.Errorf("the run took %v: the daemon was waited for", took)
	}
}

// A fork request the zygote answers too late leaves no reply behind for
// the next one: each child is paired with its own exit. Unpaired, the
// next child would be handed the given-up child's exit, which comes as
// soon as that child finds its socket closed: Destroy would take the
// child's pid 1 for reaped while it lives (and pass its network namespace
// on). The zygote is stopped while boxer waits, so that its reply comes
// after the wait for certain (with only a short timeout, a reply that won
// the race was taken, as it should be, and the test failed under load).
func TestZygoteLateForkReplyDropped(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	pid := zygotePid(t, z)
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	forkTimeout = 100 * time.Millisecond
	_, err := z.Prepare(context.Background())
	forkTimeout = setupTimeout
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err == nil || !strings.Contains(err.Error(), "no fork within") {
		t.Fatalf("Prepare with the zygote stopped: %v, want the fork timed out", err)
	}
	w, err := z.Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Destroy()
	// The given-up child exits at once; this one waits for its job.
	select {
	case st, ok := <-w.exited:
		t.Fatalf("the child's exit came while it waits for its job (status %#x, %v): another child's", st, ok)
	case <-time.After(slow(2 * time.Second)):
	}
	res, err := w.Run(context.Background(), pyJob("print('ran')", boxer.Limits{}))
	if err != nil || res.Status != boxer.StatusOK || string(res.Stdout.Data) != "ran\n" {
		t.Fatalf("the job after the late reply: %v %+v", err, res)
	}
}

// A fork request the zygote cannot read (the wrong size, no descriptor or
// two, more descriptors than it takes) is refused with an error reply,
// the descriptors it carried are closed, and the zygote goes on serving.
func TestZygoteRefusesMalformedRequests(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ok := warm.ForkRequest{ID: 1 << 40, UID: 1000, InitUID: 1001, DiskBytes: 1 << 20, Inodes: 16}.Marshal()
	for _, tc := range []struct {
		name string
		msg  []byte
		fds  []int
	}{
		{"short", ok[:len(ok)-1], []int{int(r.Fd())}},
		{"long", append(ok, 0), []int{int(r.Fd())}},
		{"no descriptor", ok, nil},
		{"two descriptors", ok, []int{int(r.Fd()), int(w.Fd())}},
		{"three descriptors", ok, []int{int(r.Fd()), int(w.Fd()), int(r.Fd())}},
	} {
		z.forkMu.Lock()
		var oob []byte
		if tc.fds != nil {
			oob = unix.UnixRights(tc.fds...)
		}
		if _, _, err := z.ctrl.WriteMsgUnix(tc.msg, oob, nil); err != nil {
			z.forkMu.Unlock()
			t.Fatalf("%s: %v", tc.name, err)
		}
		select {
		case m := <-z.replies:
			if m.Op != "error" || !strings.Contains(m.Msg, "malformed fork request") {
				t.Errorf("%s: reply %+v, want an error", tc.name, m)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: no reply", tc.name)
		}
		z.forkMu.Unlock()
	}
	// The pipe's write end went to the zygote in two requests; had it
	// kept one, the read end would not see end of file once ours closes.
	w.Close()
	if err := r.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read after closing our write end: %d, %v, want end of file; the zygote kept a copy", n, err)
	}
	res := runWarm(t, z, pyJob("print('still serving')", boxer.Limits{}))
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != "still serving\n" {
		t.Fatalf("after the malformed requests: %s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
	}
}

// A child never runs a job as uid 0, root of the sandbox's user namespace
// with every capability in it: _drop refuses it, the child reports the
// failure on its job socket and exits without a job.
func TestZygoteRefusesRootUID(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := pair[1]
	ours, err := newPacketConn(pair[0], "job")
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	exit, err := z.fork(warm.ForkRequest{UID: 0, InitUID: 1001, DiskBytes: 1 << 20, Inodes: 16, FreshNet: 1}, theirs)
	unix.Close(theirs)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if err := ours.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<12)
	for i, want := range []string{`{"op":"hello"}`, `{"op": "error", "msg": "ValueError: refusing uids 0 and 1001 for a job"}`} {
		n, err := ours.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("message %d: %q, %v; want %q", i, buf[:n], err, want)
		}
		if i == 0 {
			if _, err := ours.Write([]byte(`{"op":"go"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case st := <-exit:
		if ws := unix.WaitStatus(st); !ws.Exited() || ws.ExitStatus() != 70 {
			t.Errorf("child's wait status %#x, want exit 70", st)
		}
	case <-time.After(time.Minute):
		t.Error("the child did not exit")
	}
}

// The server keeps reading the zygote's stdout for the zygote's whole
// life. It once read it from a goroutine that looked the file up after it
// had been dropped: the garbage collector then closed it, and the pipe
// count the attack suite compares drifted by one.
func TestZygoteStdoutHeldAcrossGC(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/6", z.sb.cmd.Process.Pid)) // nsinit's copy of the zygote's stdout
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a finalizer queued by one collection has run once the next's sentinel has
		done := make(chan struct{})
		sentinel := new([16]byte)
		runtime.SetFinalizer(sentinel, func(*[16]byte) { close(done) })
		sentinel = nil
		runtime.GC()
		<-done
	}
	if !slices.Contains(slices.Collect(maps.Values(observe.Descriptors(os.Getpid()))), target) {
		t.Fatalf("the zygote's stdout (%s) is no longer read by this process", target)
	}
}

// Up to sixteen zygotes live at once (the pool's four lanes, each
// rotating, sessions' and room to spare), each with host ids of its own:
// no two share a uid, and none reaches the cold sandboxes' ids or past the
// engine's span, the default one or the least. A seventeenth is refused,
// and so are more slots than a block holds.
func TestZygoteIDBlocks(t *testing.T) {
	for _, idSpan := range []uint32{0, minIDSpan} {
		t.Run(fmt.Sprint("span=", idSpan), func(t *testing.T) {
			e := newTestEngine(t, func(c *Config) { c.IDSpan = idSpan })
			testZygoteIDBlocks(t, e)
		})
	}
}

func testZygoteIDBlocks(t *testing.T, e *Engine) {
	slots := int(e.cfg.IDSpan/64 - 1)
	if _, err := e.StartZygote(context.Background(), ZygoteConfig{Slots: slots + 1}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("%d slots: %v, want out of range", slots+1, err)
	}
	type span struct{ lo, hi uint32 } // host uids a zygote's children may take, inclusive
	var spans []span
	for range len(e.zygoteIDs) {
		z, err := e.StartZygote(context.Background(), ZygoteConfig{Slots: slots})
		if err != nil {
			t.Fatalf("zygote %d: %v", len(spans)+1, err)
		}
		defer z.Close()
		spans = append(spans, span{z.userBase, z.userBase + 2*uint32(slots) - 1}) // a job's uid and its pid 1's per slot
	}
	if _, err := e.StartZygote(context.Background(), ZygoteConfig{Slots: 1}); err == nil || !strings.Contains(err.Error(), "live already") {
		t.Fatalf("a seventeenth zygote: %v, want refused", err)
	}
	coldTop, engineTop := e.cfg.IDBase+2*uint32(e.cfg.MaxSandboxes), e.cfg.IDBase+e.cfg.IDSpan
	for i, a := range spans {
		if a.lo-1 < coldTop || a.hi >= engineTop { // lo-1: the zygote's own root id
			t.Errorf("zygote %d: uids %d-%d, outside [%d, %d)", i, a.lo-1, a.hi, coldTop, engineTop)
		}
		for j, b := range spans[:i] {
			if a.lo-1 <= b.hi && b.lo-1 <= a.hi {
				t.Errorf("zygotes %d and %d share uids: %d-%d and %d-%d", j, i, b.lo-1, b.hi, a.lo-1, a.hi)
			}
		}
	}
}

// A fork the kernel refuses (here the zygote's pids limit is reached) is a
// failed Prepare, not a dead zygote: the zygote replies with the error and
// forks the next request.
func TestZygoteSurvivesForkFailure(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	pidsDir := ""
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", zygotePid(t, z)))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "pids"):
			pidsDir = filepath.Join("/sys/fs/cgroup/pids", f[2])
		case len(f) == 3 && f[0] == "0" && pidsDir == "":
			pidsDir = filepath.Join("/sys/fs/cgroup", f[2])
		}
	}
	max := filepath.Join(pidsDir, "pids.max")
	old, err := os.ReadFile(max)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(filepath.Join(pidsDir, "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(max, cur, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = z.Prepare(context.Background())
	if werr := os.WriteFile(max, old, 0o644); werr != nil {
		t.Fatal(werr)
	}
	if err == nil || !strings.Contains(err.Error(), "fork failed") {
		t.Fatalf("Prepare at the pids limit: %v, want the zygote's fork failure", err)
	}
	select {
	case <-z.Dead():
		t.Fatal("the zygote died of a failed fork")
	default:
	}
	if res := runWarm(t, z, pyJob("print(2+2)", boxer.Limits{})); string(res.Stdout.Data) != "4\n" {
		t.Fatalf("after the failed fork: %s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
	}
}

// A command of warm.MaxCommandBytes runs warm; one byte more runs cold:
// its job message might not fit the job socket (see warm.MaxCommandBytes).
func TestWarmFormBoundsCommand(t *testing.T) {
	e := newTestEngine(t, nil)
	code := strings.Repeat("#", warm.MaxCommandBytes-len("python")-len("-c"))
	if _, ok := e.WarmForm([]string{"python", "-c", code}); !ok {
		t.Errorf("a command of exactly %d bytes has no warm form", warm.MaxCommandBytes)
	}
	if _, ok := e.WarmForm([]string{"python", "-c", code + "#"}); ok {
		t.Errorf("a command of %d bytes has a warm form", warm.MaxCommandBytes+1)
	}
}

// readProcAt reads a small /proc file whole, from its start each time,
// and refuses one longer than its buffer rather than return it cut.
func TestReadProcAt(t *testing.T) {
	open := func(name string) int {
		t.Helper()
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	stat := open("/proc/self/stat")
	for range 2 {
		b, err := readProcAt(stat)
		if err != nil || !strings.HasPrefix(string(b), strconv.Itoa(os.Getpid())+" (") || !strings.HasSuffix(string(b), "\n") {
			t.Fatalf("/proc/self/stat: %q, %v", b, err)
		}
	}
	long, err := os.ReadFile("/proc/self/status")
	if err != nil || len(long) <= 1024 {
		t.Fatalf("/proc/self/status is %d bytes (%v): the test needs a file longer than readProcAt's buffer", len(long), err)
	}
	if b, err := readProcAt(open("/proc/self/status")); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("/proc/self/status: %d bytes, %v; want refused", len(b), err)
	}
}
