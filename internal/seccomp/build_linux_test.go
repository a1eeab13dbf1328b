//go:build amd64 || arm64

package seccomp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// These tests run the compiled program in x/net/bpf's VM against synthetic
// seccomp_data, so the policy is checked without installing anything.

// program builds p and loads the result into a VM.
func program(t *testing.T, p Policy) *bpf.VM {
	t.Helper()
	f, err := Build(p)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(f) > unix.BPF_MAXINSNS {
		t.Fatalf("program has %d instructions, the kernel takes at most %d", len(f), unix.BPF_MAXINSNS)
	}
	raw := make([]bpf.RawInstruction, len(f))
	for i, in := range f {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("program contains instructions the VM cannot decode")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	return vm
}

// seccompData lays out struct seccomp_data for the VM. The kernel loads each
// 32-bit word in the machine's byte order, but the VM, written for network
// packets, loads big-endian; so each word is stored big-endian holding the
// value the kernel would load at that offset, low and high halves of each
// argument where the machine keeps them.
func seccompData(arch, nr uint32, args [6]uint64) []byte {
	b := make([]byte, offArgs+6*8)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	for i, a := range args {
		low := argLow(i)
		high := offArgs + 8*uint32(i) + 4 - lowWordOffset
		binary.BigEndian.PutUint32(b[low:], uint32(a))
		binary.BigEndian.PutUint32(b[high:], uint32(a>>32))
	}
	return b
}

func run(t *testing.T, vm *bpf.VM, arch, nr uint32, args ...uint64) Action {
	t.Helper()
	var a [6]uint64
	copy(a[:], args)
	got, err := vm.Run(seccompData(arch, nr, a))
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return Action(got)
}

// reference decides a call the slow, obvious way, from the Policy itself.
func reference(p Policy, arch, nr uint32, args [6]uint64) Action {
	if arch != p.Arch || nr&p.KillNrBits != 0 {
		return KillProcess
	}
	for _, r := range p.Rules {
		if r.Nr != nr {
			continue
		}
		holds := func(c Cond) bool {
			v := uint32(args[c.Arg])
			return (c.Op == Equal && v == c.Value) || (c.Op == AnyBits && v&c.Value != 0)
		}
		for _, c := range r.Checks {
			if holds(Cond{c.Arg, c.Op, c.Value}) && (c.Also == nil || holds(*c.Also)) {
				return c.Action
			}
		}
		return r.Action
	}
	return p.Default
}

// TestDefaultAssembles checks that the default policy compiles to a program
// the kernel accepts in size and the VM can decode, and reports its shape.
func TestDefaultAssembles(t *testing.T) {
	p := Default()
	program(t, p) // fails the test past BPF_MAXINSNS or on an undecodable instruction
	f, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, byArgs, refusedN int
	for _, r := range p.Rules {
		switch {
		case len(r.Checks) > 0:
			byArgs++
		case r.Action == Allow:
			allowed++
		default:
			refusedN++
		}
	}
	rules := slices.Clone(p.Rules)
	slices.SortFunc(rules, func(a, b Rule) int { return int(a.Nr) - int(b.Nr) })
	t.Logf("%d rules: %d allowed outright, %d decided by arguments, %d refused; %d spans, %d instructions (limit %d)",
		len(p.Rules), allowed, byArgs, refusedN, len(spans(rules, p.Default)), len(f), unix.BPF_MAXINSNS)
}

func TestDefaultDecides(t *testing.T) {
	p := Default()
	vm := program(t, p)
	const hi = 1 << 32 // a high bit the kernel ignores for int arguments
	var (
		eperm   = Errno(unix.EPERM)
		enosys  = Errno(unix.ENOSYS)
		eafnosp = Errno(unix.EAFNOSUPPORT)
	)
	tests := []struct {
		name string
		nr   uint32
		args []uint64
		want Action
	}{
		{"read", unix.SYS_READ, nil, Allow},
		{"futex", unix.SYS_FUTEX, nil, Allow},
		{"unlisted syscall", 1000, nil, enosys},
		{"number past the table", 0x3fffffff, nil, enosys},
		{"clone3", unix.SYS_CLONE3, nil, enosys},
		{"ptrace", unix.SYS_PTRACE, nil, eperm},
		{"unshare", unix.SYS_UNSHARE, nil, eperm},
		{"mbind", unix.SYS_MBIND, nil, eperm},

		{"clone fork", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, Allow},
		{"clone thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES |
			unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
			unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}, Allow},
		{"clone vfork", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, Allow},
		{"clone NEWNS", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNS}, eperm},
		{"clone NEWUTS", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUTS}, eperm},
		{"clone NEWIPC", unix.SYS_CLONE, []uint64{unix.CLONE_NEWIPC}, eperm},
		{"clone NEWUSER", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, eperm},
		{"clone NEWPID", unix.SYS_CLONE, []uint64{unix.CLONE_NEWPID}, eperm},
		{"clone NEWNET", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, eperm},
		{"clone NEWCGROUP", unix.SYS_CLONE, []uint64{unix.CLONE_NEWCGROUP}, eperm},
		{"clone NEWTIME", unix.SYS_CLONE, []uint64{unix.CLONE_NEWTIME}, eperm},
		{"clone NEWUSER with high bits", unix.SYS_CLONE, []uint64{hi | unix.CLONE_NEWUSER}, eperm},
		{"clone high bits only", unix.SYS_CLONE, []uint64{hi | 0xffffffff00000000 | uint64(unix.SIGCHLD)}, Allow},

		{"socket AF_UNIX", unix.SYS_SOCKET, []uint64{unix.AF_UNIX}, Allow},
		{"socket AF_INET", unix.SYS_SOCKET, []uint64{unix.AF_INET}, Allow},
		{"socket AF_INET6", unix.SYS_SOCKET, []uint64{unix.AF_INET6}, Allow},
		{"socket AF_INET with high bits", unix.SYS_SOCKET, []uint64{hi | unix.AF_INET}, Allow},
		{"socket AF_UNSPEC", unix.SYS_SOCKET, []uint64{unix.AF_UNSPEC}, eafnosp},
		{"socket AF_NETLINK", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK}, eafnosp},
		{"socket AF_NETLINK with high bits", unix.SYS_SOCKET, []uint64{hi | unix.AF_NETLINK}, eafnosp},
		{"socket AF_PACKET", unix.SYS_SOCKET, []uint64{unix.AF_PACKET}, eafnosp},
		{"socket AF_VSOCK", unix.SYS_SOCKET, []uint64{unix.AF_VSOCK}, eafnosp},
		{"socket AF_BLUETOOTH", unix.SYS_SOCKET, []uint64{unix.AF_BLUETOOTH}, eafnosp},
		{"socket AF_ALG", unix.SYS_SOCKET, []uint64{unix.AF_ALG}, eafnosp},
		{"socket AF_INET in high bits only", unix.SYS_SOCKET, []uint64{unix.AF_INET << 32}, eafnosp},
		{"socketpair AF_UNIX", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX}, Allow},
		{"socketpair AF_NETLINK with high bits", unix.SYS_SOCKETPAIR, []uint64{hi | unix.AF_NETLINK}, eafnosp},

		{"ioctl FIONREAD (TIOCINQ)", unix.SYS_IOCTL, []uint64{0, unix.TIOCINQ}, Allow},
		{"ioctl TCGETS with high bits", unix.SYS_IOCTL, []uint64{0, 0xffffffff00000000 | unix.TCGETS}, Allow},
		{"ioctl TIOCSTI", unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, eperm},
		{"ioctl TIOCSTI with bit 32", unix.SYS_IOCTL, []uint64{0, hi | unix.TIOCSTI}, eperm},
		{"ioctl TIOCSTI with all high bits", unix.SYS_IOCTL, []uint64{0, 0xffffffff00000000 | unix.TIOCSTI}, eperm},
		{"ioctl TIOCLINUX", unix.SYS_IOCTL, []uint64{0, unix.TIOCLINUX}, eperm},
		{"ioctl TIOCLINUX with high bits", unix.SYS_IOCTL, []uint64{0, hi | unix.TIOCLINUX}, eperm},
		{"ioctl with TIOCSTI as fd", unix.SYS_IOCTL, []uint64{unix.TIOCSTI, 0}, Allow},

		{"personality query", unix.SYS_PERSONALITY, []uint64{0xffffffff}, Allow},
		{"personality query with high bits", unix.SYS_PERSONALITY, []uint64{hi | 0xffffffff}, Allow},
		{"personality PER_LINUX", unix.SYS_PERSONALITY, []uint64{0}, Allow},
		{"personality ADDR_NO_RANDOMIZE", unix.SYS_PERSONALITY, []uint64{0x0040000}, eperm},
		{"personality PER_LINUX32", unix.SYS_PERSONALITY, []uint64{0x0008}, eperm},
		{"personality PER_LINUX32 with high bits", unix.SYS_PERSONALITY, []uint64{0xffffffff00000000 | 0x0008}, eperm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, vm, p.Arch, tt.nr, tt.args...); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNotifyIPDecides: NotifyIP suspends IP stream sockets for the
