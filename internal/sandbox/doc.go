// Package sandbox is the parent side of boxer's isolation: it prepares a
// sandbox, hands it one job, enforces the wall-clock limit, collects the
// outcome and artifacts, and destroys every trace of it.
//
// The child side, pid 1 of the sandbox, lives alone in package nsinit; the
// exchange between the two is drawn in nsinit's package doc. A warm pool's
// zygote and its children (Zygote, Warm) are the same on this side; their
// child side, zygote.py, and its protocol live in package warm, the
// protocol in one file, warm/protocol.go.
//
// # Lifecycle of one run
//
//	prepare  allocate host ids, mount the work dir's tmpfs (host side), create
//	         the cgroup, clone pid 1 into new namespaces, send the Setup,
//	         wait for "ready"
//	run      apply the job's cgroup limits, write its files, send the Job,
//	         wait for "started", then for the exit, the time limit or the
//	         caller's cancel (the last two SIGKILL pid 1, which ends the
//	         whole PID namespace)
//	collect  read the cgroup's counters (CPU, peak memory, OOM kills), read
//	         artifacts beneath the work dir with every process dead
//	destroy  remove the cgroup, unmount the work dir, delete the directory,
//	         free the ids
//
// prepare is separate from run so that a pool can prepare sandboxes before
// any job exists; per-job limits are applied at hand-over.
//
// # Why the work dir is mounted on the host side
//
// Input files are written before the program exists and artifacts read
// after it is gone, both through a host path; the sandbox sees the same
// tmpfs through a bind mount. Its pages are charged to the memory cgroup of
// the process that writes them, so a program's files count against its
// memory limit.
//
// # Resource limits
//
// A program's rlimits (open files, file size, processes, stack, ...) can
// be no higher than the hard limits boxer itself inherited: in the
// sandbox's user namespace raising one is EPERM. New reads them once;
// boxer's own choices (the zygote's open files, stack, locked memory,
// message queues, pending signals) are cut to them quietly, while default
// limits above them stop New with the fix, and a job asking for more is
// an invalid_request (see hostRlimits.allow for why it is not cut).
//
// # Outcomes and errors
//
// Run returns a Result for everything the program did, including timeouts,
// OOM kills and signals. It returns an error only when boxer failed: a
// *SetupError names the child-side step and errno, a *boxer.Error is the
// caller's mistake (invalid limits or file paths) or "busy".
package sandbox
