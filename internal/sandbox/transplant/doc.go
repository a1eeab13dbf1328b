// Package transplant copies the user-space state of one stopped process
// into another: its memory, its mappings, the registers of its one thread,
// its signal dispositions and mask, its timers, its working directory and
// umask, and its open files (reopened by path). boxer forks a session with
// it: the fork is a fresh session kernel, isolated as any other, that
// takes on its parent's state.
//
// # Why not fork(2)
//
// A session's interpreter could fork itself, and the child would share
// every page copy-on-write. But the child would then live in its parent's
// namespaces and under its uid; giving it namespaces of its own takes a
// new user namespace, and the kernel gives every process whose uid created
// a user namespace every capability in it. The parent, which goes on
// running caller code, would hold CAP_KILL and CAP_SYS_PTRACE over its
// fork: not the isolation two sessions have. A transplant needs nothing
// of the parent's: the fork is a warm child of the same zygote, made like
// every other, and only bytes and settings cross over, read by boxer.
//
// # How
//
// Both processes are children of one zygote, so they start from one
// address space: the same binary, libraries, heap and stack at the same
// addresses, sharing every page neither has written since the fork. Copy
// ptrace-seizes both, stopped in a system call (an idle kernel waits in
// recvmsg). It reads the source's state, partly through /proc and partly
// by making the source run a few read-only system calls (rt_sigaction,
// sigaltstack, getitimer, brk with no change). It makes the destination's
// mappings match the source's: mappings the source lacks are unmapped,
// the program break is set, file mappings are mapped again from the same
// paths (in the destination's own view: a session's files have been
// copied to its work dir by then) and anonymous ones made. Each page the
// source holds that the destination does not already share (the two
// pagemaps' frame numbers differ) is copied through /proc/PID/mem; a page
// the destination holds and the source does not is dropped
// (MADV_DONTNEED). Open descriptors are opened again by path with the
// same flags and offset, or become /dev/null (pipes, sockets, anything
// without a path); the destination's own socket to boxer, fd 3, stays.
// Last, the destination gets the source's registers and extended (FPU,
// vector) state, set to restart the system call the source was waiting
// in, and both are let go.
//
// The system calls the destination is made to run are ordinary ones its
// seccomp filter allows; nothing in it gains a right. What goes wrong
// makes the copy fail, and boxer then destroys the destination; the
// source is always let go as it was.
//
// # What is refused
//
// A source with more than one thread (fork(2) copies only one too, but a
// copy taken while another thread holds a lock would hang) and a source
// with shared anonymous memory (mmap MAP_SHARED|MAP_ANONYMOUS, SysV or
// memfd segments): the copy could not share it with anyone it shared it
// with. The caller refuses a source with child processes. The errors say
// which (*RefusedError).
//
// # Limits
//
// x86-64 only (the registers and the system call gadget are the
// architecture's); elsewhere Copy returns ErrUnsupported. The host must
// let boxer ptrace (CAP_SYS_PTRACE, and no Yama ptrace_scope 3). Pages
// are copied, not shared: a fork costs the memory its parent had written.
package transplant