// listener and changes nothing else, Default's refusals included.
func TestNotifyIPDecides(t *testing.T) {
	d := Default()
	p := NotifyIP(d)
	vm := program(t, p)
	const hi = 1 << 32
	eafnosp, eperm := Errno(unix.EAFNOSUPPORT), Errno(unix.EPERM)
	tests := []struct {
		name string
		nr   uint32
		args []uint64
		want Action
	}{
		{"socket AF_INET stream", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM}, UserNotif},
		{"socket AF_INET6 stream", unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, UserNotif},
		{"socket AF_INET with high bits", unix.SYS_SOCKET, []uint64{hi | unix.AF_INET, unix.SOCK_STREAM}, UserNotif},
		{"socket AF_INET datagram", unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_DGRAM}, eperm},
		{"socket AF_INET in high bits only", unix.SYS_SOCKET, []uint64{unix.AF_INET << 32, unix.SOCK_STREAM}, eafnosp},
		{"socket AF_UNIX", unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, Allow},
		{"socket AF_NETLINK", unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_STREAM}, eafnosp},
		{"socketpair AF_INET", unix.SYS_SOCKETPAIR, []uint64{unix.AF_INET, unix.SOCK_STREAM}, UserNotif},
		{"socketpair AF_UNIX", unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, Allow},
		{"connect", unix.SYS_CONNECT, nil, Allow},
		{"read", unix.SYS_READ, nil, Allow},
		{"ptrace", unix.SYS_PTRACE, nil, eperm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, vm, p.Arch, tt.nr, tt.args...); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// The policy it was given is left as it was.
	if got := run(t, program(t, d), d.Arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM); got != Allow {
		t.Errorf("Default after NotifyIP: socket AF_INET %v, want allow", got)
	}
}

