package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path+".lock", so that one
// process at a time owns the database. Open relies on it: releasing every
// "running" job at start is right only when no other process is running
// jobs against the same file. The kernel drops the lock when the process
// dies, so a crash never leaves it stale.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another boxer process", path)
		}
		return nil, fmt.Errorf("lock %s.lock: %w", path, err)
	}
	return f, nil
}
