package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// attackPrelude gives each probe a one-word outcome: "ok", an errno name,
// or an exception name.
const attackPrelude = `
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), "ok") if r == -1 else "ok"
def do(fn):
    try:
        v = fn()
        return "ok" if v is None or v is True else str(v)
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)
    except Exception as e:
        return type(e).__name__
def tcp(host, port, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5); s.connect((host, port))
`

// attackCatalogue is what a program inside boxer tries, and the outcome
// each attempt must have, on every path. (x86_64 syscall numbers.)
var attackCatalogue = []struct{ name, probe, want string }{
	// filesystem
	{"write /etc", `do(lambda: open("/etc/evil", "w"))`, "EROFS"},
	{"append /etc/passwd", `do(lambda: open("/etc/passwd", "a"))`, "EACCES"},
	{"write /usr", `do(lambda: open("/usr/lib/evil", "w"))`, "EROFS"},
	{"write /", `do(lambda: open("/evil", "w"))`, "EROFS"},
	{"read /etc/shadow", `do(lambda: open("/etc/shadow").read())`, "ENOENT"},
	{"read /root", `do(lambda: os.listdir("/root"))`, "ENOENT"},
	{"list /home", `do(lambda: os.listdir("/home"))`, "ENOENT"},
	{"read pid 1's environment", `do(lambda: open("/proc/1/environ").read())`, "ENOENT"},
	{"pid 1's root", `do(lambda: os.listdir("/proc/1/root"))`, "ENOENT"},
	{"write /proc/sys", `do(lambda: open("/proc/sys/kernel/hostname", "w").write("x"))`, "EROFS"},
	{"sysfs", `do(lambda: os.listdir("/sys"))`, "ENOENT"},
	{"boxer's state dir", `do(lambda: os.listdir("/run"))`, "ENOENT"},
	{"device node", `do(lambda: os.mknod("/tmp/sda", 0o600 | 0o060000, os.makedev(8, 0)))`, "EPERM"},
	{"hard link to a system file", `do(lambda: os.link("/etc/passwd", "/tmp/p"))`, "EXDEV"},
	{"exec from /tmp", `do(lambda: (open("/tmp/x", "w").write("#!/bin/sh\n"), os.chmod("/tmp/x", 0o755), os.execv("/tmp/x", ["x"])))`, "EACCES"},
	// network: loopback and documentation addresses only
	{"tcp 192.0.2.1", `do(lambda: tcp("192.0.2.1", 80))`, "ENETUNREACH"},
	{"tcp 198.51.100.1", `do(lambda: tcp("198.51.100.1", 443))`, "ENETUNREACH"},
	{"tcp 203.0.113.1", `do(lambda: tcp("203.0.113.1", 22))`, "ENETUNREACH"},
	{"tcp 2001:db8::1", `do(lambda: tcp("2001:db8::1", 80, socket.AF_INET6))`, "ENETUNREACH"},
	{"loopback service", `do(lambda: tcp("127.0.0.1", 8080))`, "ECONNREFUSED"},
	{"udp", `do(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))`, "EPERM"},
	{"raw socket", `do(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))`, "EPERM"},
	{"netlink", `do(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))`, "EPERM"},
	{"packet", `do(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))`, "EPERM"},
	{"vsock", `do(lambda: socket.socket(40, socket.SOCK_STREAM))`, "EAFNOSUPPORT"},
	{"dns", `do(lambda: socket.getaddrinfo("example.com", 80))`, "gaierror"},
	// processes and privileges
	{"signal pid 1", `do(lambda: os.kill(1, 9))`, "EPERM"},
	{"setuid 0", `do(lambda: os.setuid(0))`, "EPERM"},
	{"ptrace", `sc(101, 16, 1, 0, 0)`, "EPERM"},
	{"unshare user ns", `sc(272, 0x10000000)`, "EPERM"},
	{"clone new pid ns", `sc(56, 0x20000000 | 17, 0, 0, 0, 0)`, "EPERM"},
	{"clone3", `sc(435, 0, 0)`, "ENOSYS"},
	{"setns", `sc(308, 0, 0)`, "EPERM"},
	{"mount", `sc(165, 0, 0, 0, 0, 0)`, "EPERM"},
	{"pivot_root", `sc(155, 0, 0)`, "EPERM"},
	// kernel surface
	{"keyctl", `sc(250, 0, 0, 0, 0, 0)`, "EPERM"},
	{"bpf", `sc(321, 0, 0, 0)`, "EPERM"},
	{"perf_event_open", `sc(298, 0, 0, 0, 0, 0)`, "EPERM"},
	{"userfaultfd", `sc(323, 0)`, "EPERM"},
	{"io_uring_setup", `sc(425, 1, 0)`, "EPERM"},
	{"io_setup", `sc(206, 1, 0)`, "ENOSYS"},
	{"init_module", `sc(175, 0, 0, 0)`, "EPERM"},
	{"kexec_load", `sc(246, 0, 0, 0, 0)`, "EPERM"},
	{"open_by_handle_at", `sc(304, 0, 0, 0)`, "EPERM"},
	{"iopl", `sc(172, 3)`, "EPERM"},
	{"personality", `sc(135, 0x0040000)`, "EPERM"},
	{"TIOCSTI, high bits set", `sc(16, 0, 0x100005412, 0)`, "EPERM"},
	// information
	{"boxer's environment", `sorted(k for k in os.environ if k.startswith("BOXER") or "X402" in k) == []`, "True"},
	{"hostname", `socket.gethostname()`, "sandbox"},
	{"other processes", `[p for p in os.listdir("/proc") if p.isdigit()] == [str(os.getpid())]`, "True"},
}

// Every attack in the catalogue, through the real service, on the warm
// path (/v1/exec) and the cold one (an interpreter flag sends a command
// to a cold sandbox): each outcome exact.
func TestServiceAttackCatalogue(t *testing.T) {
	bin := boxerBin(t)
	t.Setenv("BOXER_TEST_SECRET", "must-not-leak") // the server's environment
	s := startServe(t, bin, stateDir(t), t.TempDir())
	var code strings.Builder
	code.WriteString(attackPrelude)
	for _, a := range attackCatalogue {
		fmt.Fprintf(&code, "print(%q, %s)\n", a.name, a.probe)
	}
	code.WriteString("print('secret', os.environ.get('BOXER_TEST_SECRET'))\n")
	program := code.String()
	files, _ := json.Marshal(map[string]string{"main.py": program})
	for _, path := range []struct{ name, route, body string }{
		{"warm", "/v1/exec", execBody(program)},
		{"cold", "/v1/run-python", `{"files": ` + string(files) + `, "command": ["python", "-u", "main.py"]}`},
	} {
		status, _, m := s.post(path.route, path.body)
		stdout, _ := field(m, "result", "stdout").(string)
		if stdout == "" {
			stdout, _ = m["stdout"].(string)
		}
		if status != 200 {
			t.Fatalf("%s: %d %v", path.name, status, m)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		for i, a := range attackCatalogue {
			t.Run(path.name+"/"+a.name, func(t *testing.T) {
				if want := a.name + " " + a.want; i >= len(lines) || lines[i] != want {
					got := ""
					if i < len(lines) {
						got = lines[i]
					}
					t.Fatalf("got %q, want %q", got, want)
				}
			})
		}
		if last := lines[len(lines)-1]; last != "secret None" {
			t.Errorf("%s: the server's environment reached the program: %q", path.name, last)
		}
	}
	if os.Getenv("BOXER_TEST_SECRET") != "must-not-leak" {
		t.Fatal("test setup")
	}
}
