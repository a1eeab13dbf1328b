//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"boxer/internal/seccomp"

	"golang.org/x/sys/unix"
)

// start applies the job's restrictions to this thread and forks the
// program. Seccomp goes last: after it only the fork and exec remain.
//
// Precondition: the sandbox is built (buildRoot) and the parent has moved
// us into the run's cgroup with the job's limits applied.
func start(job *Job) (int, error) {
	// A cgroup namespace rooted at the run's own cgroup: /proc/self/cgroup
	// shows "/" rather than where boxer keeps its runs.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return 0, wrap("unshare cgroup namespace", err)
	}
	for _, rl := range job.Rlimits {
		// syscall.Setrlimit, not unix: the Go runtime restores its saved
		// RLIMIT_NOFILE in forked children unless told through this call.
		if err := syscall.Setrlimit(rl.Resource, &syscall.Rlimit{Cur: rl.Cur, Max: rl.Max}); err != nil {
			return 0, wrap(fmt.Sprintf("setrlimit %d", rl.Resource), err)
		}
	}
	if err := unix.Chdir(job.Dir); err != nil {
		return 0, wrap("chdir "+job.Dir, err)
	}
	if !job.KeepCaps {
		if err := dropBoundingSet(); err != nil {
			return 0, err
		}
	}
	// Only the program's three streams cross the exec; the spec and report
	// pipes and anything the Go runtime opened stay with pid 1.
	if err := unix.CloseRange(FDSpec, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 0, wrap("close_range", err)
	}
	if len(job.Seccomp) > 0 {
		f, err := seccomp.Unmarshal(job.Seccomp)
		if err != nil {
			return 0, wrap("decode seccomp filter", err)
		}
		if err := seccomp.Install(f); err != nil {
			return 0, wrap("install seccomp filter", err)
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, wrap("no_new_privs", err)
	}
	files := []uintptr{FDStdin, FDStdout, FDStderr}
	if job.PassExtraFD {
		files = append(files, FDExtra)
	}
	attr := &syscall.ProcAttr{
		Env:   job.Env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			// Leaving uid 0 clears every capability; the supplementary
			// groups were emptied when pid 1 started.
			Credential: &syscall.Credential{Uid: uint32(job.UID), Gid: uint32(job.GID), NoSetGroups: true},
			Setsid:     true,
		},
	}
	pid, err := syscall.ForkExec(job.Path, job.Argv, attr)
	if err != nil {
		// The command does not exist or cannot run: the caller's mistake,
		// told the way a shell tells it, on the program's stderr.
		return startFailed(job, err)
	}
	return pid, nil
}

// startFailed reports an exec failure as the program's own outcome: a line
// on its stderr and exit status 127 (not found) or 126 (not runnable).
func startFailed(job *Job, err error) (int, error) {
	code := 126
	if errors.Is(err, syscall.ENOENT) {
		code = 127
	}
	msg := fmt.Sprintf("boxer: cannot run %q: %v\n", job.Argv[0], err)
	_, _ = os.NewFile(FDStderr, "stderr").WriteString(msg)
	return -code, nil
}

// dropBoundingSet empties the capability bounding set, so nothing the
// program executes can gain a capability back.
func dropBoundingSet() error {
	for c := 0; ; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			return nil // past the last capability this kernel knows
		}
		if err != nil {
			return wrap(fmt.Sprintf("drop capability %d", c), err)
		}
	}
}

// reap waits for the program, reaping every orphan that pid 1 inherits on
// the way, and returns the program's wait status. A negative pid is an exec
// failure from start: its status is the encoded exit code.
func reap(pid int) (unix.WaitStatus, error) {
	if pid < 0 {
		return unix.WaitStatus(-pid << 8), nil
	}
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, wrap("wait4", err)
		}
		if got == pid {
			return ws, nil
		}
	}
}
