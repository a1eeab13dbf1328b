package seccomp

import "golang.org/x/sys/unix"

const (
	nativeArch = unix.AUDIT_ARCH_AARCH64
	// killNrBits: arm64 has no second ABI sharing its AUDIT_ARCH (32-bit
	// ARM compat calls carry AUDIT_ARCH_ARM and fail the arch check).
	killNrBits = 0
	// lowWordOffset: arm64 Linux is little-endian, the low half of an
	// argument comes first.
	lowWordOffset = 0
)

// archAllowed: arm64 has only the generic syscall table, all of it in
// allowed.
func archAllowed() []uint32 { return nil }

// archRefused: arm64 has no architecture-specific syscalls to refuse.
func archRefused() []uint32 { return nil }
