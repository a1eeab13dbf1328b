package sandbox

import (
	"os"
	"testing"
	"time"
)

func TestCaptureKeepsLimitAndCounts(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := startCapture(r, 4)
	w.Write([]byte("abcdefgh"))
	w.Close()
	out, cut := c.waitAtMost(time.Minute)
	if cut || string(out.Data) != "abcd" || out.Bytes != 8 || !out.Truncated {
		t.Fatalf("cut %v, %q of %d bytes, truncated %v", cut, out.Data, out.Bytes, out.Truncated)
	}
}

// A stream that some process outside the run still holds open never
// reaches EOF; the wait for it ends anyway, and says so.
func TestCaptureCutWhenNoEOF(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := startCapture(r, 1<<10)
	if _, cut := c.waitAtMost(10 * time.Millisecond); !cut {
		t.Fatal("the wait for a stream still open was not cut off")
	}
}
