package seccomp

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Action is what the kernel does with a system call: a SECCOMP_RET_* value,
// including the errno for SECCOMP_RET_ERRNO.
type Action uint32

// The actions the policy uses. KillProcess is kept for things no honest
// program does (foreign architectures); refusals use Errno so that a program
// sees an ordinary failed call it can handle. UserNotif suspends the call
// until the holder of the filter's listener answers it (see NotifyIP); a
// filter with it must be installed with a listener, or the call fails with
// ENOSYS.
const (
	Allow       Action = unix.SECCOMP_RET_ALLOW
	KillProcess Action = unix.SECCOMP_RET_KILL_PROCESS
	UserNotif   Action = unix.SECCOMP_RET_USER_NOTIF
)

// maxErrno is the largest errno the kernel passes through SECCOMP_RET_ERRNO
// (MAX_ERRNO in the kernel); larger values are clamped by the kernel, so we
// refuse them instead of silently returning something else.
const maxErrno = 4095

// Errno returns the action that fails the call with e.
func Errno(e unix.Errno) Action {
	return Action(unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA)
}

func (a Action) String() string {
	switch {
	case a == Allow:
		return "allow"
	case a == KillProcess:
		return "kill_process"
	case a == UserNotif:
		return "user_notif"
	case a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		e := unix.Errno(a & unix.SECCOMP_RET_DATA)
		if name := unix.ErrnoName(e); name != "" {
			return "errno(" + name + ")"
		}
		return fmt.Sprintf("errno(%d)", uint32(e))
	}
	return fmt.Sprintf("action(%#x)", uint32(a))
}

// valid reports whether a is one of the actions Build knows how to emit.
func (a Action) valid() bool {
	switch {
	case a == Allow, a == KillProcess, a == UserNotif:
		return true
	case a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return a&unix.SECCOMP_RET_DATA <= maxErrno
	}
	return false
}

// Op is how a Check compares an argument with its Value.
type Op uint8

const (
	// Equal matches when the argument's low 32 bits equal Value.
	Equal Op = iota + 1
	// AnyBits matches when the argument's low 32 bits share a set bit with Value.
	AnyBits
)

// Check is one test on one argument of a system call.
//
// Only the low 32 bits of the argument are examined. That is deliberate, and
// the reason Check has no 64-bit form: every argument the policy inspects is
// an int or unsigned int in the kernel (socket's domain, ioctl's cmd,
// personality's persona), or is cut to its low 32 bits by the kernel before
// use (clone's flags, see lower_32_bits in kernel/fork.c). The kernel ignores
// the high half, so the filter must too: a filter comparing all 64 bits would
// let ioctl(fd, 0x1_00005412) through as "not TIOCSTI" while the kernel runs
// it as TIOCSTI. Do not add a Check on a genuinely 64-bit argument (a pointer,
// a size) without giving Check a 64-bit form first.
type Check struct {
	Arg   int // 0 to 5, in the order of the kernel's SYSCALL_DEFINE
	Op    Op
	Value uint32
	// Also, if set, must match too (on another argument, usually): the
	// check matches when both do.
	Also   *Cond
	Action Action // taken when the check matches
}

// Cond is a Check's second test, with the same meaning of Arg, Op and
// Value.
type Cond struct {
	Arg   int
	Op    Op
	Value uint32
}

// Rule decides one system call. Checks are tried in order and the first that
// matches decides; when none matches, Action does.
type Rule struct {
	Nr     uint32
	Checks []Check
	Action Action
}

// Policy is a complete seccomp policy for one architecture.
type Policy struct {
	// Arch is the AUDIT_ARCH_* value a call must carry. A call made through
	// another ABI (i386's int 0x80 on x86_64) kills the process: the syscall
	// numbers in Rules mean nothing there. Zero means the architecture is
	// not supported, and Build fails.
	Arch uint32
	// KillNrBits kills the process for a call whose number has any of these
	// bits set. On x86_64 this is the x32 bit, an ABI that shares Arch with
	// x86_64 but uses its own numbering.
	KillNrBits uint32
	// Default decides every call that has no Rule.
	Default Action
	Rules   []Rule
}

// Validate reports the first problem that would make p compile to a filter
// other than the one it reads as.
func (p Policy) Validate() error {
	if p.Arch == 0 {
		return ErrUnsupportedArch
	}
	if !p.Default.valid() {
		return fmt.Errorf("seccomp: default action %v is not supported", p.Default)
	}
	seen := make(map[uint32]bool, len(p.Rules))
	for _, r := range p.Rules {
		if seen[r.Nr] {
			return fmt.Errorf("seccomp: syscall %d has two rules", r.Nr)
		}
		seen[r.Nr] = true
		if r.Nr&p.KillNrBits != 0 {
			return fmt.Errorf("seccomp: syscall %d is unreachable: it has KillNrBits %#x set", r.Nr, p.KillNrBits)
		}
		if !r.Action.valid() {
			return fmt.Errorf("seccomp: syscall %d: action %v is not supported", r.Nr, r.Action)
		}
		for _, c := range r.Checks {
			if err := c.validate(); err != nil {
				return fmt.Errorf("seccomp: syscall %d: %w", r.Nr, err)
			}
		}
	}
	return nil
}

func (c Check) validate() error {
	if err := (Cond{c.Arg, c.Op, c.Value}).validate(); err != nil {
		return err
	}
	if c.Also != nil {
		if err := c.Also.validate(); err != nil {
			return err
		}
	}
	if !c.Action.valid() {
		return fmt.Errorf("check on argument %d: action %v is not supported", c.Arg, c.Action)
	}
	return nil
}

func (c Cond) validate() error {
	if c.Arg < 0 || c.Arg > 5 {
		return fmt.Errorf("check on argument %d: syscalls have arguments 0 to 5", c.Arg)
	}
	switch c.Op {
	case Equal:
	case AnyBits:
		if c.Value == 0 {
			return fmt.Errorf("check on argument %d: AnyBits with no bits never matches", c.Arg)
		}
	default:
		return fmt.Errorf("check on argument %d: unknown op %d", c.Arg, c.Op)
	}
	return nil
}

func (c Cond) String() string {
	op := "=="
	if c.Op == AnyBits {
		op = "&"
	}
	return fmt.Sprintf("arg%d %s %#x", c.Arg, op, c.Value)
}

// String lists the policy one rule a line, for review and test failures.
func (p Policy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "arch %#x, kill nr bits %#x, default %v\n", p.Arch, p.KillNrBits, p.Default)
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "%d:", r.Nr)
		for _, c := range r.Checks {
			fmt.Fprintf(&b, " %v", Cond{c.Arg, c.Op, c.Value})
			if c.Also != nil {
				fmt.Fprintf(&b, " && %v", *c.Also)
			}
			fmt.Fprintf(&b, " -> %v;", c.Action)
		}
		fmt.Fprintf(&b, " %v\n", r.Action)
	}
	return b.String()
}
