//go:build amd64 || arm64

package seccomp

import "golang.org/x/sys/unix"

// Default returns the sandbox's policy for this machine's architecture: the
// allow-list described in doc.go. Each call returns a fresh Policy that the
// caller may extend before Build.
func Default() Policy {
	p := Policy{
		Arch:       nativeArch,
		KillNrBits: killNrBits,
		Default:    Errno(unix.ENOSYS),
	}
	add := func(a Action, nrs []uint32) {
		for _, nr := range nrs {
			p.Rules = append(p.Rules, Rule{Nr: nr, Action: a})
		}
	}
	add(Allow, allowed())
	add(Allow, archAllowed())
	add(Errno(unix.EPERM), refused())
	add(Errno(unix.EPERM), archRefused())
	p.Rules = append(p.Rules, argRules()...)
	return p
}

// nsFlags are clone's namespace flags. CLONE_NEWTIME (0x80) lies inside
// CSIGNAL, the exit-signal byte of clone's flags, so clone reads it as part
// of the exit signal and only clone3 and unshare (both refused) can ask for
// a time namespace; no valid signal has bit 0x80 set either, so listing it
// costs nothing and leaves no namespace flag out.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// IPV6_FLOWLABEL_MGR, from <linux/in6.h>; x/sys/unix does not define it.
const ipv6FlowlabelMgr = 32

// From <linux/personality.h>; x/sys/unix does not define them.
const (
	perLinux         = 0x0000     // PER_LINUX
	personalityQuery = 0xffffffff // persona 0xffffffff reads without setting
)

