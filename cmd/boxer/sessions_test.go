package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sessionExec runs code in session id and returns the status and answer.
func (s *testServer) sessionExec(id, code string, timeout int) (int, map[string]any) {
	s.t.Helper()
	req := map[string]any{"code": code}
	if timeout > 0 {
		req["timeout_seconds"] = timeout
	}
	b, _ := json.Marshal(req)
	status, _, m := s.post("/v1/sessions/"+id+"/exec", string(b))
	return status, m
}

func (s *testServer) newSession(body string) string {
	s.t.Helper()
	status, _, m := s.post("/v1/sessions", body)
	id, _ := m["session_id"].(string)
	if status != http.StatusCreated || !strings.HasPrefix(id, "ses_") || m["expires_at"] == nil {
		s.t.Fatalf("POST /v1/sessions: %d %v", status, m)
	}
	return id
}

func (s *testServer) do(method, path string) (int, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, nil)
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func wantCell(t *testing.T, status int, m map[string]any, want map[string]any) {
	t.Helper()
	if status != 200 {
		t.Fatalf("exec: %d %v", status, m)
	}
	for k, v := range want {
		if got := field(m, "result", k); fmt.Sprint(got) != fmt.Sprint(v) {
			t.Fatalf("result.%s = %v, want %v (answer %v)", k, got, v, m)
		}
	}
}

// TestServeSessions: a session through the real server keeps its state
// across calls, takes and gives files, survives a timed-out cell, ends
// with an OOM cell, and is listed, described and deleted.
func TestServeSessions(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	id := s.newSession(`{"files": {"data.csv": "x\n1\n2\n"}, "memory_mb": 256}`)

	status, m := s.sessionExec(id, "rows = open('data.csv').read().split()[1:]\nimport json", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": nil, "sessionAlive": true})
	status, m = s.sessionExec(id, "total = sum(map(int, rows))\nprint('total', total)", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "stdout": "total 3\n"})
	status, m = s.sessionExec(id, "json.dumps({'total': total, 'rows': len(rows)})", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": `'{"total": 3, "rows": 2}'`})
	if field(m, "session", "execs") != 3.0 || field(m, "session", "session_id") != id {
		t.Fatalf("session after three cells: %v", m["session"])
	}

	status, m = s.sessionExec(id, "undefined_name", 0)
	wantCell(t, status, m, map[string]any{"status": "nonzero_exit", "exitCode": 1, "error": "NameError: name 'undefined_name' is not defined", "sessionAlive": true})

	// Files in, files out.
	status, _, m = s.post("/v1/sessions/"+id+"/files", `{"files": {"more/y.txt": "40"}}`)
	if status != 200 || fmt.Sprint(m["written"]) != "[more/y.txt]" {
		t.Fatalf("upload: %d %v", status, m)
	}
	status, m = s.sessionExec(id, "open('out.txt', 'w').write(str(total + int(open('more/y.txt').read())))", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "2"})
	if status, b := s.do("GET", "/v1/sessions/"+id+"/files/out.txt"); status != 200 || string(b) != "43" {
		t.Fatalf("download: %d %q", status, b)
	}
	if status, b := s.do("GET", "/v1/sessions/"+id+"/files/nothing.txt"); status != 404 || !strings.Contains(string(b), `"not_found"`) {
		t.Fatalf("download of a missing file: %d %s", status, b)
	}

	// A cell past its timeout is interrupted; the next one works.
	status, m = s.sessionExec(id, "import time\nwhile True:\n    time.sleep(0.01)", 1)
	wantCell(t, status, m, map[string]any{"status": "timeout", "timedOut": true, "sessionAlive": true})
	if !strings.Contains(field(m, "result", "stderr").(string), "KeyboardInterrupt") {
		t.Errorf("interrupted cell's stderr: %q", field(m, "result", "stderr"))
	}
	status, m = s.sessionExec(id, "total * 2", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "6"})

	// Listed and described.
	status, _, m = s.get("/v1/sessions")
	if list, _ := m["sessions"].([]any); status != 200 || len(list) != 1 || field(list[0].(map[string]any), "session_id") != id {
		t.Fatalf("list: %d %v", status, m)
	}
	status, _, m = s.get("/v1/sessions/" + id)
	if status != 200 || m["memory_mb"] != 256.0 || m["busy"] != false || m["memory_bytes"].(float64) <= 0 {
		t.Fatalf("describe: %d %v", status, m)
	}
	status, _, m = s.get("/v1/health")
	if status != 200 || field(m, "sessions", "live") != 1.0 || field(m, "sessions", "idleMemoryBytes").(float64) <= 0 {
		t.Fatalf("health: %d %v", status, m["sessions"])
	}

	// Out of memory: the cell says so, and the session is gone.
	status, m = s.sessionExec(id, "b = bytearray(1 << 30)", 0)
	wantCell(t, status, m, map[string]any{"status": "oom", "sessionAlive": false})
	if ended, _ := field(m, "result", "sessionEnded").(string); !strings.Contains(ended, "memory") {
		t.Errorf("sessionEnded = %q", ended)
	}
	status, m = s.sessionExec(id, "1", 0)
	if status != 410 || field(m, "error", "code") != "session_ended" {
		t.Fatalf("exec after the OOM: %d %v", status, m)
	}

	// Deleted: gone at once.
	id = s.newSession(`{}`)
	if status, b := s.do("DELETE", "/v1/sessions/"+id); status != 200 || !strings.Contains(string(b), `"deleted":true`) {
		t.Fatalf("delete: %d %s", status, b)
	}
	status, _, m = s.get("/v1/sessions/" + id)
	if status != 410 || field(m, "error", "code") != "session_ended" {
		t.Fatalf("describe after delete: %d %v", status, m)
	}
	status, _, m = s.get("/v1/sessions/ses_neverexisted")
	if status != 404 || field(m, "error", "code") != "not_found" {
		t.Fatalf("unknown session: %d %v", status, m)
	}
}

