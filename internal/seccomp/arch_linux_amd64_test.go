package seccomp

import "golang.org/x/sys/unix"

func archRequiredRefusals() []uint32 {
	return []uint32{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB}
}
