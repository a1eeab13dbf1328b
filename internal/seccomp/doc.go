// Package seccomp holds the sandbox's system call policy, compiles it to a
// classic BPF program for seccomp, and installs it.
//
// # Use
//
// The parent side builds the filter once and sends it to the child as bytes;
// the child side installs it as its last step before exec:
//
//	parent                                   child (locked OS thread)
//	f, err := seccomp.Build(seccomp.Default())
//	spec.Seccomp = f.Marshal()  --- pipe -->  f, err := seccomp.Unmarshal(spec.Seccomp)
//	                                         ... mounts, pivot_root, rlimits, caps ...
//	                                         seccomp.Install(f)  // sets no_new_privs too
//	                                         execve(python)
//
// Install confines the calling thread only (no SECCOMP_FILTER_FLAG_TSYNC):
// the Go runtime's other threads stay free, and the filter reaches the job
// because the thread that installed it is the one that forks and execs it.
//
// Default supports linux/amd64 and linux/arm64. Elsewhere it returns an
// empty policy and Build returns ErrUnsupportedArch, so the sandbox refuses
// to start rather than run a job unfiltered.
//
// # Why an allow-list
//
// The policy lists what is allowed; everything else is refused. A deny-list
// fails open: every new
// kernel adds syscalls, and each new one would be reachable from the
// sandbox on the day the host kernel is upgraded, before anyone has read
// it. io_uring is the example to remember. With an allow-list a new
// syscall is refused until someone reviews it and adds it here. The cost is
// that a legitimate call can be missing; the tests run CPython with numpy,
// pandas, matplotlib, scipy, pytest, multiprocessing, subprocess and
// threading under the filter so that a gap shows up as a failing test
// rather than as a user's bug report.
//
// # What a refused call returns
//
// Each answer is chosen for what the program will do with it:
//
//   - ENOSYS, for every syscall without a rule: "this kernel does not have
//     it". That is the one answer libc and Python are written to survive,
//     because it is what older kernels say: glibc falls back from clone3 to
//     clone, from faccessat2 to faccessat, from close_range to a loop.
//     Returning EPERM here would turn those fallbacks into hard failures.
//     clone3 gets ENOSYS on purpose, not by omission: its flags live in
//     memory that seccomp cannot read, so it must never be allowed, and
//     ENOSYS sends glibc to clone, whose flags the filter does read.
//   - EPERM, for syscalls that were reviewed and refused: "you are not
//     allowed to". It is what an unprivileged process gets from most of
//     them anyway, and programs report it rather than retry another way.
//   - EOPNOTSUPP, for preadv2 with RWF_NOWAIT: what a kernel or file system
//     without the flag says; readers then read without it.
//   - EAFNOSUPPORT, for socket families outside AF_UNIX, AF_INET and
//     AF_INET6: what a kernel built without the family says. glibc's
//     getaddrinfo, for instance, then assumes IPv4 and IPv6 are both
//     configured instead of asking netlink.
//   - SECCOMP_RET_KILL_PROCESS, only for a call made through a foreign
//     ABI: an architecture other than the native one (i386 syscalls via
//     int 0x80 on x86_64), or an x32 number (bit 0x40000000) on x86_64.
//     The syscall numbers in the rules mean something else there, so no
//     rule can judge such a call, and no honest Python program makes one.
//     (A raw syscall(-1) also has the x32 bit set and is killed; nothing in
//     libc or Python makes that call.)
//   - SECCOMP_RET_USER_NOTIF, not a refusal and only in NotifyIP's variant
//     of Default: an IP socket waits until boxer, holding the filter's
//     listener, has noted it, then goes on as Default would let it.
//
// No refusal kills. A Python library that probes for a feature, as
// OpenBLAS does with mbind when numpy is imported, must see a failed call
// it can handle, not a dead process.
//
// # Arguments are compared on their low 32 bits
//
// The policy inspects these arguments: socket's and socketpair's domain
// and type, setsockopt's level and option name (together: IPv6's flow label
// manager is refused, see Default), ioctl's request, personality's
// persona, fadvise64's advice, preadv2's flags and clone's flags. All but
// the last are int or unsigned int in the kernel, and clone's flags are cut to their low 32 bits before use. seccomp, though, hands the filter all 64
// bits of each register. A filter that compared 64 bits would be bypassed
// by setting a high bit: ioctl(fd, 0x1_00005412) does not equal TIOCSTI,
// yet the kernel executes it as TIOCSTI. So every argument check loads only
// the low word, and Check has no 64-bit form. The tests try exactly those
// bypasses.
//
// # What is refused with EPERM
//
// Beyond the list the issue named, the review refused these:
//
//   - process_madvise and process_mrelease, which act on other processes
//     like ptrace, kcmp and pidfd_getfd;
//   - open_tree_attr and quotactl_fd (newer forms of refused mount and
//     quota calls), listns (namespace enumeration), fanotify_mark (useless
//     without fanotify_init);
//   - vmsplice (a history of page-reference bugs, no Python binding) and
//     memfd_secret (removes pages from the kernel's direct map; no user);
//   - set_mempolicy_home_node, with the rest of the NUMA calls;
//   - on x86_64, modify_ldt (segment tricks behind several kernel
//     exploits, needed only by 16-bit and Wine code) next to iopl and
//     ioperm.
//
// # Deliberately left without a rule (ENOSYS)
//
//   - calls the kernel has dropped or never implemented on x86_64: sysfs,
//     ustat, _sysctl, remap_file_pages, nfsservctl, create_module,
//     get_kernel_syms, query_module, getpmsg, putpmsg, afs_syscall,
//     tuxcall, security, vserver, epoll_ctl_old, epoll_wait_old, and the
//     i386 TLS calls set_thread_area and get_thread_area;
//   - new calls with an older equivalent that stays allowed, where
//     libraries fall back on ENOSYS: cachestat (mincore), statmount and
//     listmount (/proc/self/mountinfo), lsm_get_self_attr,
//     lsm_set_self_attr and lsm_list_modules (/proc/self/attr);
//   - uprobe and uretprobe, which only trampolines the kernel itself
//     inserts call, and rseq_slice_yield, too new to have a user;
//   - inotify_init, inotify_init1, inotify_add_watch and inotify_rm_watch:
//     a watch on the read-only binds sees every other run's and the host's
//     opens of those files, and every sandbox's instances and watches are
//     charged to host root's fs.inotify budget (128 instances by default),
//     which a few runs would spend for the whole host. ENOSYS is what a
//     kernel without CONFIG_INOTIFY_USER says, and watchers (tail -f,
//     watchdog) then poll;
//   - the POSIX message queue calls (mq_open and the rest): a queue's bytes
//     are counted per user up to host root, against the RLIMIT_MSGQUEUE
//     boxer started with (800 KiB by default) for every sandbox together,
//     so a dozen runs filling their own 64 KiB left the next run none, and
//     host root's own queues shrank every run's. Python has no binding in
//     its standard library; ENOSYS is a kernel without
//     CONFIG_POSIX_MQUEUE. SysV message queues stay: their limits are the
//     run's own IPC namespace's.
//
// # Answered without acting (success)
//
//   - fadvise64 with POSIX_FADV_DONTNEED or POSIX_FADV_NOREUSE: from any
//     reader they drop (or mark for reclaim) the page cache of a host file
//     that every run and the host share. Advice is only advice: the call
//     returns 0 and the pages stay. Every other advice is allowed.
//
// # What is allowed, with a note
//
// Files, descriptors, memory, threads (clone without namespace flags),
// futexes, events, signals, timers and clocks, sockets of the three
// families, SysV IPC and POSIX shared memory and semaphores (the sandbox
// has its own IPC namespace and /dev/shm), prctl, getrandom,
// memfd_create, rseq, pidfd_open. (Legacy AIO is left out: its contexts
// come from one host-wide pool, fs.aio-max-nr.) Also
// seccomp and the landlock calls: they only take rights away from the
// caller. ioctl is allowed except TIOCSTI and TIOCLINUX, which can type
// into a terminal; personality only for a query or PER_LINUX.
//
// # Cost
//
// The program checks the architecture, then binary-searches the syscall
// number over the sorted rules (about nine comparisons for the default
// policy), then runs the rule's argument checks. Since Linux 5.11 the
// kernel also caches, per syscall number, "always allowed" results of
// rules that read no argument, so most allowed calls skip the program.
package seccomp
