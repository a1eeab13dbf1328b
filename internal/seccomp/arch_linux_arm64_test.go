package seccomp

// archRequiredRefusals: the x86-only calls of the required list (iopl,
// ioperm, uselib) do not exist on arm64.
func archRequiredRefusals() []uint32 { return nil }