// argRules are the syscalls decided by their arguments. All compare the low
// 32 bits only; see Check for why.
func argRules() []Rule {
	eperm := Errno(unix.EPERM)
	families := []Check{
		{Arg: 0, Op: Equal, Value: unix.AF_UNIX, Action: Allow},
		// No datagram-type sockets outside AF_UNIX. UDP reaches nothing
		// but the sandbox's own loopback, and cgroup v1 does not charge
		// UDP buffers to the run's memory: a run could pin gigabytes of
		// kernel memory in unread datagrams. SOCK_DGRAM is 2; bit 2 also
		// catches SOCK_RAW (3) and SOCK_PACKET (10), never SOCK_STREAM (1)
		// or SOCK_SEQPACKET (5). The type's flags live in higher bits.
		{Arg: 1, Op: AnyBits, Value: unix.SOCK_DGRAM, Action: eperm},
		{Arg: 0, Op: Equal, Value: unix.AF_INET, Action: Allow},
		{Arg: 0, Op: Equal, Value: unix.AF_INET6, Action: Allow},
	}
	return []Rule{
		// Threads and fork, but never a new namespace: those are the
		// sandbox's own walls, and a user namespace would hand the program
		// a full capability set over it. The flags are argument 0 on both
		// x86_64 and arm64 (only s390 swaps them with the stack).
		// CLONE_PARENT too: it makes the new process a child of the
		// caller's parent, which in a warm pool is the zygote, so a job
		// could leave zombies that outlive it and pin its slot's pids.
		{Nr: unix.SYS_CLONE, Checks: []Check{{Arg: 0, Op: AnyBits, Value: nsFlags | unix.CLONE_PARENT, Action: eperm}}, Action: Allow},
		// clone3 passes its flags in memory, which seccomp cannot read.
		// ENOSYS makes glibc (pthread_create, posix_spawn) and Python fall
		// back to clone, whose flags the rule above does read.
		{Nr: unix.SYS_CLONE3, Action: Errno(unix.ENOSYS)},
		// Socket families are an allow-list too. EAFNOSUPPORT is what a
		// kernel without the family says, and what glibc and Python handle
		// (glibc's getaddrinfo, for one, then does without netlink).
		{Nr: unix.SYS_SOCKET, Checks: families, Action: Errno(unix.EAFNOSUPPORT)},
		{Nr: unix.SYS_SOCKETPAIR, Checks: families, Action: Errno(unix.EAFNOSUPPORT)},
		// IPv6 flow label management: an exclusive label lingers after
		// its socket, and sets a flag in the network namespace that is
		// never cleared and changes how a later connect with a flow label
		// is refused. A warm slot's network namespace serves its next job
		// when its last left it untouched (internal/sandbox's heldNet):
		// nothing a job does may leave state that no file of /proc/net
		// shows. Sending with a label the kernel chose is unaffected.
		{Nr: unix.SYS_SETSOCKOPT, Checks: []Check{{Arg: 1, Op: Equal, Value: unix.IPPROTO_IPV6,
			Also: &Cond{Arg: 2, Op: Equal, Value: ipv6FlowlabelMgr}, Action: eperm}}, Action: Allow},
		// TIOCSTI pushes bytes into a terminal's input queue, typing
		// commands into whatever shell reads it; TIOCLINUX can do the same
		// through the console's selection. Every other ioctl is allowed:
		// the devices reachable from the sandbox decide what they accept.
		{Nr: unix.SYS_IOCTL, Checks: []Check{
			{Arg: 1, Op: Equal, Value: unix.TIOCSTI, Action: eperm},
			{Arg: 1, Op: Equal, Value: unix.TIOCLINUX, Action: eperm},
		}, Action: Allow},
		// Dropping a file's pages from the page cache is the host's
		// business: the read-only binds are the host's own files, and
		// POSIX_FADV_DONTNEED from any reader evicts them host-wide (and
		// NOREUSE, from 6.3, marks them for early reclaim). Advice may be
		// ignored, so both succeed and do nothing; the rest is allowed.
		// The advice is argument 3 on x86_64 and arm64 alike.
		{Nr: unix.SYS_FADVISE64, Checks: []Check{
			{Arg: 3, Op: Equal, Value: unix.FADV_DONTNEED, Action: Errno(0)},
			{Arg: 3, Op: Equal, Value: unix.FADV_NOREUSE, Action: Errno(0)},
		}, Action: Allow},
		// A read with RWF_NOWAIT fails where the data is not in the page
		// cache: on a host file that every run shares, that tells whether
		// another run (or the host) read it lately, the side channel
		// mincore was made to close. EOPNOTSUPP is what a kernel or file
		// system without the flag says. The flags are argument 5 on
		// x86_64 and arm64 alike.
		{Nr: unix.SYS_PREADV2, Checks: []Check{{Arg: 5, Op: AnyBits, Value: unix.RWF_NOWAIT, Action: Errno(unix.EOPNOTSUPP)}}, Action: Allow},
		// Querying (0xffffffff) and asking for plain PER_LINUX are fine;
		// other personalities turn off address-space randomisation
		// (ADDR_NO_RANDOMIZE) or bring back old ABI quirks.
		{Nr: unix.SYS_PERSONALITY, Checks: []Check{
			{Arg: 0, Op: Equal, Value: personalityQuery, Action: Allow},
			{Arg: 0, Op: Equal, Value: perLinux, Action: Allow},
		}, Action: eperm},
	}
}