func TestDefaultKillsForeignABIs(t *testing.T) {
	p := Default()
	vm := program(t, p)
	type call struct {
		name string
		arch uint32
		nr   uint32
	}
	tests := []call{
		{"i386", unix.AUDIT_ARCH_I386, 20},
		{"arm", unix.AUDIT_ARCH_ARM, 20},
		{"no arch", 0, unix.SYS_READ},
	}
	if p.KillNrBits != 0 {
		tests = append(tests,
			call{"x32 getpid", p.Arch, p.KillNrBits | unix.SYS_GETPID},
			call{"x32 read", p.Arch, p.KillNrBits | unix.SYS_READ})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, vm, tt.arch, tt.nr); got != KillProcess {
				t.Errorf("got %v, want %v", got, KillProcess)
			}
		})
	}
}

// TestPoliciesMatchReference runs Default's, Zygote's, ZygoteSealed's and
// NotifyIP(Default())'s
// programs on every syscall number below 1100, the numbers either side of
// each rule's and the top of the range, each with no arguments, all bits
// set, random ones, and the values the rule's checks name (with high bits
// added to them), against the reference interpreter: merging neighbours
// into spans must not change a single decision.
func TestPoliciesMatchReference(t *testing.T) {
	for name, p := range map[string]Policy{"Default": Default(), "Zygote": Zygote(), "ZygoteSealed": ZygoteSealed(), "NotifyIP": NotifyIP(Default())} {
		t.Run(name, func(t *testing.T) {
			vm := program(t, p)
			rng := rand.New(rand.NewPCG(1, 2))
			checks := map[uint32][]Check{}
			nrs := map[uint32]bool{^uint32(0): true, ^uint32(0) - 1: true, 1 << 31: true}
			for nr := uint32(0); nr < 1100; nr++ {
				nrs[nr] = true
			}
			for _, r := range p.Rules {
				checks[r.Nr] = r.Checks
				nrs[r.Nr-1], nrs[r.Nr], nrs[r.Nr+1] = true, true, true
			}
			for nr := range nrs {
				argSets := [][6]uint64{{}, {^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}}
				for _, c := range checks[nr] {
					for _, v := range []uint64{uint64(c.Value), 1<<32 | uint64(c.Value), uint64(c.Value) << 32, uint64(c.Value) ^ 1} {
						var a [6]uint64
						a[c.Arg] = v
						argSets = append(argSets, a)
						if also := c.Also; also != nil {
							// The second test alone, and both.
							for _, w := range []uint64{uint64(also.Value), 1<<32 | uint64(also.Value), uint64(also.Value) ^ 1} {
								var b [6]uint64
								b[also.Arg] = w
								argSets = append(argSets, b)
								if also.Arg != c.Arg {
									b[c.Arg] = v
									argSets = append(argSets, b)
								}
							}
						}
					}
				}
				for range 4 {
					var a [6]uint64
					for i := range a {
						a[i] = rng.Uint64()
					}
					argSets = append(argSets, a)
				}
				for _, a := range argSets {
					want := reference(p, p.Arch, nr, a)
					if got := run(t, vm, p.Arch, nr, a[:]...); got != want {
						t.Errorf("syscall %d args %#x: VM says %v, reference says %v", nr, a, got, want)
					}
				}
			}
		})
	}
}

