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
// # What runs still share, and why
//
// Every run sees the host's interpreter and libraries through read-only
// binds: the same files, the same inodes, the same page cache. What they
// leave in common, by design:
//
//   - File locks. flock(LOCK_EX) works on a file opened read-only, so a
//     run can lock a bound host file and another run, or a host process
//     that locks the same file, sees it held. seccomp cannot tell a host
//     file from one in /work, and programs lock their own files; so locks
//     stay, and /proc/locks, which listed every lock on the host, is
//     masked. Runs on one host share CPUs and caches anyway, which carry a
//     timing channel between two runs that collude; and nothing boxer
//     binds is a file the host's own programs lock.
//   - The page cache. Whether a host file's pages are cached is shared:
//     mincore answers "resident" for every page of a file the run does not
//     own, preadv2's RWF_NOWAIT is refused and POSIX_FADV_DONTNEED does
//     nothing (seccomp's doc), so a run can neither ask nor evict; only the
//     time of a first read is left.
//   - Machine-wide figures in /proc and sysinfo(2): load averages, CPU and
//     memory totals, uptime, as in any container. Counters of processes
//     are a run's own: each run has its PID namespace, so ns_last_pid,
//     /proc/loadavg's last pid and getpriority(PRIO_USER) count only it.
//   - Kernel budgets counted per user up to host root, whose user
//     namespace made every sandbox's, against the limits boxer started
//     with. inotify and POSIX message queues, whose budgets a dozen runs
//     spent for all, are refused (seccomp's doc). Pending signals stay:
//     1024 per run (wantedRlimits), so a host's usual RLIMIT_SIGPENDING
//     (about 96,000 on a 24 GiB machine) holds some 90 runs at once at
//     their cap. Processes are bounded by each run's pids limit, and host
//     root is exempt from RLIMIT_NPROC.
//
// # Outcomes and errors
//
// Run returns a Result for everything the program did, including timeouts,
// OOM kills and signals. It returns an error only when boxer failed: a
// *SetupError names the child-side step and errno, a *boxer.Error is the
// caller's mistake (invalid limits or file paths) or "busy".
package sandbox
