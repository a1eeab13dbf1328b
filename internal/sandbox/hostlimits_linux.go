package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"boxer"
	"boxer/internal/sandbox/nsinit"

	"golang.org/x/sys/unix"
)

// rlimInfinity is RLIM_INFINITY: no limit.
const rlimInfinity = ^uint64(0)

// hostRlimits are the hard resource limits boxer itself runs under, by
// resource, read once when the engine is made. No sandbox can have more:
// its pid 1 inherits them, and raising a hard limit takes CAP_SYS_RESOURCE
// in the host's user namespace, which no sandbox has (in its own, setrlimit
// answers EPERM). Nor can boxer count on more than the kernel's defaults: a
// container, an init script or a minimal host without systemd leaves it
// the default hard RLIMIT_NOFILE of 4096, and root in a container often
// lacks CAP_SYS_RESOURCE to raise it. (The Go runtime raises its own soft
// RLIMIT_NOFILE to the hard one at start; the hard one is what counts.)
// A resource missing from the map is unlimited.
type hostRlimits map[int]uint64

// readHostRlimits reads boxer's hard limit of every resource a sandbox
// sets.
func readHostRlimits() (hostRlimits, error) {
	h := hostRlimits{}
	for _, r := range wantedRlimits(boxer.Limits{}) {
		var rl unix.Rlimit
		if err := unix.Getrlimit(r.Resource, &rl); err != nil {
			return nil, fmt.Errorf("getrlimit %s: %w", rlimitName(r.Resource), err)
		}
		h[r.Resource] = rl.Max
	}
	return h, nil
}

// hard is the host's hard limit of res.
func (h hostRlimits) hard(res int) uint64 {
	if v, ok := h[res]; ok {
		return v
	}
	return rlimInfinity
}

// clamp returns want with every limit cut to the host's hard limit, soft
// to hard: what a sandbox may set. An unlimited host limit cuts nothing.
// It is for boxer's own choices (see allow for the job's).
func (h hostRlimits) clamp(want []nsinit.Rlimit) []nsinit.Rlimit {
	out := make([]nsinit.Rlimit, len(want))
	for i, r := range want {
		r.Max = min(r.Max, h.hard(r.Resource))
		r.Cur = min(r.Cur, r.Max)
		out[i] = r
	}
	return out
}

// rlimitOf is the limit of res in rl; unlimited if rl has none.
func rlimitOf(rl []nsinit.Rlimit, res int) nsinit.Rlimit {
	for _, r := range rl {
		if r.Resource == res {
			return r
		}
	}
	return nsinit.Rlimit{Resource: res, Cur: rlimInfinity, Max: rlimInfinity}
}

// asked is a job's limit that becomes an rlimit of its program.
type asked struct {
	name string // as the Limits field is known: "open files"
	unit string // of the value, in messages
	res  int
	v    uint64
}

