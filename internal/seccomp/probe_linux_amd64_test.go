package seccomp

import (
	"fmt"
	"runtime/debug"

	"boxer/internal/seccomp/internal/int80"
	"golang.org/x/sys/unix"
)

// i386GetPID is getpid's number in the i386 table, which x/sys/unix only
// defines when building for 386.
const i386GetPID = 20

func archProbes() []probe {
	return []probe{
		// Another ABI: the i386 gate from 64-bit code, and x32 numbers.
		custom("i386 int 0x80 getpid", wantSIGSYS, func() (res string) {
			// Without IA32 emulation int 0x80 is a general protection
			// fault, before seccomp sees anything; report that rather
			// than crash, so the parent can tell it apart.
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if recover() != nil {
					res = unavailable
				}
			}()
			want := unix.Getpid()
			if got := int32(int80.Syscall(i386GetPID, 0, 0, 0)); got != int32(want) {
				return fmt.Sprintf("int 0x80 getpid returned %d, want %d", got, want)
			}
			return ok
		}),
		sys("x32 getpid", wantSIGSYS, killNrBits|unix.SYS_GETPID),
		sys("x32 read", wantSIGSYS, killNrBits|unix.SYS_READ, 0, 0, 0),

		refusal("iopl", unix.SYS_IOPL, 0),
		refusal("ioperm", unix.SYS_IOPERM, 0, 0, 0),
		refusal("modify_ldt", unix.SYS_MODIFY_LDT, 0, 0, 0),
		refusal("uselib", unix.SYS_USELIB, 0),
		sys("sysfs (unlisted)", wantENOSYS, unix.SYS_SYSFS, 9999),
	}
}
