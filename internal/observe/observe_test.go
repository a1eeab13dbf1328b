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
	addr, err := Serving(strings.NewReader(log))
	if err != nil || addr != "http://127.0.0.1:4242" {
		t.Fatalf("%q %v", addr, err)
	}
	if _, err := Serving(strings.NewReader(`{"msg":"boxer serve","err":"no"}` + "\n")); err == nil {
		t.Fatal("no serving line, no error")
	}
}
