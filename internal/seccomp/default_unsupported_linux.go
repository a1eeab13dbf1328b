//go:build !amd64 && !arm64

package seccomp

// lowWordOffset is unused here: Build refuses a policy without an
// architecture before it emits any argument load.
const lowWordOffset = 0

// Default returns an empty policy on architectures without a reviewed syscall
// table; Build turns it into ErrUnsupportedArch, so the sandbox refuses to
// start rather than run unconfined.
func Default() Policy { return Policy{} }
