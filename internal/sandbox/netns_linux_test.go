package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// untouched compares a held file with what it said when new, byte for
// byte and length for length: anything else gives the namespace up.
// (TestWarmNetnsKeptOnlyUntouched covers it on /proc/net itself.)
func TestHeldNetUntouchedComparesWholeFile(t *testing.T) {
	const pristine = "Num       RefCount Protocol Flags    Type St Inode Path\n"
	path := filepath.Join(t.TempDir(), "unix")
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	n := &heldNet{fd: -1, files: []int{fd}, pristine: [][]byte{[]byte(pristine)}}
	defer unix.Close(fd)
	long := strings.Repeat("x", 3000) // past untouched's stack buffer
	for _, c := range []struct {
		now       string
		untouched bool
	}{
		{pristine, true},
		{pristine + "0000: 00000002 00000000 00010000 0001 01 1234 @x\n", false},
		{pristine + "\n", false},
		{pristine[:len(pristine)-1], false},
		{strings.Replace(pristine, "Num", "NUM", 1), false},
		{"", false},
		{pristine, true}, // read again from the start after the others
	} {
		if err := os.WriteFile(path, []byte(c.now), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := n.untouched(); got != c.untouched {
			t.Errorf("held %q, now %q: untouched %v, want %v", pristine, c.now, got, c.untouched)
		}
	}
	n.pristine[0] = []byte(long)
	for _, c := range []struct {
		now       string
		untouched bool
	}{{long, true}, {long + "y", false}, {long[1:], false}} {
		if err := os.WriteFile(path, []byte(c.now), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := n.untouched(); got != c.untouched {
			t.Errorf("held %d bytes, now %d: untouched %v, want %v", len(long), len(c.now), got, c.untouched)
		}
	}
}
