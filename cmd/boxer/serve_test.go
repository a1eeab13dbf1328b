package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"boxer/internal/observe"
	"boxer/internal/sandbox"
	"boxer/internal/testenv"
)

// testServer is a real `boxer serve` on a free loopback port.
type testServer struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	done chan error
	log  *logTail // the last of its log, for a failing test
}

// startServe starts the binary and waits for its "serving" log line.
func startServe(t *testing.T, bin, state, data string, args ...string) *testServer {
	t.Helper()
	return startServeCmd(t, serveCmd(bin, state, data, args...))
}

func serveCmd(bin, state, data string, args ...string) *exec.Cmd {
	return exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--state-dir", state, "--data-dir", data,
		"--pool-preimport", "", "--shutdown-grace", "5s"}, args...)...)
}

// startServeCmd starts cmd, a serveCmd, and waits for its "serving" line.
func startServeCmd(t *testing.T, cmd *exec.Cmd) *testServer {
	t.Helper()
	// A test binary killed by go test's timeout takes its server along
	// (SIGTERM: the server still cleans up its sandboxes).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, cmd: cmd, done: make(chan error, 1), log: &logTail{}}
	if s.url, err = observe.Serving(stderr, s.log); err != nil {
		cmd.Wait()
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("the server's log, last %d bytes:\n%s", logTailSize, s.log)
		}
	})
	return s
}

// logTailSize is how much of a test server's log is kept, to be shown if
// its test fails.
const logTailSize = 16 << 10

// logTail keeps the last logTailSize bytes written to it.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logTail) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	if over := len(l.buf) - logTailSize; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(b), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// client is the tests' HTTP client. Its timeout turns a request the
// server never answers into a failure, with the server's log, instead of
// a test binary killed by go test's timeout with neither.
var client = &http.Client{Timeout: 3 * time.Minute, Transport: docChecked(http.DefaultTransport)}

// stop sends SIGTERM and waits for a clean exit.
func (s *testServer) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("boxer serve exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		s.t.Error("boxer serve did not stop within 30s of SIGTERM")
	}
}

// post sends a JSON body and decodes the JSON answer.
func (s *testServer) post(path, body string) (int, http.Header, map[string]any) {
	s.t.Helper()
	resp, err := client.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	return decode(s.t, resp)
}

func (s *testServer) get(path string) (int, http.Header, map[string]any) {
	s.t.Helper()
	resp, err := client.Get(s.url + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	return decode(s.t, resp)
}

func decode(t *testing.T, resp *http.Response) (int, http.Header, map[string]any) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%d: not JSON: %q", resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header, m
}

func execBody(code string) string {
	b, _ := json.Marshal(map[string]string{"code": code, "language": "python"})
	return string(b)
}