// askedRlimits are the limits of l the program gets as rlimits (see
// wantedRlimits). Precondition: l passed ValidateLimits.
func askedRlimits(l boxer.Limits) []asked {
	return []asked{
		{"open files", "", unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{"file size", " bytes", unix.RLIMIT_FSIZE, uint64(l.FileSizeBytes)},
		{"pids", "", unix.RLIMIT_NPROC, uint64(l.Pids)},
	}
}

// over reports the limits of l above the host's hard limits.
func (h hostRlimits) over(l boxer.Limits) []asked {
	var out []asked
	for _, a := range askedRlimits(l) {
		if a.v > h.hard(a.res) {
			out = append(out, a)
		}
	}
	return out
}

// allow refuses a job whose limits ask for more than the host's hard
// limits, as an invalid_request naming each limit and the most this host
// allows. Refused, not clamped: a limit the caller set says what the
// program may do (open that many files, write a file that big, start that
// many processes); cut quietly, it would fail later with EMFILE, EFBIG or
// EAGAIN, far from the cause, in a result that looks like the program's
// fault. boxer refuses the other limits it cannot give the same way
// (ValidateLimits), and New refuses default limits the host cannot give,
// so only a job that explicitly asks for more is refused. boxer's own
// choices (stack, locked memory, ...) are clamped instead: no caller asked
// for them.
func (h hostRlimits) allow(l boxer.Limits) error {
	var msgs []string
	for _, a := range h.over(l) {
		msgs = append(msgs, fmt.Sprintf("%s %d%s: this host allows at most %d (its hard %s)", a.name, a.v, a.unit, h.hard(a.res), upperName(a.res)))
	}
	if len(msgs) > 0 {
		return boxer.Errorf(boxer.ECodeInvalidRequest, "%s", strings.Join(msgs, "; "))
	}
	return nil
}

// fit reports, for the operator, default limits the host cannot give,
// with the fix.
func (h hostRlimits) fit(l boxer.Limits) error {
	var errs []error
	for _, a := range h.over(l) {
		errs = append(errs, fmt.Errorf("%s %d%s: boxer's hard %s is %d; raise it (%s) or lower the default %s",
			a.name, a.v, a.unit, upperName(a.res), h.hard(a.res), raiseHint(a.res), a.name))
	}
	return errors.Join(errs...)
}

// raiseHint says how to raise boxer's hard limit of res where it is
// usually started. Raising a hard limit takes root with CAP_SYS_RESOURCE.
func raiseHint(res int) string {
	switch res {
	case unix.RLIMIT_NOFILE:
		return "systemd: LimitNOFILE=N; docker: --ulimit nofile=N:N; shell: ulimit -Hn N, as root"
	case unix.RLIMIT_NPROC:
		return "systemd: LimitNPROC=N; docker: --ulimit nproc=N:N; shell: ulimit -Hu N, as root"
	case unix.RLIMIT_FSIZE:
		return "systemd: LimitFSIZE=infinity; docker: --ulimit fsize=-1:-1; shell: ulimit -Hf unlimited, as root"
	}
	return "setrlimit, as root"
}

// rlimitName is res as prlimit(1) and the doctor name it: "nofile".
func rlimitName(res int) string {
	switch res {
	case unix.RLIMIT_CORE:
		return "core"
	case unix.RLIMIT_NOFILE:
		return "nofile"
	case unix.RLIMIT_FSIZE:
		return "fsize"
	case unix.RLIMIT_NPROC:
		return "nproc"
	case unix.RLIMIT_RTPRIO:
		return "rtprio"
	case unix.RLIMIT_MEMLOCK:
		return "memlock"
	case unix.RLIMIT_MSGQUEUE:
		return "msgqueue"
	case unix.RLIMIT_STACK:
		return "stack"
	case unix.RLIMIT_SIGPENDING:
		return "sigpending"
	}
	return fmt.Sprintf("rlimit %d", res)
}

// upperName is res as the kernel names it: "RLIMIT_NOFILE".
func upperName(res int) string { return "RLIMIT_" + strings.ToUpper(rlimitName(res)) }

// rlimitValue formats one limit of res: sizes with a unit.
func rlimitValue(res int, v uint64) string {
	size := res == unix.RLIMIT_FSIZE || res == unix.RLIMIT_STACK || res == unix.RLIMIT_MEMLOCK || res == unix.RLIMIT_MSGQUEUE
	switch {
	case v == rlimInfinity:
		return "unlimited"
	case !size || v == 0:
		return fmt.Sprint(v)
	case v%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", v>>20)
	case v%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", v>>10)
	}
	return fmt.Sprintf("%dB", v)
}

// describe is one line of what a sandbox gets: each limit of got (soft ==
// hard for all but the zygote's), the host's hard limit beside those a job
// may ask for, and "clamped" where boxer wanted more than the host has.
func (h hostRlimits) describe(want, got []nsinit.Rlimit) string {
	jobs := map[int]bool{}
	for _, a := range askedRlimits(boxer.Limits{}) {
		jobs[a.res] = true
	}
	parts := make([]string, len(got))
	for i, g := range got {
		s := rlimitName(g.Resource) + " " + rlimitValue(g.Resource, g.Cur)
		if g.Max != g.Cur {
			s += "/" + rlimitValue(g.Resource, g.Max)
		}
		switch {
		case want[i].Max > g.Max:
			s += " (clamped to hard)"
		case jobs[g.Resource]:
			s += " (hard " + rlimitValue(g.Resource, h.hard(g.Resource)) + ")"
		}
		parts[i] = s
	}
	return strings.Join(parts, ", ")
}
