//go:build amd64 || arm64

package seccomp

import "golang.org/x/sys/unix"

// NotifyIP returns p with every socket and socketpair call that p allows for
// AF_INET or AF_INET6 turned into UserNotif: the call waits until the
// holder of the filter's listener lets it go on (or refuses it). What the
// other families and types get is unchanged.
//
// A warm pool's zygote installs a job's filter this way when boxer may keep
// the job's network namespace for the next job (internal/sandbox's
// heldNet): everything a job can leave in a network namespace that a file
// of /proc/net does not show comes from an IP socket, so boxer, told of
// each one before it exists, passes on only a namespace in which none was
// made. The domain and type are registers, not memory, so the answer
// cannot be raced: the call the listener saw is the call the kernel runs.
//
// Filters stack, and a filter the job stacks on top of this one cannot let
// such a call past it: the kernel takes the strictest answer of all the
// filters (an allow of its own loses to UserNotif), and a user
// notification from its filter, which has no listener (there can be only
// one in a stack), fails the call with ENOSYS.
func NotifyIP(p Policy) Policy {
	rules := make([]Rule, len(p.Rules))
	for i, r := range p.Rules {
		if r.Nr == unix.SYS_SOCKET || r.Nr == unix.SYS_SOCKETPAIR {
			r.Checks = notifyIP(r.Checks)
		}
		rules[i] = r
	}
	p.Rules = rules
	return p
}

func notifyIP(checks []Check) []Check {
	out := make([]Check, len(checks))
	for i, c := range checks {
		if c.Arg == 0 && c.Op == Equal && (c.Value == unix.AF_INET || c.Value == unix.AF_INET6) && c.Action == Allow {
			c.Action = UserNotif
		}
		out[i] = c
	}
	return out
}
