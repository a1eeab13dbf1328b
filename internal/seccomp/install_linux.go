package seccomp

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets no_new_privs and loads f on the calling OS thread.
//
// Preconditions: the calling goroutine is locked to its OS thread
// (runtime.LockOSThread) and this thread is the one that will fork or exec
// the confined program. The filter is loaded without
// SECCOMP_FILTER_FLAG_TSYNC, so the process's other threads, the Go
// runtime's among them, stay unfiltered; only this thread and whatever it
// creates or execs afterwards are confined. Call it last, right before
// exec: from here on every call of this thread goes through f.
//
// Postcondition on success: no_new_privs is set and f is attached for good;
// neither can be undone. On failure the filter is not attached, but
// no_new_privs may already be set.
//
// Install makes two system calls and allocates nothing on success, so it is
// safe on the child side of the sandbox.
func Install(f Filter) error {
	if len(f) == 0 || len(f) > unix.BPF_MAXINSNS {
		return fmt.Errorf("seccomp: filter has %d instructions, want 1 to %d", len(f), unix.BPF_MAXINSNS)
	}
	// The kernel refuses an unprivileged filter without no_new_privs; we set
	// it even when privileged so that exec cannot regain privileges
	// (setuid binaries, file capabilities) while the filter holds.
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", e)
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	// Flags 0: this thread only (no TSYNC), and no SPEC_ALLOW, so the kernel
	// keeps its speculative-execution mitigations for the confined task.
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER)", e)
	}
	return nil
}
