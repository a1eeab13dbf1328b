package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"boxer/internal/testenv"
)

// event is one server-sent event, with when it was read.
type event struct {
	name string
	data map[string]any
	at   time.Time
}

var streamClient = &http.Client{Timeout: 3 * time.Minute}

// stream posts body to path asking for events, and returns the response
// (its body unread) once the status line is in.
func (s *testServer) stream(path, body string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// Not the client that checks answers against /openapi.json: it reads
	// each answer whole before handing it over.
	resp, err := streamClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("POST %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return resp
}

// events reads resp's events as they arrive, line by line off the
// connection (no buffering of the whole answer), until the body ends.
func events(t *testing.T, resp *http.Response) <-chan event {
	ch := make(chan event, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = event{name: strings.TrimPrefix(line, "event: ")}
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
					t.Errorf("event %s: data is not JSON: %q", ev.name, line)
				}
			case line == "":
				ev.at = time.Now()
				ch <- ev
			}
		}
	}()
	return ch
}

// stdoutUntil reads stdout events until what they carried is want (a
// print may come as two writes, its text and its newline), and returns
// when the last of them arrived.
func stdoutUntil(t *testing.T, ch <-chan event, want string) time.Time {
	t.Helper()
	var got string
	for got != want {
		ev := next(t, ch)
		if ev.name != "stdout" || !strings.HasPrefix(want, got+ev.data["data"].(string)) {
			t.Fatalf("after stdout %q, event %+v; want stdout %q", got, ev, want)
		}
		got += ev.data["data"].(string)
		if got == want {
			return ev.at
		}
	}
	return time.Time{}
}

func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended early")
		}
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no event within a minute")
	}
	return event{}
}

// TestServeStreamExec: /v1/exec's output comes as it is written, before
// the program ends, and its answer last.
func TestServeStreamExec(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	ch := events(t, s.stream("/v1/exec", execBody("import sys, time\nprint('first')\ntime.sleep(2)\nprint('oops', file=sys.stderr)\nprint('second')")))
	first := stdoutUntil(t, ch, "first\n")
	var out, errOut string
	var last event
	for ev := range ch {
		switch ev.name {
		case "stdout":
			out += ev.data["data"].(string)
		case "stderr":
			errOut += ev.data["data"].(string)
		}
		last = ev
	}
	if last.name != "result" || field(last.data, "result", "stdout") != "first\nsecond\n" || out != "second\n" || errOut != "oops\n" {
		t.Fatalf("rest: stdout %q, stderr %q, last %+v", out, errOut, last)
	}
	if gap := last.at.Sub(first); gap < time.Second {
		t.Errorf("the first chunk came %v before the answer: not while the program ran", gap)
	}
}

// TestServeStreamSession: a cell's first chunk arrives while the cell
// still runs (it cannot end before the test answers it), then the answer.
func TestServeStreamSession(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	id := s.newSession(`{}`)
	ch := events(t, s.stream("/v1/sessions/"+id+"/exec", `{"code": "import os, time\nprint('waiting')\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\n'done'"}`))
	stdoutUntil(t, ch, "waiting\n")
	if status, _, m := s.post("/v1/sessions/"+id+"/files", `{"files": {"go": ""}}`); status != 200 {
		t.Fatalf("upload: %d %v", status, m)
	}
	if ev := next(t, ch); ev.name != "result" || field(ev.data, "result", "value") != "'done'" || field(ev.data, "result", "stdout") != "waiting\n" {
		t.Fatalf("answer: %+v", ev)
	}
}

// TestServeStreamCaps: a streamed run's output is cut at its cap, as the
// answer's is; a client that waits before reading holds up nothing; one
// that leaves cancels its run.
func TestServeStreamCaps(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	resp := s.stream("/v1/run-python", `{"files": {"main.py": "import sys\nfor _ in range(3 << 10):\n    sys.stdout.write('x' * 1023 + '\\n')"}}`)
	// A slow reader: the program is not waiting for it. Its pause is
	// scaled as the program's own time is (a TCG guest runs Python
	// twenty times slower), so that only a program held up by the reader
	// takes as long.
	pause := testenv.Slow(time.Second)
	time.Sleep(pause)
	var streamed int
	var last event
	for ev := range events(t, resp) {
		if ev.name == "stdout" {
			streamed += len(ev.data["data"].(string))
		}
		last = ev
	}
	if last.name != "result" || last.data["stdout_truncated"] != true || streamed != 1<<20 {
		t.Fatalf("streamed %d bytes; answer %s truncated %v", streamed, last.name, last.data["stdout_truncated"])
	}
	if ms := last.data["duration_ms"].(float64); ms >= float64(pause.Milliseconds()) {
		t.Errorf("the program took %v ms: it waited for the reader", ms)
	}

	resp = s.stream("/v1/run-python", `{"files": {"main.py": "print('spinning')\nwhile True:\n    pass"}, "timeout_seconds": 30}`)
	ch := events(t, resp)
	if ev := next(t, ch); ev.name != "stdout" {
		t.Fatalf("first event: %+v", ev)
	}
	resp.Body.Close()
	waitFor(t, "the abandoned run is cancelled", func() bool {
		_, _, m := s.get("/v1/health")
		return m["running"] == 0.0
	})
}

// TestServeStreamErrors: a call that fails before any output is a plain
// JSON error, with its status, streamed or not.
func TestServeStreamErrors(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/exec", strings.NewReader(`{"code": 1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	status, h, m := decode(t, resp)
	resp.Body.Close()
	if status != 400 || h.Get("Content-Type") != "application/json" || field(m, "error", "code") != "invalid_request" {
		t.Fatalf("%d %s %v", status, h.Get("Content-Type"), m)
	}
}

// TestServeStreamReaderStalls: a streaming client that reads nothing holds
// up neither its own program (which ends, its run slot given back) nor
// anything else: another session's calls, its deletion, the health route.
func TestServeStreamReaderStalls(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	other := s.newSession(`{}`)
	victim := s.newSession(`{}`)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Escaped in JSON, each \x01 is six bytes: far more than the sockets hold.
	body := `{"code": "import sys\nsys.stdout.write('\\x01' * (1 << 20))\nsys.stderr.write('\\x01' * (1 << 20))\n'end'"}`
	fmt.Fprintf(conn, "POST /v1/sessions/%s/exec HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", victim, len(body), body)
	waitFor(t, "the stalled stream's cell ends", func() bool {
		_, _, m := s.get("/v1/health")
		return field(m, "sessions", "busy") == 0.0 && m["running"] == 0.0
	})
	status, m := s.sessionExec(other, "6 * 7", 0)
	wantCell(t, status, m, map[string]any{"value": "42"})
	if status, b := s.do("DELETE", "/v1/sessions/"+victim); status != 200 {
		t.Fatalf("delete the stalled stream's session: %d %s", status, b)
	}
	if status, _, m := s.post("/v1/exec", execBody("print(1)")); status != 200 {
		t.Fatalf("a run beside the stalled stream: %d %v", status, m)
	}
}
