package warm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"boxer/internal/testenv"

	"golang.org/x/sys/unix"
)

// pretouchScript (after loadZygote) makes eight pages, unmaps pages 2 and
// 3, learns pages 0, 2-3, 4 and 6-7, and has a forked child run
// pretouch: it must copy the learned pages still mapped (0, 4, 6, 7),
// step over the hole, and copy nothing it did not learn (1, 5), all
// through process_madvise. With "fallback", process_madvise is made to
// fail as on a kernel before 6.13, and the per-range madvise must do the
// same.
const pretouchScript = `
if sys.argv[2] == "fallback":
    z.speed.SYS_PROCESS_MADVISE = 1000  # no such system call: ENOSYS
else:
    z.speed._libc.madvise = None  # the hole must not send it to the fallback
P = mmap.PAGESIZE
m = mmap.mmap(-1, 8 * P, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
for i in range(8):
    m[i * P] = 1
z.speed._libc.munmap(base + 2 * P, 2 * P)
ranges = ((base, P), (base + 2 * P, 2 * P), (base + 4 * P, P), (base + 6 * P, 2 * P))
z.speed.UNPINNED, z.speed.UNPINNED_IOV = ranges, z.speed.iovecs(ranges)
mapped = [(base, base + 2 * P), (base + 4 * P, base + 8 * P)]
pid = os.fork()
if pid == 0:
    before = z.speed.exclusive(mapped)
    z.speed.pretouch()
    got = sorted((p - base) // P for p in z.speed.exclusive(mapped) - before)
    os.write(1, repr(got).encode())
    os._exit(0)
os.waitpid(pid, 0)
`

func TestPretouchStepsOverHoles(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	for _, mode := range []string{"process_madvise", "fallback"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "process_madvise" && !testenv.KernelAtLeast(t, 6, 13) {
				t.Skip("process_madvise(MADV_POPULATE_WRITE) on oneself needs Linux 6.13; before it the zygote takes the fallback, which the other case covers")
			}
			out, err := runZygoteModule(t, pretouchScript, mode)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != "[0, 4, 6, 7]" {
				t.Errorf("pages copied: %s, want [0, 4, 6, 7]", got)
			}
		})
	}
}

// pinScript (after loadZygote) makes eight pages and has pin
// pin pages 0-1 and 4. It prints what it pinned, and that the parent can
// enter its registered ring (the control), then forks: the child must own
// pages 0, 1 and 4 from its first instruction on (fork copied them),
// share the rest, hold no io_uring descriptor nor the registered ring
// (EINVAL: a fork does not copy the task's io_uring context), and keep the
// bytes page 0 had at the fork when the parent then writes it; the parent
// must still own its pinned pages while the child shares the others, and
// keep its page 1 when the child writes its own.
// With "huge", pin is also given a page inside a transparent huge page,
// which it must leave out. With "refused", io_uring_setup fails as where
// io_uring is disabled: nothing is pinned, and the child shares every
// page.
const pinScript = `
if sys.argv[2] == "refused":
    z.speed.SYS_IO_URING_SETUP = 1000  # no such system call: ENOSYS
P = mmap.PAGESIZE
m = mmap.mmap(-1, 8 * P, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
for i in range(8):
    m[i * P] = 1
mapped = [(base, base + 8 * P)]
def own():
    return sorted((p - base) // P for p in z.speed.exclusive(mapped))
` + pyRings + `ranges = ((base, 2 * P), (base + 4 * P, P))
if sys.argv[2] == "huge":  # and a page in a transparent huge page, which must be left out
    H = 2 << 20
    h = mmap.mmap(-1, 2 * H, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    hbase = -(-ctypes.addressof(ctypes.c_char.from_buffer(h)) // H) * H
    z.speed._libc.madvise(hbase, H, mmap.MADV_HUGEPAGE)
    ctypes.memset(hbase, 1, H)
    if not any(start <= hbase < end for start, end in z.speed.huge_mappings()):
        sys.exit("no huge page")
    ranges += ((hbase, P),)
def enter():  # io_uring_enter on registered ring 0: 0, or the errno
    r = z.speed._libc.syscall(426, 0, 0, 0, 16, 0)  # IORING_ENTER_REGISTERED_RING
    return 0 if r == 0 else ctypes.get_errno()
pinned = z.speed.pages(z.speed.pin(ranges))
vmpin = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmPin:")][0]
print("pinned", pinned, "VmPin", vmpin, "rings", rings(), "enter", enter(), flush=True)  # before the fork, or the child prints it again
r, w = os.pipe()
r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    mine = own()
    m[P] = 7
    os.write(w2, b"x")
    os.read(r, 1)  # the parent has written page 0
    print("child owns", mine, "rings", rings(), "enter", enter(), "page 0", m[0], flush=True)
    os._exit(0)
os.close(r)
os.read(r2, 1)
print("parent owns", own(), flush=True)
m[0] = 9
os.write(w, b"x")
os.waitpid(pid, 0)
print("parent's page 1", m[P])
`

