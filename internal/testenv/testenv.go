// Package testenv holds what boxer's tests ask of the machine they run on:
// how slow its CPU is, which kernel it runs, whether io_uring is open.
// Only tests import it.
package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Slowdown is BOXER_TEST_SLOWDOWN, an integer, 1 when unset: an emulated
// CPU, as in test/guest's TCG guests, runs the same program tens of times
// slower.
func Slowdown() int {
	if n, err := strconv.Atoi(os.Getenv("BOXER_TEST_SLOWDOWN")); err == nil && n > 1 {
		return n
	}
	return 1
}

// Slow scales a time budget by Slowdown, so that a budget sized for real
// hardware does not fail a program that is merely slow on an emulated
// one. Budgets that a test asserts as an upper bound of boxer's own
// reaction (a kill, a teardown) stay as they are.
func Slow(d time.Duration) time.Duration { return d * time.Duration(Slowdown()) }

// KernelAtLeast reports whether the running kernel is major.minor or newer.
func KernelAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", uts.Release, err)
	}
	return ma > major || ma == major && mi >= minor
}

// RequireIOUring skips unless io_uring is open to all: nothing can be
// pinned without it. Kernels before 6.6 have no io_uring_disabled sysctl,
// and there it is always open.
func RequireIOUring(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Skipf("io_uring is not open to all on this kernel (io_uring_disabled %q, %v): nothing can be pinned", b, err)
	}
}