// TestServeSessionFigures: a cell's open pyplot figures come back as PNGs.
func TestServeSessionFigures(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	id := s.newSession(`{"memory_mb": 512}`)
	status, m := s.sessionExec(id, "import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nNone", 60)
	wantCell(t, status, m, map[string]any{"status": "ok"})
	figs, _ := field(m, "result", "figures").([]any)
	if len(figs) != 1 {
		t.Fatalf("figures: %v", field(m, "result", "figures"))
	}
	fig := figs[0].(map[string]any)
	png, err := base64.StdEncoding.DecodeString(fig["data"].(string))
	if err != nil || fig["mimeType"] != "image/png" || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("figure: %v %v", fig["mimeType"], err)
	}
}

// TestServeSessionBusy: a second cell while one runs is refused with
// session_busy, and the session is described as busy.
func TestServeSessionBusy(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	id := s.newSession(`{}`)
	first := make(chan map[string]any, 1)
	go func() {
		_, m := s.sessionExec(id, "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\n'went'", 60)
		first <- m
	}()
	waitFor(t, "the session is busy", func() bool {
		_, _, m := s.get("/v1/sessions/" + id)
		return m["busy"] == true
	})
	status, m := s.sessionExec(id, "1", 0)
	if status != 409 || field(m, "error", "code") != "session_busy" {
		t.Fatalf("second cell: %d %v", status, m)
	}
	if status, _, m := s.post("/v1/sessions/"+id+"/files", `{"files": {"go": ""}}`); status != 200 {
		t.Fatalf("upload during a cell: %d %v", status, m)
	}
	if m := <-first; field(m, "result", "value") != "'went'" {
		t.Fatalf("first cell: %v", m)
	}
}

// TestServeSessionIdleReaped: a session idle past its timeout ends, and a
// call to it then says so.
func TestServeSessionIdleReaped(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	id := s.newSession(`{"idle_timeout_seconds": 1}`)
	var m map[string]any
	waitFor(t, "the idle session ends", func() bool {
		var status int
		status, _, m = s.get("/v1/sessions/" + id)
		return status == 410
	})
	if field(m, "error", "code") != "session_ended" || !strings.Contains(field(m, "error", "message").(string), "idle") {
		t.Fatalf("after the idle timeout: %v", m)
	}
}

