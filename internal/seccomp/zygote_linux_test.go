//go:build amd64 || arm64

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The zygote may unshare the namespaces it gives each child, go back to its
// own PID namespace, mount and unmount, pin pages through io_uring (set up a ring, register buffers and
// the ring's descriptor, never enter it), populate pages through
// process_madvise, and nothing more than Default otherwise.
func TestZygotePolicy(t *testing.T) {
	z := Zygote()
	if err := z.Validate(); err != nil {
		t.Fatal(err)
	}
	eperm := Errno(unix.EPERM)
	rule := func(p Policy, nr uint32) Rule {
		t.Helper()
		for _, r := range p.Rules {
			if r.Nr == nr {
				return r
			}
		}
		t.Fatalf("no rule for %d", nr)
		return Rule{}
	}
	for _, nr := range []uint32{unix.SYS_MOUNT, unix.SYS_UMOUNT2} {
		if r := rule(z, nr); r.Action != Allow || len(r.Checks) != 0 {
			t.Errorf("syscall %d: %+v", nr, r)
		}
	}
	u := rule(z, unix.SYS_UNSHARE)
	if u.Action != Allow || len(u.Checks) != 1 || u.Checks[0].Action != eperm ||
		u.Checks[0].Value&unix.CLONE_NEWUSER == 0 || u.Checks[0].Value&unix.CLONE_NEWPID != 0 ||
		u.Checks[0].Value&unix.CLONE_NEWNS != 0 || u.Checks[0].Value&unix.CLONE_NEWNET != 0 {
		t.Errorf("unshare: %+v", u)
	}
	vm := program(t, z)
	for nstype, want := range map[uint64]Action{unix.CLONE_NEWPID: Allow, unix.CLONE_NEWNET: Allow, 0: eperm, unix.CLONE_NEWNS: eperm,
		unix.CLONE_NEWUSER: eperm, unix.CLONE_NEWPID | unix.CLONE_NEWNS: eperm, unix.CLONE_NEWNET | unix.CLONE_NEWNS: eperm,
		unix.CLONE_NEWIPC: eperm, unix.CLONE_NEWCGROUP: eperm} {
		if got := run(t, vm, z.Arch, unix.SYS_SETNS, 3, nstype); got != want {
			t.Errorf("setns(fd, %#x) = %v, want %v", nstype, got, want)
		}
	}
	for advice, want := range map[uint64]Action{unix.MADV_POPULATE_WRITE: Allow, unix.MADV_COLD: eperm, unix.MADV_PAGEOUT: eperm, unix.MADV_DONTNEED: eperm} {
		if got := run(t, vm, z.Arch, unix.SYS_PROCESS_MADVISE, 3, 0, 1, advice, 0); got != want {
			t.Errorf("process_madvise(advice %d) = %v, want %v", advice, got, want)
		}
	}
	for _, tc := range []struct {
		nr     uint32
		opcode uint64
		want   Action
	}{
		{unix.SYS_IO_URING_SETUP, 0, Allow},
		{unix.SYS_IO_URING_REGISTER, 0, Allow},          // IORING_REGISTER_BUFFERS
		{unix.SYS_IO_URING_REGISTER, 20, Allow},         // IORING_REGISTER_RING_FDS
		{unix.SYS_IO_URING_REGISTER, 2, eperm},          // IORING_REGISTER_FILES
		{unix.SYS_IO_URING_REGISTER, 1, eperm},          // IORING_UNREGISTER_BUFFERS
		{unix.SYS_IO_URING_REGISTER, 20 | 1<<31, eperm}, // IORING_REGISTER_USE_REGISTERED_RING
		{unix.SYS_IO_URING_ENTER, 0, eperm},
	} {
		if got := run(t, vm, z.Arch, tc.nr, 3, tc.opcode, 0, 1, 0); got != tc.want {
			t.Errorf("syscall %d (opcode %#x) = %v, want %v", tc.nr, tc.opcode, got, tc.want)
		}
		if got := run(t, program(t, Default()), z.Arch, tc.nr, 3, tc.opcode, 0, 1, 0); got != eperm {
			t.Errorf("Default lets syscall %d (opcode %#x) through: %v", tc.nr, tc.opcode, got)
		}
	}
	if got := run(t, program(t, Default()), z.Arch, unix.SYS_PROCESS_MADVISE, 3, 0, 1, unix.MADV_POPULATE_WRITE, 0); got != eperm {
		t.Errorf("Default lets process_madvise(MADV_POPULATE_WRITE) through: %v", got)
	}
	d := Default()
	changed := 0
	for i := range d.Rules {
		if d.Rules[i].Nr != z.Rules[i].Nr {
			t.Fatalf("rule %d: order differs", i)
		}
		if d.Rules[i].Action != z.Rules[i].Action || len(d.Rules[i].Checks) != len(z.Rules[i].Checks) {
			changed++
		}
	}
	if changed != 7 {
		t.Errorf("%d rules differ from Default, want 7", changed)
	}
	if _, err := Build(z); err != nil {
		t.Fatal(err)
	}
}

