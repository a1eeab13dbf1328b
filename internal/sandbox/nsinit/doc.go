// Package nsinit is the child side of a boxer sandbox: the code that runs as
// pid 1 of a fresh set of namespaces, builds the sandbox's root filesystem,
// and starts the untrusted program under its final restrictions.
//
// It is the most dangerous code in boxer and is kept small and alone: no
// goroutines of its own, no logger, no configuration of its own. Everything
// it does is dictated by the Setup and Job it reads from the parent, and
// every path ends in exit.
//
// # Entry
//
// The parent (internal/sandbox) starts /proc/self/exe with argv[0] set to
// Arg0. This package's init hook recognises it, locks the OS thread and runs
// Main, which never returns. Any binary that embeds the engine embeds this
// hook, because internal/sandbox imports this package for the spec types.
//
// # Protocol
//
// File descriptors, set up by the parent:
//
//	0, 1   /dev/null
//	2      the report pipe (so a Go panic in pid 1 reaches the parent's log,
//	       never the user's stderr)
//	3      spec pipe (parent -> child): a JSON Setup, later a JSON Job
//	4      report pipe (child -> parent): one JSON Report per line
//	5,6,7  the program's stdin, stdout and stderr
//
// The exchange:
//
//	parent                                   child (pid 1, userns root)
//	------                                   --------------------------
//	clone(NEWUSER|NEWNS|NEWPID|NEWNET|
//	      NEWIPC|NEWUTS), uid/gid maps
//	move child into the run's cgroup
//	Setup ------------------------------->   mounts, pivot_root, /proc, /dev,
//	                                         hostname, loopback up
//	          <---------------------------   {"event":"ready"}
//	   (a warm pool may wait here)
//	apply the job's cgroup limits
//	Job --------------------------------->   unshare(NEWCGROUP), rlimits,
//	                                         drop bounding caps, no_new_privs,
//	                                         seccomp, fork+exec as uid 1000
//	          <---------------------------   {"event":"started"}
//	                                         reap every child until the
//	                                         program exits
//	          <---------------------------   {"event":"exited","wait_status":N}
//	                                         exit: the kernel kills what is
//	                                         left of the PID namespace
//	wait4(pid 1)
//
// A failure is reported as {"event":"error","step":"pivot_root","errno":1,...}
// and pid 1 exits non-zero. Killing pid 1 (timeout, cancel) kills the whole
// PID namespace; the parent learns the rest from the cgroup.
package nsinit
