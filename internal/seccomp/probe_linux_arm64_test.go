package seccomp

// archProbes: arm64 has no second ABI to try from 64-bit code without a
// 32-bit ARM toolchain, and no architecture-only syscalls; the foreign-arch
// kill is covered in the VM by TestDefaultKillsForeignABIs.
func archProbes() []probe { return nil }