// ZygoteSealed refuses io_uring's three calls, whatever their arguments,
// and leaves every other call to the filters below it.
func TestZygoteSealed(t *testing.T) {
	p := ZygoteSealed()
	vm := program(t, p)
	eperm := Errno(unix.EPERM)
	for _, nr := range []uint32{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
		for _, opcode := range []uint64{0, 20, 1 << 31} {
			if got := run(t, vm, p.Arch, nr, 3, opcode, 0, 1); got != eperm {
				t.Errorf("syscall %d (%#x) = %v, want %v", nr, opcode, got, eperm)
			}
		}
	}
	for _, nr := range []uint32{unix.SYS_READ, unix.SYS_MOUNT, unix.SYS_PROCESS_MADVISE, unix.SYS_IO_URING_SETUP - 1, unix.SYS_IO_URING_REGISTER + 1} {
		if got := run(t, vm, p.Arch, nr); got != Allow {
			t.Errorf("syscall %d = %v, want allow", nr, got)
		}
	}
	if got := run(t, vm, p.Arch^1, unix.SYS_READ); got != KillProcess {
		t.Errorf("a foreign architecture's call = %v, want kill", got)
	}
}

// Datagram-type sockets are refused outside AF_UNIX; unix sockets of any
// type and inet streams are not.
func TestNoInetDatagrams(t *testing.T) {
	p := Default()
	vm := program(t, p)
	for _, tc := range []struct {
		name        string
		domain, typ uint64
		want        Action
	}{
		{"udp", unix.AF_INET, unix.SOCK_DGRAM, Errno(unix.EPERM)},
		{"udp6 nonblocking", unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, Errno(unix.EPERM)},
		{"icmp ping socket", unix.AF_INET, unix.SOCK_DGRAM, Errno(unix.EPERM)},
		{"raw", unix.AF_INET, unix.SOCK_RAW, Errno(unix.EPERM)},
		{"tcp", unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, Allow},
		{"tcp6", unix.AF_INET6, unix.SOCK_STREAM, Allow},
		{"sctp-style seqpacket", unix.AF_INET, unix.SOCK_SEQPACKET, Allow},
		{"unix dgram", unix.AF_UNIX, unix.SOCK_DGRAM, Allow},
		{"unix stream", unix.AF_UNIX, unix.SOCK_STREAM, Allow},
		{"netlink raw", unix.AF_NETLINK, unix.SOCK_RAW, Errno(unix.EPERM)},
		{"vsock stream", unix.AF_VSOCK, unix.SOCK_STREAM, Errno(unix.EAFNOSUPPORT)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(t, vm, p.Arch, unix.SYS_SOCKET, tc.domain, tc.typ, 0); got != tc.want {
				t.Fatalf("socket(%d, %#x) = %v, want %v", tc.domain, tc.typ, got, tc.want)
			}
		})
	}
}
