package int80

// Syscall makes the i386 system call nr (an i386 number, not an x86_64 one)
// with up to three arguments, which the kernel truncates to 32 bits, and
// returns EAX: the result, or a negated errno.
func Syscall(nr, a1, a2, a3 uintptr) uintptr