// spans tiles the numbers from 0 and merges only neighbours decided alike
// without checks: a rule at 0 or at the top leaves no default span beyond
// the range, and a rule with checks keeps a span of its own even between
// rules of its action.
func TestSpans(t *testing.T) {
	e1, e2 := Errno(unix.EPERM), Errno(unix.ENOSYS)
	check := []Check{{Arg: 0, Op: Equal, Value: 1, Action: e1}}
	type got struct {
		lo      uint32
		checked bool
		action  Action
	}
	for _, tc := range []struct {
		name  string
		rules []Rule
		def   Action
		want  []got
	}{
		{"no rules", nil, e2, []got{{0, false, e2}}},
		{"rule at 0", []Rule{{Nr: 0, Action: Allow}}, e2, []got{{0, false, Allow}, {1, false, e2}}},
		{"rule at the top", []Rule{{Nr: ^uint32(0), Action: Allow}}, e2, []got{{0, false, e2}, {^uint32(0), false, Allow}}},
		{"neighbours merge", []Rule{{Nr: 3, Action: Allow}, {Nr: 4, Action: Allow}, {Nr: 6, Action: Allow}}, Allow, []got{{0, false, Allow}}},
		{"gaps take the default", []Rule{{Nr: 3, Action: Allow}, {Nr: 5, Action: Allow}}, e2,
			[]got{{0, false, e2}, {3, false, Allow}, {4, false, e2}, {5, false, Allow}, {6, false, e2}}},
		{"checks keep their span", []Rule{{Nr: 1, Action: Allow}, {Nr: 2, Action: Allow, Checks: check}, {Nr: 3, Action: Allow}}, Allow,
			[]got{{0, false, Allow}, {2, true, Allow}, {3, false, Allow}}},
	} {
		var out []got
		for _, s := range spans(tc.rules, tc.def) {
			g := got{s.lo, s.rule != nil, s.action}
			if s.rule != nil {
				g.action = s.rule.Action
			}
			out = append(out, g)
		}
		if !slices.Equal(out, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, out, tc.want)
		}
	}
}

// TestRequiredRefusals pins the refusals the sandbox's threat model names,
// so that a later edit of the lists cannot quietly allow one of them.
func TestRequiredRefusals(t *testing.T) {
	p := Default()
	vm := program(t, p)
	eperm := Errno(unix.EPERM)
	nrs := append([]uint32{
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
		unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
		unix.SYS_DELETE_MODULE, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
		unix.SYS_SYSLOG, unix.SYS_ACCT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT,
		unix.SYS_KCMP, unix.SYS_PIDFD_GETFD,
		unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
		unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
		unix.SYS_QUOTACTL, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_FANOTIFY_INIT,
		unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
		unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_VHANGUP,
		unix.SYS_MBIND, unix.SYS_MOVE_PAGES, unix.SYS_SET_MEMPOLICY, unix.SYS_MIGRATE_PAGES,
		unix.SYS_GET_MEMPOLICY,
	}, archRequiredRefusals()...)
	for _, nr := range nrs {
		if got := run(t, vm, p.Arch, nr); got != eperm {
			t.Errorf("syscall %d: got %v, want %v", nr, got, eperm)
		}
	}
}