// allowed are the syscalls, present on every supported architecture, that a
// CPython program with the scientific stack makes or plausibly makes.
func allowed() []uint32 {
	return []uint32{
		// Files and descriptors.
		unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV,
		unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_PREADV, unix.SYS_PWRITEV,
		unix.SYS_PWRITEV2, unix.SYS_LSEEK,
		unix.SYS_OPENAT, unix.SYS_OPENAT2, unix.SYS_CLOSE, unix.SYS_CLOSE_RANGE,
		unix.SYS_DUP, unix.SYS_DUP3, unix.SYS_FCNTL, unix.SYS_FLOCK, unix.SYS_PIPE2,
		unix.SYS_FSYNC, unix.SYS_FDATASYNC, unix.SYS_SYNC, unix.SYS_SYNCFS,
		unix.SYS_SYNC_FILE_RANGE, unix.SYS_TRUNCATE, unix.SYS_FTRUNCATE,
		unix.SYS_FALLOCATE, unix.SYS_READAHEAD,
		unix.SYS_SENDFILE, unix.SYS_SPLICE, unix.SYS_TEE, unix.SYS_COPY_FILE_RANGE,
		unix.SYS_MEMFD_CREATE,
		unix.SYS_FSTAT, unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_STATFS, unix.SYS_FSTATFS,
		unix.SYS_GETDENTS64, unix.SYS_GETCWD, unix.SYS_CHDIR, unix.SYS_FCHDIR,
		unix.SYS_MKDIRAT, unix.SYS_MKNODAT, unix.SYS_UNLINKAT, unix.SYS_RENAMEAT,
		unix.SYS_RENAMEAT2, unix.SYS_LINKAT, unix.SYS_SYMLINKAT, unix.SYS_READLINKAT,
		unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
		unix.SYS_FCHOWN, unix.SYS_FCHOWNAT, unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2,
		unix.SYS_UMASK, unix.SYS_UTIMENSAT,
		unix.SYS_FILE_GETATTR, unix.SYS_FILE_SETATTR,
		unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
		unix.SYS_GETXATTR, unix.SYS_LGETXATTR, unix.SYS_FGETXATTR, unix.SYS_GETXATTRAT,
		unix.SYS_LISTXATTR, unix.SYS_LLISTXATTR, unix.SYS_FLISTXATTR, unix.SYS_LISTXATTRAT,
		unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,

		// Waiting for events.
		unix.SYS_PPOLL, unix.SYS_PSELECT6,
		unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
		unix.SYS_EVENTFD2, unix.SYS_SIGNALFD4,
		unix.SYS_TIMERFD_CREATE, unix.SYS_TIMERFD_SETTIME, unix.SYS_TIMERFD_GETTIME,

		// Memory. mlock is bounded by RLIMIT_MEMLOCK; mseal and
		// map_shadow_stack are newer glibc hardening.
		unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MPROTECT, unix.SYS_MREMAP, unix.SYS_BRK,
		unix.SYS_MSYNC, unix.SYS_MINCORE, unix.SYS_MADVISE,
		unix.SYS_MLOCK, unix.SYS_MLOCK2, unix.SYS_MUNLOCK, unix.SYS_MLOCKALL, unix.SYS_MUNLOCKALL,
		unix.SYS_PKEY_MPROTECT, unix.SYS_PKEY_ALLOC, unix.SYS_PKEY_FREE,
		unix.SYS_MSEAL, unix.SYS_MAP_SHADOW_STACK, unix.SYS_MEMBARRIER,

		// Processes and threads (clone is in argRules). The sandbox's PID
		// namespace bounds whom kill and the pidfd calls can reach.
		unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_EXIT, unix.SYS_EXIT_GROUP,
		unix.SYS_WAIT4, unix.SYS_WAITID, unix.SYS_RESTART_SYSCALL,
		unix.SYS_SET_TID_ADDRESS, unix.SYS_SET_ROBUST_LIST, unix.SYS_GET_ROBUST_LIST, unix.SYS_RSEQ,
		unix.SYS_FUTEX, unix.SYS_FUTEX_WAITV, unix.SYS_FUTEX_WAKE, unix.SYS_FUTEX_WAIT, unix.SYS_FUTEX_REQUEUE,
		unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY, unix.SYS_SCHED_SETAFFINITY,
		unix.SYS_SCHED_GETPARAM, unix.SYS_SCHED_SETPARAM,
		unix.SYS_SCHED_GETSCHEDULER, unix.SYS_SCHED_SETSCHEDULER,
		unix.SYS_SCHED_GET_PRIORITY_MAX, unix.SYS_SCHED_GET_PRIORITY_MIN,
		unix.SYS_SCHED_RR_GET_INTERVAL, unix.SYS_SCHED_GETATTR, unix.SYS_SCHED_SETATTR,
		unix.SYS_GETPRIORITY, unix.SYS_SETPRIORITY, unix.SYS_IOPRIO_GET, unix.SYS_IOPRIO_SET,
		unix.SYS_GETCPU, unix.SYS_PRCTL,
		unix.SYS_KILL, unix.SYS_TKILL, unix.SYS_TGKILL,
		unix.SYS_PIDFD_OPEN, unix.SYS_PIDFD_SEND_SIGNAL,

		// Identity. Capabilities are dropped, so the set* calls can only
		// move within what the program already has.
		unix.SYS_GETPID, unix.SYS_GETPPID, unix.SYS_GETTID,
		unix.SYS_GETUID, unix.SYS_GETEUID, unix.SYS_GETGID, unix.SYS_GETEGID,
		unix.SYS_GETRESUID, unix.SYS_GETRESGID, unix.SYS_GETGROUPS,
		unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID,
		unix.SYS_SETRESUID, unix.SYS_SETRESGID, unix.SYS_SETFSUID, unix.SYS_SETFSGID,
		unix.SYS_SETGROUPS, unix.SYS_GETPGID, unix.SYS_SETPGID, unix.SYS_GETSID, unix.SYS_SETSID,
		unix.SYS_CAPGET, unix.SYS_CAPSET,

		// Signals.
		unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN,
		unix.SYS_RT_SIGPENDING, unix.SYS_RT_SIGTIMEDWAIT, unix.SYS_RT_SIGSUSPEND,
		unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_SIGALTSTACK,

		// Time: reading clocks, sleeping, timers. Setting clocks is refused.
		unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_GETRES, unix.SYS_CLOCK_NANOSLEEP,
		unix.SYS_NANOSLEEP, unix.SYS_GETTIMEOFDAY, unix.SYS_TIMES,
		unix.SYS_GETITIMER, unix.SYS_SETITIMER,
		unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_GETTIME,
		unix.SYS_TIMER_GETOVERRUN, unix.SYS_TIMER_DELETE,

		// Limits and system information. Without CAP_SYS_RESOURCE a limit
		// can only be lowered.
		unix.SYS_GETRLIMIT, unix.SYS_SETRLIMIT, unix.SYS_PRLIMIT64, unix.SYS_GETRUSAGE,
		unix.SYS_UNAME, unix.SYS_SYSINFO, unix.SYS_GETRANDOM,

		// Sockets of the allowed families (socket and socketpair are in
		// argRules; every other call needs a socket they created).
		unix.SYS_BIND, unix.SYS_LISTEN, unix.SYS_ACCEPT, unix.SYS_ACCEPT4, unix.SYS_CONNECT,
		unix.SYS_SHUTDOWN, unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME,
		unix.SYS_GETSOCKOPT,
		unix.SYS_SENDTO, unix.SYS_RECVFROM, unix.SYS_SENDMSG, unix.SYS_RECVMSG,
		unix.SYS_SENDMMSG, unix.SYS_RECVMMSG,

		// SysV and POSIX IPC: the sandbox has its own IPC namespace, and
		// multiprocessing's locks and shared memory need them.
		unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMDT, unix.SYS_SHMCTL,
		unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMTIMEDOP, unix.SYS_SEMCTL,
		unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,

		// Legacy asynchronous I/O (io_setup and friends) is left out: its
		// contexts come from one host-wide pool (fs.aio-max-nr) that a
		// single run could empty for every process on the host. Without
		// it, libaio users get ENOSYS and fall back to plain I/O.

		// Confining oneself further only takes rights away; a program may
		// want to sandbox a part of itself.
		unix.SYS_SECCOMP, unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE,
		unix.SYS_LANDLOCK_RESTRICT_SELF,
	}
}

