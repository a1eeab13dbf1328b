//go:build linux && !amd64

package transplant

import "time"

// Copy is not supported here (see the package doc).
func Copy(src, dst, keepFd int, check func() error, timeout time.Duration) error {
	return ErrUnsupported
}
