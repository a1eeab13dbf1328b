package main

import (
	"crypto/hmac"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"boxer/internal/webhook"
)

// TestServeAsyncJob: an async run answers 202 at once; GET /v1/jobs shows
// it running, then its result; the webhook gets the same result, signed
// with the server's secret.
func TestServeAsyncJob(t *testing.T) {
	const secret = "a-test-secret-of-32-bytes-length"
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer receiver.Close()

	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir(), "--webhook-secret", secret, "--webhook-allow-private")
	started := time.Now()
	status, _, m := s.post("/v1/run-python", `{"async": true, "webhook_url": "`+receiver.URL+`/hook",
		"files": {"main.py": "import os, time\nwhile not os.path.exists('/tmp/never'):\n    time.sleep(0.01)\n    if time.time() > float(open('t').read()): break\nprint('done')", "t": "`+deadline(4*time.Second)+`"}}`)
	id, _ := m["job_id"].(string)
	if status != 202 || !strings.HasPrefix(id, "job_") || (m["status"] != "queued" && m["status"] != "running") {
		t.Fatalf("async: %d %v", status, m)
	}
	if d := time.Since(started); d > time.Second {
		t.Errorf("the 202 took %v: not at once", d)
	}
	status, _, m = s.get("/v1/jobs/" + id)
	if status != 202 || m["status"] != "running" && m["status"] != "queued" {
		t.Fatalf("while it runs: %d %v", status, m)
	}
	var result map[string]any
	waitFor(t, "the async job finishes", func() bool {
		status, _, result = s.get("/v1/jobs/" + id)
		return status == 200
	})
	if result["stdout"] != "done\n" || result["job_id"] != id {
		t.Fatalf("result: %v", result)
	}
	r, body := <-got, <-bodies
	sig := r.Header.Get("X-Boxer-Signature")
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(unix, 0)) > time.Minute {
		t.Errorf("signature's time %q", ts)
	}
	if want := webhook.Sign([]byte(secret), body, time.Unix(unix, 0)); !hmac.Equal([]byte(sig), []byte(want)) {
		t.Errorf("signature %q, want %q", sig, want)
	}
	if r.URL.Path != "/hook" || r.Header.Get("X-Boxer-Job-Id") != id || !strings.Contains(string(body), `"stdout":"done\n"`) {
		t.Errorf("webhook: %s %s %s", r.URL.Path, r.Header.Get("X-Boxer-Job-Id"), body)
	}
}

// TestServeAsyncRefusals: a webhook to this host is refused unless the
// operator allows private addresses; a server without a secret sends
// none; async does not stream.
func TestServeAsyncRefusals(t *testing.T) {
	s := startServe(t, boxerBin(t), stateDir(t), t.TempDir(), "--webhook-secret", "a-test-secret-of-32-bytes-length")
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost/x", "http://[::1]/x", "http://10.0.0.1/x", "ftp://example.com/x", "http://user:pw@example.com/"} {
		status, _, m := s.post("/v1/run-python", `{"async": true, "webhook_url": "`+u+`", "files": {"main.py": "1"}}`)
		if status != 400 || !strings.Contains(field(m, "error", "message").(string), "webhook_url") {
			t.Errorf("webhook %s: %d %v", u, status, m)
		}
	}
	status, _, m := s.post("/v1/run-python", `{"webhook_url": "http://192.0.2.1/x", "files": {"main.py": "1"}}`)
	if status != 400 || !strings.Contains(field(m, "error", "message").(string), "async") {
		t.Errorf("webhook without async: %d %v", status, m)
	}

	s = startServe(t, boxerBin(t), stateDir(t), t.TempDir())
	status, _, m = s.post("/v1/run-python", `{"async": true, "webhook_url": "http://192.0.2.1/x", "files": {"main.py": "1"}}`)
	if status != 400 || !strings.Contains(field(m, "error", "message").(string), "--webhook-secret") {
		t.Errorf("no secret: %d %v", status, m)
	}
}

// deadline is the Unix time d from now, as text for a job to read.
func deadline(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).Unix()+1, 10) }