// TestServeSessionLostAfterRestart: a session does not outlive its server;
// after a restart a call to it gets session_lost at once.
func TestServeSessionLostAfterRestart(t *testing.T) {
	bin, state, data := boxerBin(t), stateDir(t), t.TempDir()
	s := startServe(t, bin, state, data)
	id := s.newSession(`{}`)
	status, m := s.sessionExec(id, "x = 1", 0)
	wantCell(t, status, m, map[string]any{"status": "ok"})
	s.stop()

	s = startServe(t, bin, state, data)
	started := time.Now()
	status, m = s.sessionExec(id, "x", 0)
	if status != 410 || field(m, "error", "code") != "session_lost" {
		t.Fatalf("exec after restart: %d %v", status, m)
	}
	if d := time.Since(started); d > 5*time.Second {
		t.Errorf("session_lost took %v", d)
	}
	status, _, m = s.get("/v1/sessions/" + id)
	if status != 410 || field(m, "error", "code") != "session_lost" {
		t.Fatalf("describe after restart: %d %v", status, m)
	}
}

// keyed sends body (JSON, or nothing) to path with API key key.
func (s *testServer) keyed(key, method, path, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	status, _, m := decode(s.t, resp)
	return status, m
}

// fork forks session id and returns the new session's description.
func (s *testServer) fork(id string) map[string]any {
	s.t.Helper()
	status, _, m := s.post("/v1/sessions/"+id+"/fork", `{}`)
	if fid, _ := m["session_id"].(string); status != http.StatusCreated || !strings.HasPrefix(fid, "ses_") || fid == id {
		s.t.Fatalf("POST /v1/sessions/%s/fork: %d %v", id, status, m)
	}
	return m
}

