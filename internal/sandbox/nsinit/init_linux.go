//go:build linux

package nsinit

import (
	"encoding/json"
	"errors"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Init is the re-exec entry: when this process was started as a sandbox's
// pid 1 (argv[0] is Arg0) it becomes it and never returns; otherwise it
// returns at once. Every binary that runs sandboxes calls it from an init
// function of its main package (and its tests' packages from one of their
// test files), where a reader looks for what takes over a process, as
// runc's main does; a library's own init would do it unseen in every
// binary that links the package.
func Init() {
	if len(os.Args) == 0 || os.Args[0] != Arg0 {
		return
	}
	// Every per-thread attribute set below (no_new_privs, the capability
	// bounding set, seccomp, the cgroup namespace) must be on the thread
	// that forks the program.
	runtime.LockOSThread()
	Main()
}

// Main is pid 1 of a sandbox. It never returns.
//
// Preconditions: started by internal/sandbox with the descriptors listed in
// the package doc, as root of a fresh user namespace that owns fresh mount,
// PID, network, IPC and UTS namespaces, on a locked OS thread.
func Main() {
	// A run's umask is 022, whatever boxer was started with: the mount
	// points made below must be searchable by the program's uid, and the
	// program sees what it would see on a fresh login.
	unix.Umask(0o022)
	report := os.NewFile(FDReport, "report")
	dec := json.NewDecoder(os.NewFile(FDSpec, "spec"))

	var setup Setup
	if err := dec.Decode(&setup); err != nil {
		fail(report, &stepError{"read setup", err})
	}
	if err := buildRoot(&setup); err != nil {
		fail(report, err)
	}
	send(report, Report{Event: EventReady})

	var job Job
	if err := dec.Decode(&job); err != nil {
		// The parent closed the spec pipe without a job: the sandbox was
		// discarded unused (a pool shrinking, a cancelled request).
		os.Exit(0)
	}
	pid, err := start(&job)
	if err != nil {
		fail(report, err)
	}
	send(report, Report{Event: EventStarted})
	status, err := reap(pid)
	if err != nil {
		fail(report, err)
	}
	send(report, Report{Event: EventExited, WaitStatus: uint32(status)})
	// Exiting as pid 1 makes the kernel SIGKILL every process left in the
	// namespace (daemons, double forks) before our parent can reap us.
	os.Exit(0)
}

// stepError names the setup step that failed.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// wrap returns nil for a nil err, else err tagged with the step's name.
func wrap(step string, err error) error {
	if err == nil {
		return nil
	}
	return &stepError{step, err}
}

func send(w *os.File, r Report) {
	b, _ := json.Marshal(r)
	// A failed write means the parent is gone; Pdeathsig will end us.
	_, _ = w.Write(append(b, '\n'))
}

func fail(w *os.File, err error) {
	r := Report{Event: EventError, Msg: err.Error()}
	var se *stepError
	if errors.As(err, &se) {
		r.Step = se.step
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		r.Errno = int(errno)
	}
	send(w, r)
	os.Exit(1)
}
