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
	c := startCapture(r, 4, nil)
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
	c := startCapture(r, 1<<10, nil)
	if _, cut := c.waitAtMost(10 * time.Millisecond); !cut {
		t.Fatal("the wait for a stream still open was not cut off")
	}
}

// What a stream's callback gets is what is kept: nothing past the limit.
func TestCaptureStreamsWhatItKeeps(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	c := startCapture(r, 6, func(b []byte) { got = append(got, b...) })
	w.Write([]byte("abcd"))
	w.Write([]byte("efgh"))
	w.Close()
	out, _ := c.waitAtMost(time.Minute)
	if string(got) != "abcdef" || string(out.Data) != "abcdef" || out.Bytes != 8 {
		t.Fatalf("streamed %q, kept %q of %d", got, out.Data, out.Bytes)
	}
}

// What the run wrote before the wait was cut is kept, even where the
// reader had not run since: here the cut comes before its first read.
func TestCaptureCutKeepsWhatWasWritten(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write([]byte("abc"))
	r.SetReadDeadline(time.Now()) // as waitAtMost cuts, before the reader reads
	c := startCapture(r, 1<<10, nil)
	out, _ := c.waitAtMost(time.Minute)
	if string(out.Data) != "abc" || out.Bytes != 3 {
		t.Fatalf("kept %q of %d bytes, want all of \"abc\"", out.Data, out.Bytes)
	}
}

// A writer outside the run that never stops cannot keep the cut wait
// going: what is read after the cut is bounded.
func TestCaptureCutBoundedAgainstEndlessWriter(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		chunk := make([]byte, 4096)
		for {
			select {
			case <-stop:
				w.Close()
				return
			default:
				w.Write(chunk)
			}
		}
	}()
	defer close(stop)
	c := startCapture(r, 1<<10, nil)
	out, cut := c.waitAtMost(10 * time.Millisecond)
	if !cut || out.Bytes <= 0 {
		t.Fatalf("cut %v after %d bytes", cut, out.Bytes)
	}
}