// TestServeSessionFork: a fork holds its parent's variables, imports,
// open files and files, with its parent's limits, and from then on the
// two diverge. A session that cannot be copied is refused with
// fork_refused and goes on; a fork is a session like any other, counted
// and ended on its own.
func TestServeSessionFork(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	parent := s.newSession(`{"files": {"data.csv": "x\n1\n2\n"}, "memory_mb": 256, "idle_timeout_seconds": 120}`)
	status, m := s.sessionExec(parent, "import json\n"+
		"rows = [int(x) for x in open('data.csv').read().split()[1:]]\n"+
		"log = open('log.txt', 'w')\n"+
		"log.write('parent\\n')\n"+
		"log.flush()\n"+
		"sum(rows)", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "3"})

	f := s.fork(parent)
	child := f["session_id"].(string)
	if f["memory_mb"] != 256.0 || f["idle_timeout_seconds"] != 120.0 || f["execs"] != 0.0 {
		t.Fatalf("the fork's description: %v", f)
	}
	status, m = s.sessionExec(child, "rows.append(10)\nlog.write('child\\n')\nlog.flush()\njson.dumps(rows)", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": `'[1, 2, 10]'`})
	status, m = s.sessionExec(parent, "rows.append(20)\nlog.write('parent again\\n')\nlog.flush()\njson.dumps(rows)", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": `'[1, 2, 20]'`})
	for id, want := range map[string]string{parent: "parent\nparent again\n", child: "parent\nchild\n"} {
		if status, b := s.do("GET", "/v1/sessions/"+id+"/files/log.txt"); status != 200 || string(b) != want {
			t.Errorf("log.txt of %s: %d %q, want %q", id, status, b, want)
		}
	}

	// Refused while a thread of the session's runs; the session goes on,
	// and forks once the thread has ended.
	status, m = s.sessionExec(parent, "import threading\nstop = threading.Event()\nt = threading.Thread(target=stop.wait)\nt.start()", 0)
	wantCell(t, status, m, map[string]any{"status": "ok"})
	status, _, m = s.post("/v1/sessions/"+parent+"/fork", ``)
	if status != 409 || field(m, "error", "code") != "fork_refused" || !strings.Contains(field(m, "error", "message").(string), "thread") {
		t.Fatalf("a fork with a thread running: %d %v", status, m)
	}
	status, m = s.sessionExec(parent, "stop.set()\nt.join()\nlen(rows)", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "3"})
	s.fork(parent)

	for body, want := range map[string]string{`{"memory_mb": 64}`: "unknown field", `[]`: "JSON object"} {
		if status, _, m := s.post("/v1/sessions/"+parent+"/fork", body); status != 400 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("fork with body %s: %d %v, want %s", body, status, m, want)
		}
	}
	if status, _, m := s.post("/v1/sessions/ses_nosuchsession/fork", `{}`); status != 404 || field(m, "error", "code") != "not_found" {
		t.Errorf("fork of no session: %d %v", status, m)
	}

	// Three sessions now; ending the parent leaves its forks.
	if status, _ := s.do("DELETE", "/v1/sessions/"+parent); status != 200 {
		t.Fatalf("delete the parent: %d", status)
	}
	status, m = s.sessionExec(child, "sum(rows)", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "13"})
	status, _, m = s.get("/v1/health")
	if status != 200 || field(m, "sessions", "live") != 2.0 {
		t.Fatalf("health: %d %v", status, m["sessions"])
	}
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeSessionsApart: nothing of one session (its files in /work and
// /tmp, a process it left running, a socket it listens on, its uid) is
// visible to another session or to a one-shot run.
func TestServeSessionsApart(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	a := s.newSession(`{"files": {"a_secret.txt": "A"}}`)
	status, m := s.sessionExec(a, `import os, socket, subprocess, sys
open('/tmp/a_tmp', 'w').write('A')
srv = socket.socket()
srv.bind(('127.0.0.1', 7777))
srv.listen()
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)  # a_child'])
os.getuid()`, 0)
	wantCell(t, status, m, map[string]any{"status": "ok"})
	uidA := field(m, "result", "value")

	const probe = `import os, socket
seen = []
for p in ('a_secret.txt', '/tmp/a_tmp'):
    if os.path.exists(p):
        seen.append(p)
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        if b'a_child' in open('/proc/%s/cmdline' % pid, 'rb').read():
            seen.append('process ' + pid)
    except OSError:
        pass
try:
    socket.create_connection(('127.0.0.1', 7777), timeout=1)
    seen.append('port 7777')
except OSError:
    pass
print(seen, os.getuid())`
	b := s.newSession(`{}`)
	status, m = s.sessionExec(b, probe, 0)
	wantCell(t, status, m, map[string]any{"status": "ok"})
	if out := field(m, "result", "stdout").(string); !strings.HasPrefix(out, "[] ") || strings.TrimSpace(strings.TrimPrefix(out, "[] ")) == fmt.Sprint(uidA) {
		t.Errorf("another session saw %q (session A's uid %v)", out, uidA)
	}
	status, _, m = s.post("/v1/exec", execBody(probe))
	if status != 200 || !strings.HasPrefix(field(m, "result", "stdout").(string), "[] ") {
		t.Errorf("a one-shot run saw: %d %v", status, m)
	}
	// A still has all of it.
	status, m = s.sessionExec(a, "child.poll() is None and open('/tmp/a_tmp').read() == 'A'", 0)
	wantCell(t, status, m, map[string]any{"value": "True"})
}

// TestServeSessionKernelDies: a session whose interpreter dies between
// cells (caller code left a thread that ends it) is reported ended, not
// alive, and its next cell is refused rather than answered.
func TestServeSessionKernelDies(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	id := s.newSession(`{}`)
	status, m := s.sessionExec(id, "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os._exit(0))).start()", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "sessionAlive": true})
	waitFor(t, "the session is reported ended", func() bool {
		status, _, m = s.get("/v1/sessions/" + id)
		return status == 410
	})
	if field(m, "error", "code") != "session_ended" || !strings.Contains(field(m, "error", "message").(string), "interpreter exited") {
		t.Fatalf("after its interpreter died: %v", m)
	}
	status, m = s.sessionExec(id, "1", 0)
	if status != 410 || field(m, "error", "code") != "session_ended" {
		t.Fatalf("a cell after its interpreter died: %d %v", status, m)
	}
}

