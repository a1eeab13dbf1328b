package seccomp

import "golang.org/x/sys/unix"

const (
	nativeArch = unix.AUDIT_ARCH_X86_64
	// killNrBits is __X32_SYSCALL_BIT. x32 calls arrive with the x86_64
	// AUDIT_ARCH but number their syscalls differently, so they must not
	// reach the rules.
	killNrBits = 0x40000000
	// lowWordOffset: x86_64 is little-endian, the low half of an
	// argument comes first.
	lowWordOffset = 0
)

// archAllowed are the x86_64 syscalls, older spellings of allowed ones, that
// arm64 never had.
func archAllowed() []uint32 {
	return []uint32{
		unix.SYS_OPEN, unix.SYS_CREAT, unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_ACCESS,
		unix.SYS_POLL, unix.SYS_SELECT, unix.SYS_PIPE, unix.SYS_DUP2, unix.SYS_PAUSE,
		unix.SYS_ALARM, unix.SYS_FORK, unix.SYS_VFORK, unix.SYS_GETDENTS,
		unix.SYS_RENAME, unix.SYS_MKDIR, unix.SYS_RMDIR, unix.SYS_LINK, unix.SYS_UNLINK,
		unix.SYS_SYMLINK, unix.SYS_READLINK, unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN,
		unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT, unix.SYS_MKNOD, unix.SYS_TIME,
		unix.SYS_EPOLL_CREATE, unix.SYS_EPOLL_WAIT,
		unix.SYS_SIGNALFD, unix.SYS_EVENTFD, unix.SYS_GETPGRP,
		// glibc sets the thread pointer (FS) with it.
		unix.SYS_ARCH_PRCTL,
	}
}

// archRefused are x86_64-only syscalls refused with EPERM: direct I/O port
// access, the LDT (segment tricks behind several kernel exploits, needed only
// by 16-bit and Wine code), and uselib (a.out libraries).
func archRefused() []uint32 {
	return []uint32{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_USELIB}
}
