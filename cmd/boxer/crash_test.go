package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"boxer/internal/observe"
	"boxer/internal/sandbox"
)

// kill -9 of the server while runs are in flight: no sandbox process
// survives it, the next start cleans up after it, and no stored job
// record is lost.
func TestServeSurvivesKill9(t *testing.T) {
	bin := boxerBin(t)
	state, data := stateDir(t), t.TempDir()
	s := startServe(t, bin, state, data, "--pool-min", "2")

	// A finished job, stored before the crash.
	code, _, stored := s.post("/v1/run-python", `{"job_id": "before-crash", "files": {"main.py": "import random\nprint(random.random())"}}`)
	if code != 200 {
		t.Fatalf("%d %v", code, stored)
	}
	// Runs in flight: a warm one and a cold one (an interpreter flag
	// sends a command cold).
	for _, body := range []string{
		execBody("import time; time.sleep(60)"),
		`{"files": {"main.py": "import time; time.sleep(60)"}, "command": ["python", "-u", "main.py"]}`,
	} {
		path := "/v1/exec"
		if strings.Contains(body, "command") {
			path = "/v1/run-python"
		}
		go func() {
			if resp, err := client.Post(s.url+path, "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, h := s.get("/v1/health")
		if h["running"] == 2.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs never started: %v", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := sandbox.Config{StateDir: state}.WithDefaults().IDBase
	if len(observe.LiveProcesses(base, base+65536)) == 0 {
		t.Fatal("no sandbox process while runs are in flight")
	}

	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	// Pdeathsig ends every pid 1 (cold sandboxes and the zygote's); the
	// kernel then ends their PID namespaces. Give it a bounded moment.
	deadline = time.Now().Add(10 * time.Second)
	for len(observe.LiveProcesses(base, base+65536)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes outlived a kill -9 of the server: %v", observe.LiveProcesses(base, base+65536))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The next start cleans what the dead one left and keeps the records.
	s = startServe(t, bin, state, data, "--pool-min", "2")
	code, _, again := s.post("/v1/run-python", `{"job_id": "before-crash", "files": {"main.py": "import random\nprint(random.random())"}}`)
	if code != 200 || again["stdout"] != stored["stdout"] {
		t.Fatalf("stored job after the crash: %d %v, want stdout %v", code, again, stored["stdout"])
	}
	if _, _, m := s.post("/v1/exec", execBody("print(2 + 2)")); field(m, "result", "stdout") != "4\n" {
		t.Fatalf("after restart: %v", m)
	}
}