func TestBuildRejects(t *testing.T) {
	arch := uint32(unix.AUDIT_ARCH_X86_64)
	rule := func(nr uint32, checks ...Check) Rule { return Rule{Nr: nr, Checks: checks, Action: Allow} }
	tests := []struct {
		name string
		p    Policy
	}{
		{"no arch", Policy{Default: Allow}},
		{"bad default", Policy{Arch: arch, Default: Action(0x12345678)}},
		{"errno too large", Policy{Arch: arch, Default: Errno(maxErrno + 1)}},
		{"duplicate rule", Policy{Arch: arch, Default: Allow, Rules: []Rule{rule(1), rule(1)}}},
		{"unreachable rule", Policy{Arch: arch, KillNrBits: 0x40000000, Default: Allow, Rules: []Rule{rule(0x40000001)}}},
		{"argument 6", Policy{Arch: arch, Default: Allow, Rules: []Rule{rule(1, Check{Arg: 6, Op: Equal, Action: Allow})}}},
		{"negative argument", Policy{Arch: arch, Default: Allow, Rules: []Rule{rule(1, Check{Arg: -1, Op: Equal, Action: Allow})}}},
		{"no op", Policy{Arch: arch, Default: Allow, Rules: []Rule{rule(1, Check{Arg: 0, Action: Allow})}}},
		{"empty mask", Policy{Arch: arch, Default: Allow, Rules: []Rule{rule(1, Check{Arg: 0, Op: AnyBits, Action: Allow})}}},
		{"bad check action", Policy{Arch: arch, Default: Allow, Rules: []Rule{rule(1, Check{Arg: 0, Op: Equal, Action: 7})}}},
		{"too many rules", Policy{Arch: arch, Default: Allow, Rules: manyRules(2000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Build(tt.p); err == nil {
				t.Errorf("Build succeeded, want an error")
			}
		})
	}
	if _, err := Build(Policy{Default: Allow}); !errors.Is(err, ErrUnsupportedArch) {
		t.Errorf("Build without arch: got %v, want ErrUnsupportedArch", err)
	}
}

func manyRules(n int) []Rule {
	rules := make([]Rule, n)
	for i := range rules {
		// Every other number, so the gaps exercise the leaves' own
		// comparison; alternating actions, so a wrong leaf shows.
		rules[i] = Rule{Nr: uint32(2 * i), Action: Errno(unix.Errno(1 + i%2))}
	}
	return rules
}

// TestLongJumps uses a policy big enough that the search's jumps over left
// halves exceed a conditional jump's 255-instruction reach.
func TestLongJumps(t *testing.T) {
	p := Policy{Arch: unix.AUDIT_ARCH_X86_64, Default: Allow, Rules: manyRules(1000)}
	vm := program(t, p)
	for nr := uint32(0); nr < 2002; nr++ {
		want := reference(p, p.Arch, nr, [6]uint64{})
		if got := run(t, vm, p.Arch, nr); got != want {
			t.Fatalf("syscall %d: got %v, want %v", nr, got, want)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	p := Default()
	f, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	b := f.Marshal()
	g, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !bytes.Equal(g.Marshal(), b) || len(g) != len(f) {
		t.Fatal("round trip changed the filter")
	}
	for i := range f {
		if f[i] != g[i] {
			t.Fatalf("instruction %d: got %+v, want %+v", i, g[i], f[i])
		}
	}

	for _, bad := range [][]byte{nil, make([]byte, 7), make([]byte, 9), make([]byte, 8*(unix.BPF_MAXINSNS+1))} {
		if _, err := Unmarshal(bad); err == nil {
			t.Errorf("Unmarshal of %d bytes succeeded, want an error", len(bad))
		}
	}
}