// TestServeSessionLimits tries each bound of a session from outside: the
// caps in all and per caller (here, per API key), a session's memory and
// lifetime, a cell's timeout. Each is refused with its code, and a
// session of one caller is nobody else's.
func TestServeSessionLimits(t *testing.T) {
	data := t.TempDir()
	var keys []string
	for _, name := range []string{"a", "b", "c"} {
		var out, errb bytes.Buffer
		if code := dispatch(context.Background(), []string{"keys", "add", "--name", name, "--data-dir", data}, &out, &errb); code != 0 {
			t.Fatalf("keys add: %d %s", code, errb.String())
		}
		keys = append(keys, strings.TrimSpace(out.String()))
	}
	s := startServe(t, boxerBin(t), stateDir(t), data, "--max-sessions", "2", "--max-sessions-per-caller", "1", "--session-max-memory", "256MiB")
	call := s.keyed
	status, m := call(keys[0], "POST", "/v1/sessions", `{}`)
	if status != 201 {
		t.Fatalf("first session: %d %v", status, m)
	}
	mine := m["session_id"].(string)
	if status, m := call(keys[0], "POST", "/v1/sessions", `{}`); status != 429 || field(m, "error", "code") != "rate_limited" {
		t.Errorf("a second session of one caller: %d %v", status, m)
	}
	if status, m := call(keys[1], "POST", "/v1/sessions", `{}`); status != 201 {
		t.Fatalf("another caller's first session: %d %v", status, m)
	}
	if status, m := call(keys[2], "POST", "/v1/sessions", `{}`); status != 503 || field(m, "error", "code") != "busy" {
		t.Errorf("past the server's cap: %d %v", status, m)
	}
	// Another key cannot reach it, by any route.
	if status, m := call(keys[0], "POST", "/v1/sessions/"+mine+"/fork", `{}`); status != 429 || field(m, "error", "code") != "rate_limited" {
		t.Errorf("a fork past the caller's cap: %d %v", status, m)
	}
	for _, r := range [][2]string{{"POST", "/exec"}, {"GET", ""}, {"DELETE", ""}, {"GET", "/files/x"}, {"POST", "/files"}, {"POST", "/fork"}} {
		body := `{"code": "1", "files": {"x": "y"}}`
		if r[1] == "/fork" {
			body = `{}`
		} else if r[1] == "/files" {
			body = `{"files": {"x": "y"}}`
		} else if r[1] == "/exec" {
			body = `{"code": "1"}`
		}
		if status, m := call(keys[1], r[0], "/v1/sessions/"+mine+r[1], body); status != 404 || field(m, "error", "code") != "not_found" {
			t.Errorf("%s %s with another key: %d %v", r[0], r[1], status, m)
		}
	}
	for body, want := range map[string]string{
		`{"code": "1", "timeout_seconds": 301}`:          "timeout_seconds",
		`{"code": "1", "timeout_seconds": 0}`:            "timeout_seconds",
		`{"code": "` + strings.Repeat("x", 70000) + `"}`: "code_too_large",
	} {
		status, m := call(keys[0], "POST", "/v1/sessions/"+mine+"/exec", body)
		if status/100 != 4 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("cell %.60s: %d %v, want %s", body, status, m, want)
		}
	}
	if status, m := call(keys[0], "DELETE", "/v1/sessions/"+mine, ""); status != 200 {
		t.Fatalf("delete: %d %v", status, m)
	}
	for body, want := range map[string]string{
		`{"memory_mb": 512}`:              "memory_mb",
		`{"idle_timeout_seconds": 0}`:     "idle_timeout_seconds",
		`{"max_lifetime_seconds": 90000}`: "max_lifetime_seconds",
		`{"cpus": 4}`:                     "cpus",
	} {
		if status, m := call(keys[0], "POST", "/v1/sessions", body); status != 400 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("session %s: %d %v, want %s", body, status, m, want)
		}
	}
}

// TestServeDefaultPoolRotatesBesideSessions: with the pool's default
// lanes (the pre-imports, the lean one, pytest's and matplotlib's), every
// lane's zygote is replaced while the old one still serves, and a session
// starts its own zygote meanwhile: the engine has ids for all of them.
func TestServeDefaultPoolRotatesBesideSessions(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir(), "--pool-preimport", "numpy,pandas,matplotlib.pyplot,pytest",
		"--pool-min", "1", "--pool-rotate-after", "2")
	// One run a lane: its refill then forks the lane's second child, and
	// the lane rotates.
	for _, code := range []string{"print(4)", "import pandas; print(4)", "import pytest; print(4)", "import matplotlib; print(4)"} {
		status, _, m := s.post("/v1/exec", fmt.Sprintf(`{"code": %q}`, code))
		if status != 200 || field(m, "result", "stdout") != "4\n" {
			t.Fatalf("%q: %d %v", code, status, m)
		}
	}
	id := s.newSession(`{}`)
	status, m := s.sessionExec(id, "2 + 2", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "4"})
	rotated := map[string]bool{}
	waitFor(t, "every lane rotated", func() bool {
		for _, line := range strings.Split(s.log.String(), "\n") {
			if strings.Contains(line, `"msg":"zygote rotated"`) {
				var l struct{ Lane string }
				if json.Unmarshal([]byte(line), &l) == nil {
					rotated[l.Lane] = true
				}
			}
			if strings.Contains(line, "live already") {
				t.Fatalf("the engine ran out of zygote ids: %s", line)
			}
		}
		return len(rotated) == 4
	})
}