// field walks nested maps: field(m, "result", "stdout").
func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// TestServeSeedExamples runs each seed's own examples and every failure
// mode they list against the real binary.
func TestServeSeedExamples(t *testing.T) {
	bin := boxerBin(t)
	s := startServe(t, bin, stateDir(t), t.TempDir())

	t.Run("seed 000: print(2 + 2)", func(t *testing.T) {
		code, _, m := s.post("/v1/exec", `{"code": "print(2 + 2)", "language": "python"}`)
		if code != 200 || m["success"] != true || field(m, "result", "stdout") != "4\n" ||
			field(m, "result", "stderr") != "" || field(m, "result", "exitCode") != 0.0 || field(m, "result", "timedOut") != false {
			t.Fatalf("%d %v", code, m)
		}
		if _, ok := field(m, "result", "durationMs").(float64); !ok {
			t.Fatalf("durationMs missing: %v", m)
		}
	})
	t.Run("seed 001: factorial", func(t *testing.T) {
		_, _, m := s.post("/v1/exec", execBody("import math; print(math.factorial(20))"))
		if field(m, "result", "stdout") != "2432902008176640000\n" {
			t.Fatal(m)
		}
	})
	t.Run("seed 004: matplotlib chart as a base64 artifact", func(t *testing.T) {
		body := `{"files": {"main.py": "import os\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nos.makedirs('output', exist_ok=True)\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.savefig('output/chart.png')\nprint('saved')\n"},
			"timeout_seconds": ` + fmt.Sprint(min(20*testenv.Slowdown(), 30)) + `, "memory_mb": 512, "artifact_paths": ["output/chart.png"]}` // the API's most, on an emulated CPU
		code, _, m := s.post("/v1/run-python", body)
		arts, _ := m["artifacts"].([]any)
		if code != 200 || m["stdout"] != "saved\n" || len(arts) != 1 {
			t.Fatalf("%d %v", code, m)
		}
		a := arts[0].(map[string]any)
		png, err := base64.StdEncoding.DecodeString(a["content"].(string))
		if a["encoding"] != "base64" || err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || a["size"] != float64(len(png)) {
			t.Fatalf("artifact is not a PNG: %v %v", a["encoding"], err)
		}
	})
	t.Run("seed 004: pytest through command", func(t *testing.T) {
		body := `{"files": {"utils.py": "def add(a, b):\n    return a + b\n",
			"test_math.py": "from utils import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
			"command": ["python", "-m", "pytest", "-q", "test_math.py"]}`
		code, _, m := s.post("/v1/run-python", body)
		if code != 200 || m["exit_code"] != 0.0 || !strings.Contains(m["stdout"].(string), "1 passed") {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		_, _, m := s.post("/v1/run-python", `{"files": {"main.py": "import sys\nprint(sys.stdin.read().upper())"}, "stdin": "hello"}`)
		if m["stdout"] != "HELLO\n" {
			t.Fatal(m)
		}
	})
	t.Run("code over 64 KB", func(t *testing.T) {
		code, _, m := s.post("/v1/exec", execBody("#"+strings.Repeat("x", 65536)))
		if code != 413 || field(m, "error", "code") != "code_too_large" || m["success"] != false {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("timeout keeps partial stdout", func(t *testing.T) {
		body := `{"files": {"main.py": "import time\nprint('partial')\ntime.sleep(30)"}, "timeout_seconds": 1}`
		code, _, m := s.post("/v1/run-python", body)
		if code != 200 || m["timed_out"] != true || m["stdout"] != "partial\n" {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("runtime error: traceback and exit 1", func(t *testing.T) {
		_, _, m := s.post("/v1/exec", execBody("print('a')\nraise ValueError('boom')"))
		stderr, _ := field(m, "result", "stderr").(string)
		if m["success"] != true || field(m, "result", "exitCode") != 1.0 || !strings.Contains(stderr, "Traceback") || !strings.Contains(stderr, "ValueError: boom") {
			t.Fatal(m)
		}
	})
	t.Run("out of memory", func(t *testing.T) {
		body := `{"files": {"main.py": "x = []\nwhile True: x.append(bytearray(1 << 20))"}, "memory_mb": 64}`
		code, _, m := s.post("/v1/run-python", body)
		if code != 200 || m["oom_killed"] != true || m["status"] != "oom" {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("network attempt refused", func(t *testing.T) {
		_, _, m := s.post("/v1/exec", execBody("import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=5)\nexcept OSError as e:\n    print(type(e).__name__, e.errno)"))
		if field(m, "result", "stdout") != "OSError 101\n" {
			t.Fatal(m)
		}
	})
	t.Run("malformed body", func(t *testing.T) {
		for _, body := range []string{`{"code": `, `{"code": "print(1)"} trailing`, `{"code": 5}`, `{"code": "x", "Code": "y"}`} {
			code, _, m := s.post("/v1/exec", body)
			if code != 400 || m["success"] != false || field(m, "error", "code") == nil {
				t.Fatalf("%q: %d %v", body, code, m)
			}
		}
	})
	t.Run("unsupported language", func(t *testing.T) {
		code, _, m := s.post("/v1/exec", `{"code": "puts 1", "language": "ruby"}`)
		if code != 400 || field(m, "error", "code") != "unsupported_language" {
			t.Fatalf("%d %v", code, m)
		}
	})
	t.Run("health", func(t *testing.T) {
		code, _, m := s.get("/v1/health")
		if code != 200 || m["status"] != "ok" || m["runsTotal"].(float64) < 5 {
			t.Fatalf("%d %v", code, m)
		}
	})
}

// TestServeBusy fills the one run slot and the one queue place, then
// expects the next request to be refused with 503 busy and Retry-After.
func TestServeBusy(t *testing.T) {
	bin := boxerBin(t)
	state := stateDir(t)
	s := startServe(t, bin, state, t.TempDir(), "--slots", "1", "--queue", "1", "--pool-min", "0")
	slow := execBody("import time; time.sleep(20)")
	results := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := client.Post(s.url+"/v1/exec", "application/json", strings.NewReader(slow))
			if err == nil {
				resp.Body.Close()
				results <- resp.StatusCode
			} else {
				results <- 0
			}
		}()
	}
	// Wait until the health record shows one running and one queued.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, h := s.get("/v1/health")
		if h["running"] == 1.0 && h["queued"] == 1.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot and queue never filled: %v", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, hdr, m := s.post("/v1/exec", execBody("print(1)"))
	if code != 503 || field(m, "error", "code") != "busy" || hdr.Get("Retry-After") == "" {
		t.Fatalf("%d %v (Retry-After %q)", code, m, hdr.Get("Retry-After"))
	}
	// SIGTERM with a run still going past the grace period: it is
	// killed, and no sandbox process outlives the server.
	s.stop()
	base := sandbox.Config{StateDir: state}.WithDefaults().IDBase
	if pids := observe.LiveProcesses(base, base+65536); len(pids) > 0 {
		t.Fatalf("sandbox processes outlived the server: %v", pids)
	}
}

// TestServeJobReplayAcrossRestart stores a job, restarts the server on the
// same data dir, and gets the stored result back without a second run.
func TestServeJobReplayAcrossRestart(t *testing.T) {
	bin := boxerBin(t)
	state, data := stateDir(t), t.TempDir()
	// A random number: a second run would print another one.
	body := `{"job_id": "replay-1", "files": {"main.py": "import random\nprint(random.random())"}}`
	s := startServe(t, bin, state, data)
	code, _, first := s.post("/v1/run-python", body)
	if code != 200 || first["job_id"] != "replay-1" {
		t.Fatalf("%d %v", code, first)
	}
	s.stop()

	s = startServe(t, bin, state, data)
	code, _, again := s.post("/v1/run-python", body)
	if code != 200 || again["stdout"] != first["stdout"] {
		t.Fatalf("replay after restart: %d stdout %v, first run printed %v", code, again["stdout"], first["stdout"])
	}
	code, _, got := s.get("/v1/jobs/replay-1")
	if code != 200 || got["stdout"] != first["stdout"] {
		t.Fatalf("GET /v1/jobs: %d %v", code, got)
	}
	code, _, m := s.post("/v1/run-python", `{"job_id": "replay-1", "files": {"main.py": "print(2)"}}`)
	if code != 409 || field(m, "error", "code") != "job_id_conflict" {
		t.Fatalf("conflict: %d %v", code, m)
	}
	if code, _, _ := s.get("/v1/jobs/never-ran"); code != 404 {
		t.Fatalf("unknown job: %d", code)
	}
}

// TestServeRefusesIncompleteConfig: payments switched on without a payee
// or facilitator must stop the start with a clear message, not serve free.
// A run's default CPU is the seed's half core on /v1/exec and in a
// session, a whole one on /v1/run-python (api.DefaultRunLimits).
func TestServeDefaultCPUs(t *testing.T) {
	ef := newEnvFlags("serve", "", io.Discard)
	c := serveFlags(ef)
	if !ef.parse(nil) {
		t.Fatal("no flags: refused")
	}
	if got := [3]float64{c.API.ExecLimits.CPUs, c.API.RunLimits.CPUs, c.Sessions.Limits.CPUs}; got != [3]float64{0.5, 1, 0.5} {
		t.Errorf("exec, run-python and session CPUs %v, want [0.5 1 0.5]", got)
	}
}

func TestServeRefusesIncompleteConfig(t *testing.T) {
	bin := boxerBin(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--state-dir", stateDir(t), "--data-dir", t.TempDir(), "--payments", "x402")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pay") {
		t.Fatalf("serve started with an incomplete payment config: %v\n%s", err, out)
	}
}

// The facilitator's GET /supported at start: an answer that lists other
// payments stops the start; no answer starts the server unready, since
// no run can be paid for (and /healthz still answers).
func TestServeFacilitatorHealth(t *testing.T) {
	bin := boxerBin(t)
	pay := []string{"--payments", "x402", "--x402-pay-to", "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"}
	fac := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:84532"}]}`))
	}))
	defer fac.Close()
	cmd := serveCmd(bin, stateDir(t), t.TempDir(), append(pay, "--x402-facilitator-url", fac.URL)...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not support this payment") || !strings.Contains(string(out), "eip155:84532") {
		t.Fatalf("serve with a facilitator for another network: %v\n%s", err, out)
	}

	s := startServeCmd(t, serveCmd(bin, stateDir(t), t.TempDir(), append(pay, "--x402-facilitator-url", "http://127.0.0.1:9")...))
	if code, _, body := s.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body), "cannot be paid for") {
		t.Errorf("readyz with the facilitator down: %d %v", code, body)
	}
	if code, _, _ := s.get("/healthz"); code != http.StatusOK {
		t.Errorf("healthz with the facilitator down: %d", code)
	}
}

// A descriptor boxer inherited without close-on-exec (a parent's leak)
// reaches no sandbox process, not even a pid 1.
func TestServeInheritedFDsStayOut(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	leaked := fmt.Sprintf("pipe:[%d]", st.Ino)
	state := stateDir(t)
	cmd := serveCmd(boxerBin(t), state, t.TempDir(), "--pool-min", "1")
	// fd 60 of the server, not close-on-exec: above the descriptors boxer
	// itself hands its children, which would replace a lower one.
	cmd.ExtraFiles = append(make([]*os.File, 57), w)
	s := startServeCmd(t, cmd)
	for _, body := range []string{`{"files": {"main.py": "print(1)"}}`, `{"files": {"main.py": "print(1)"}, "command": ["python", "-u", "main.py"]}`} { // warm, cold
		if code, _, m := s.post("/v1/run-python", body); code != 200 {
			t.Fatalf("%d %v", code, m)
		}
	}
	base := sandbox.Config{StateDir: state}.WithDefaults().IDBase
	pids := observe.LiveProcesses(base, base+65536)
	if len(pids) == 0 {
		t.Fatal("no sandbox process to look at (the warm pool's zygote should be one)")
	}
	for _, pid := range pids {
		for fd, target := range observe.Descriptors(pid) {
			if target == leaked {
				t.Errorf("sandbox process %d holds the server's inherited descriptor as fd %d", pid, fd)
			}
		}
	}
}