func TestPinCopiesAtFork(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	testenv.RequireIOUring(t)
	for mode, want := range map[string]string{
		"pinned": "pinned 3 VmPin 12 rings 0 enter 0\nparent owns [0, 1, 4]\nchild owns [0, 1, 4] rings 0 enter 22 page 0 1\nparent's page 1 1\n",
		"huge":   "pinned 3 VmPin 12 rings 0 enter 0\nparent owns [0, 1, 4]\nchild owns [0, 1, 4] rings 0 enter 22 page 0 1\nparent's page 1 1\n",
		// Unpinned, page 1 is the parent's alone once the child has copied it.
		"refused": "pinned 0 VmPin 0 rings 0 enter 22\nparent owns [1]\nchild owns [] rings 0 enter 22 page 0 1\nparent's page 1 1\n",
	} {
		t.Run(mode, func(t *testing.T) {
			out, err := runZygoteModule(t, pinScript, mode)
			if mode == "huge" && strings.Contains(string(out), "no huge page") {
				t.Skip("this kernel gave the region no transparent huge page")
			}
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if string(out) != want {
				t.Errorf("got\n%swant\n%s", out, want)
			}
		})
	}
}

// loadZygote loads zygote.py, whose path is the first argument, as module
// z (its main never runs).
const loadZygote = `import ctypes, importlib.util, mmap, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
spec = importlib.util.spec_from_file_location("zygote", sys.argv[1])
z = importlib.util.module_from_spec(spec)
spec.loader.exec_module(z)
`

// pyRings defines rings(), the count of io_uring descriptors this Python
// process holds.
const pyRings = `import os
def rings():
    n = 0
    for f in os.listdir("/proc/self/fd"):
        try:
            n += "io_uring" in os.readlink("/proc/self/fd/" + f)
        except FileNotFoundError:  # listdir's own, closed since
            pass
    return n
`

// runZygoteModule runs script after loadZygote with /usr/bin/python3, its
// arguments being the path of a copy of zygote.py and args. zygote.py
// reads its configuration from fd 3, a socket: it gets no seccomp program
// and no pre-imports.
func runZygoteModule(t *testing.T, script string, args ...string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "zygote.py")
	if err := os.WriteFile(src, []byte(zygoteSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zygote_speed.py"), []byte(speedSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zygote_session.py"), []byte(sessionSource), 0o644); err != nil {
		t.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "ctrl"), os.NewFile(uintptr(pair[1]), "zygote-ctrl")
	defer ours.Close()
	config, err := Config{}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ours.Write(config); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", append([]string{"-c", loadZygote + script, src}, args...)...)
	cmd.ExtraFiles = []*os.File{theirs}
	out, err := cmd.CombinedOutput()
	theirs.Close()
	return out, err
}

// splitScript (after loadZygote) learns one range of pages 2-5 across two
// mappings (pages 4-7 made executable too, which splits the mapping): pin
// pins it as two pieces, and no page of it is left for a child to copy
// again (unpinned).
const splitScript = `
P = mmap.PAGESIZE
m = mmap.mmap(-1, 8 * P, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
for i in range(8):
    m[i * P] = 1
z.speed._libc.mprotect(base + 4 * P, 4 * P, mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
learned = ((base + 2 * P, 4 * P),)
pinned = z.speed.pin(learned)
print(len(pinned), z.speed.pages(pinned), z.speed.unpinned(learned, pinned), z.speed.unpinned(learned, ()) == learned)
`

func TestPinSplitsAtMappings(t *testing.T) {
	testenv.RequireIOUring(t)
	out, err := runZygoteModule(t, splitScript, "")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := string(out); got != "2 4 () True\n" {
		t.Errorf("got %q, want two pieces, four pages, nothing left to copy", got)
	}
}
