// Package int80 makes i386 system calls from x86_64 code through the int
// 0x80 gate. It exists for the seccomp tests, which check that a process
// switching ABI this way is killed; nothing else should import it. On other
// architectures the package is empty.
package int80
