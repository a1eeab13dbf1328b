//go:build amd64 || arm64

package seccomp

import "golang.org/x/sys/unix"

// zygoteNSFlags are the namespaces a warm pool's zygote may still create for
// each child it forks. A user, UTS or time namespace stays refused: the
// zygote only separates processes, mounts, IPC, network and cgroup views.
const zygoteNSFlags = unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// io_uring_register's opcodes the zygote may use
// (include/uapi/linux/io_uring.h); x/sys/unix does not name them.
const (
	ioringRegisterBuffers = 0
	ioringRegisterRingFDs = 20
)

// Zygote returns the policy of a warm pool's zygote: Default, plus
//   - the unshare, mount and umount2 calls it needs to give each forked
//     child its own namespaces, /proc and tmpfs mounts before the child
//     installs Default on top of it; setns for a PID namespace, to return
//     to its own before it makes the next child's (zygote.py's _fork), and
//     for a network namespace, for a child to join the one boxer kept
//     from the slot's last child (_enter_net; boxer alone can hand it
//     one); no other kind;
//   - io_uring_setup, and io_uring_register for registering buffers and
//     the ring's own descriptor alone, with which the zygote pins the
//     pages its children write so that every fork copies them at once
//     (zygote_speed.py's pin). io_uring_enter stays refused, and the zygote
//     stacks ZygoteSealed as soon as it has pinned them;
//   - process_madvise for MADV_POPULATE_WRITE alone, with which a child
//     copies those pages in one call where they could not be pinned
//     (zygote_speed.py's pretouch); that advice only breaks the sharing of
//     pages, never changes a byte.
//
// Filters stack, so caller code in a child runs under both and gets the
// stricter answer; the zygote itself never runs caller code.
func Zygote() Policy {
	p := Default()
	extra := map[uint32]Rule{
		unix.SYS_UNSHARE: {Nr: unix.SYS_UNSHARE, Action: Allow, Checks: []Check{
			{Arg: 0, Op: AnyBits, Value: nsFlags &^ zygoteNSFlags, Action: Errno(unix.EPERM)},
		}},
		unix.SYS_SETNS: {Nr: unix.SYS_SETNS, Action: Errno(unix.EPERM), Checks: []Check{
			{Arg: 1, Op: Equal, Value: unix.CLONE_NEWPID, Action: Allow},
			{Arg: 1, Op: Equal, Value: unix.CLONE_NEWNET, Action: Allow},
		}},
		unix.SYS_MOUNT:          {Nr: unix.SYS_MOUNT, Action: Allow},
		unix.SYS_UMOUNT2:        {Nr: unix.SYS_UMOUNT2, Action: Allow},
		unix.SYS_IO_URING_SETUP: {Nr: unix.SYS_IO_URING_SETUP, Action: Allow},
		unix.SYS_IO_URING_REGISTER: {Nr: unix.SYS_IO_URING_REGISTER, Action: Errno(unix.EPERM), Checks: []Check{
			{Arg: 1, Op: Equal, Value: ioringRegisterBuffers, Action: Allow},
			{Arg: 1, Op: Equal, Value: ioringRegisterRingFDs, Action: Allow},
		}},
		unix.SYS_PROCESS_MADVISE: {Nr: unix.SYS_PROCESS_MADVISE, Action: Errno(unix.EPERM), Checks: []Check{
			{Arg: 3, Op: Equal, Value: unix.MADV_POPULATE_WRITE, Action: Allow},
		}},
	}
	for i, r := range p.Rules {
		if x, ok := extra[r.Nr]; ok {
			p.Rules[i] = x
		}
	}
	return p
}

// ZygoteSealed returns the policy a zygote stacks on its own once it has
// pinned its pages (zygote_speed.py's pin): io_uring's calls refused, and every
// other call left to the filters below it. From then on neither the
// zygote nor any child it forks can set up a ring, register with one or
// enter one: Zygote alone could not keep a ring set up with SQPOLL, whose
// kernel thread needs no io_uring_enter, from doing I/O.
func ZygoteSealed() Policy {
	d := Default()
	return Policy{Arch: d.Arch, KillNrBits: d.KillNrBits, Default: Allow, Rules: []Rule{
		{Nr: unix.SYS_IO_URING_SETUP, Action: Errno(unix.EPERM)},
		{Nr: unix.SYS_IO_URING_ENTER, Action: Errno(unix.EPERM)},
		{Nr: unix.SYS_IO_URING_REGISTER, Action: Errno(unix.EPERM)},
	}}
}
