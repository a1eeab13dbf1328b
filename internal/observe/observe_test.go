package observe

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestLiveProcesses(t *testing.T) {
	me := uint32(os.Getuid())
	if pids := LiveProcesses(me, me+1); !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("this process (uid %d) not listed: %v", me, pids)
	}
	if pids := LiveProcesses(4_000_000_000, 4_000_000_001); len(pids) != 0 {
		t.Fatalf("processes of an unused uid: %v", pids)
	}
}

func TestServing(t *testing.T) {
	log := `{"msg":"warm pool zygote ready"}` + "\n" + `not json` + "\n" +
		`{"level":"INFO","msg":"serving","addr":"http://127.0.0.1:4242"}` + "\n" + `{"msg":"later"}` + "\n"
	rest := make(chan []byte, 8)
	addr, err := Serving(strings.NewReader(log), chanWriter(rest))
	if err != nil || addr != "http://127.0.0.1:4242" {
		t.Fatalf("%q %v", addr, err)
	}
	if got := string(<-rest); got != `{"msg":"later"}`+"\n" {
		t.Fatalf("the log after the serving line: %q", got)
	}
	if _, err := Serving(strings.NewReader(`{"msg":"boxer serve","err":"no"}`+"\n"), nil); err == nil {
		t.Fatal("no serving line, no error")
	}
}

// chanWriter sends each write to a channel.
type chanWriter chan []byte

func (c chanWriter) Write(b []byte) (int, error) {
	c <- append([]byte(nil), b...)
	return len(b), nil
}

func TestDescriptors(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fds := Descriptors(os.Getpid())
	if got := fds[int(f.Fd())]; got != f.Name() {
		t.Fatalf("fd %d: %q, want %q", f.Fd(), got, f.Name())
	}
	if len(Descriptors(-1)) != 0 {
		t.Fatal("descriptors of no process")
	}
}
