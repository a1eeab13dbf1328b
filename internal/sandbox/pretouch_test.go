package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// pretouchScript loads zygote.py as a module (its main never runs), makes
// eight pages, unmaps pages 2 and 3, learns pages 0, 2-3, 4 and 6-7, and
// has a forked child run _pretouch: it must copy the learned pages still
// mapped (0, 4, 6, 7), step over the hole, and copy nothing it did not
// learn (1, 5), all through process_madvise. With "fallback",
// process_madvise is made to fail as on a kernel before 6.13, and the
// per-range madvise must do the same.
const pretouchScript = `
import ctypes, importlib.util, mmap, os, sys
spec = importlib.util.spec_from_file_location("zygote", sys.argv[1])
z = importlib.util.module_from_spec(spec)
spec.loader.exec_module(z)
if sys.argv[2] == "fallback":
    z.SYS_PROCESS_MADVISE = 1000  # no such system call: ENOSYS
else:
    z._libc.madvise = None  # the hole must not send it to the fallback
P = mmap.PAGESIZE
m = mmap.mmap(-1, 8 * P, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
for i in range(8):
    m[i * P] = 1
z._libc.munmap(base + 2 * P, 2 * P)
ranges = ((base, P), (base + 2 * P, 2 * P), (base + 4 * P, P), (base + 6 * P, 2 * P))
z._LEARNED, z._LEARNED_IOV = ranges, z._iovecs(ranges)
mapped = [(base, base + 2 * P), (base + 4 * P, base + 8 * P)]
pid = os.fork()
if pid == 0:
    before = z._exclusive(mapped)
    z._pretouch()
    got = sorted((p - base) // P for p in z._exclusive(mapped) - before)
    os.write(1, repr(got).encode())
    os._exit(0)
os.waitpid(pid, 0)
`

func TestPretouchStepsOverHoles(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "zygote.py")
	if err := os.WriteFile(src, []byte(zygoteSource), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"process_madvise", "fallback"} {
		t.Run(mode, func(t *testing.T) {
			// zygote.py reads its configuration from fd 3, a socket: no
			// seccomp program, no pre-imports.
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			ours, theirs := os.NewFile(uintptr(pair[0]), "ctrl"), os.NewFile(uintptr(pair[1]), "zygote-ctrl")
			defer ours.Close()
			if _, err := ours.Write([]byte("\n")); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/usr/bin/python3", "-c", pretouchScript, src, mode)
			cmd.ExtraFiles = []*os.File{theirs}
			out, err := cmd.CombinedOutput()
			theirs.Close()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != "[0, 4, 6, 7]" {
				t.Errorf("pages copied: %s, want [0, 4, 6, 7]", got)
			}
		})
	}
}