// refused are the syscalls, present on every supported architecture, that
// fail with EPERM: reviewed, unneeded by a Python program, and either
// dangerous or outside what a sandboxed job may touch. doc.go groups them.
func refused() []uint32 {
	return []uint32{
		// Reaching into other processes.
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_KCMP, unix.SYS_PIDFD_GETFD, unix.SYS_PROCESS_MADVISE, unix.SYS_PROCESS_MRELEASE,

		// Mounts and namespaces: the walls of the sandbox.
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
		unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
		unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_MOUNT_SETATTR,
		unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_LISTNS,
		unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
		unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,

		// Large kernel surface with a history of exploits and no use in a
		// Python job.
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_FANOTIFY_INIT, unix.SYS_FANOTIFY_MARK,
		unix.SYS_VMSPLICE, unix.SYS_MEMFD_SECRET,

		// The machine itself: modules, kexec, reboot, swap, logs, time,
		// names.
		unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
		unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_SYSLOG,
		unix.SYS_VHANGUP, unix.SYS_LOOKUP_DCOOKIE,
		unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
		unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME,

		// NUMA placement: EPERM, not a kill, because OpenBLAS calls mbind
		// when numpy is imported and carries on when it fails.
		unix.SYS_MBIND, unix.SYS_SET_MEMPOLICY, unix.SYS_GET_MEMPOLICY,
		unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES, unix.SYS_SET_MEMPOLICY_HOME_NODE,
	}
}
