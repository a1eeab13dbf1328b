package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"boxer"
)

func TestErrorTable(t *testing.T) {
	tests := []struct {
		code   string
		status int
	}{
		{boxer.ECodeInvalidJSON, 400},
		{boxer.ECodeInvalidRequest, 400},
		{boxer.ECodeUnsupportedLanguage, 400},
		{boxer.ECodeUnauthorized, 401},
		{boxer.ECodePaymentRequired, 402},
		{boxer.ECodeForbiddenHost, 403},
		{boxer.ECodeRateLimited, 429},
		{boxer.ECodeNotFound, 404},
		{boxer.ECodeMethodNotAllowed, 405},
		{boxer.ECodeJobIDConflict, 409},
		{boxer.ECodeInvalidPaymentID, 400},
		{boxer.ECodePaymentIDConflict, 409},
		{boxer.ECodePaymentIDInFlight, 409},
		{boxer.ECodeCodeTooLarge, 413},
		{boxer.ECodePayloadTooLarge, 413},
		{boxer.ECodeUnsupportedMedia, 415},
		{boxer.ECodeBusy, 503},
		{boxer.ECodeUnavailable, 503},
		{boxer.ECodeInternal, 500},
		{codeCanceled, 499},
		{"no_such_code", 500},
	}
	for _, tt := range tests {
		if got := httpStatus(tt.code); got != tt.status {
			t.Errorf("httpStatus(%q) = %d, want %d", tt.code, got, tt.status)
		}
	}
}

func TestRoutes(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	tests := []struct {
		name, method, path string
		status             int
		code               string // error code, "" for success
		allow              string
	}{
		{"unknown path", "GET", "/nope", 404, boxer.ECodeNotFound, ""},
		{"trailing slash is another path", "POST", "/v1/exec/", 404, boxer.ECodeNotFound, ""},
		{"GET on exec", "GET", "/v1/exec", 405, boxer.ECodeMethodNotAllowed, "POST"},
		{"PUT on run-python", "PUT", "/v1/run-python", 405, boxer.ECodeMethodNotAllowed, "POST"},
		{"POST on healthz", "POST", "/healthz", 405, boxer.ECodeMethodNotAllowed, "GET, HEAD"},
		{"DELETE on a job", "DELETE", "/v1/jobs/abc", 405, boxer.ECodeMethodNotAllowed, "GET, HEAD"},
		{"healthz", "GET", "/healthz", 200, "", ""},
		{"healthz HEAD", "HEAD", "/healthz", 200, "", ""},
		{"readyz", "GET", "/readyz", 200, "", ""},
		{"health", "GET", "/v1/health", 200, "", ""},
		{"unknown job", "GET", "/v1/jobs/abc", 404, boxer.ECodeNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := ts.do(tt.method, tt.path, "")
			if tt.code != "" {
				wantError(t, rec, tt.status, tt.code)
			} else if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if got := rec.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	tests := []struct {
		name     string
		incoming string
		kept     bool
	}{
		{"none", "", false},
		{"sane", "req-123_abc.DEF:9", true},
		{"space", "req 123", false},
		{"newline", "a\nb", false},
		{"too long", strings.Repeat("a", 129), false},
		{"longest kept", strings.Repeat("a", 128), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var headers []string
			if tt.incoming != "" {
				headers = []string{"X-Request-Id", tt.incoming}
			}
			// An error path: the id must be there too.
			rec := ts.do("GET", "/nope", "", headers...)
			got := rec.Header().Get("X-Request-Id")
			if tt.kept && got != tt.incoming {
				t.Fatalf("X-Request-Id = %q, want the incoming %q", got, tt.incoming)
			}
			if !tt.kept && (got == "" || got == tt.incoming || requestID(got) != got) {
				t.Fatalf("X-Request-Id = %q, want a fresh sane id", got)
			}
		})
	}
	a := ts.do("GET", "/healthz", "").Header().Get("X-Request-Id")
	b := ts.do("GET", "/healthz", "").Header().Get("X-Request-Id")
	if a == b {
		t.Fatalf("two requests got the same generated id %q", a)
	}
}

func TestInternalErrorHidesDetail(t *testing.T) {
	secret := "open /var/lib/boxer/sandbox-42/rootfs: permission denied"
	tests := []struct {
		name string
		fn   func(context.Context, *boxer.Job) (*boxer.Result, error)
	}{
		{"runner error", func(context.Context, *boxer.Job) (*boxer.Result, error) { return nil, errors.New(secret) }},
		{"engine lost the run", func(context.Context, *boxer.Job) (*boxer.Result, error) {
			return &boxer.Result{Status: boxer.StatusInternalError, Signal: secret}, nil
		}},
		{"nil result", func(context.Context, *boxer.Job) (*boxer.Result, error) { return nil, nil }},
		{"panic", func(context.Context, *boxer.Job) (*boxer.Result, error) { panic(secret) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, Config{}, nil)
			ts.runner.set(tt.fn)
			rec := ts.do("POST", "/v1/exec", `{"code":"print(1)"}`, "X-Request-Id", "rid-500")
			e := wantError(t, rec, 500, boxer.ECodeInternal)
			if !strings.Contains(e.Message, "rid-500") {
				t.Errorf("message %q does not name the request id", e.Message)
			}
			if strings.Contains(rec.Body.String(), "sandbox-42") {
				t.Errorf("internal detail leaked to the caller: %s", rec.Body)
			}
			wantLogged := "sandbox-42"
			if tt.name == "nil result" {
				wantLogged = "neither a result nor an error"
			}
			if logs := ts.logs.String(); !strings.Contains(logs, wantLogged) || !strings.Contains(logs, "rid-500") {
				t.Errorf("the detail and request id are not in the log:\n%s", logs)
			}
		})
	}
}

func TestRunnerBusyPassesThrough(t *testing.T) {
	tests := []struct {
		code   string
		status int
	}{
		{boxer.ECodeBusy, 503},
		{boxer.ECodeUnavailable, 503},
		{boxer.ECodeInvalidRequest, 500}, // not the engine's to say
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			ts := newTestServer(t, Config{}, nil)
			ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) {
				return nil, boxer.Errorf(tt.code, "pool detail /dev/shm/x")
			})
			rec := ts.do("POST", "/v1/exec", `{"code":"1"}`)
			want := tt.code
			if tt.status == 500 {
				want = boxer.ECodeInternal
			}
			e := wantError(t, rec, tt.status, want)
			if strings.Contains(e.Message, "/dev/shm") {
				t.Errorf("engine text leaked: %q", e.Message)
			}
			if tt.status == 503 && rec.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
}

func TestContentType(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	tests := []struct {
		name    string
		headers []string
		status  int
	}{
		{"json", []string{"Content-Type", "application/json"}, 200},
		{"json utf-8", []string{"Content-Type", "application/json; charset=UTF-8"}, 200},
		{"+json", []string{"Content-Type", "application/vnd.boxer+json"}, 200},
		{"none", []string{"Content-Type", ""}, 200},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415},
		{"text", []string{"Content-Type", "text/plain"}, 415},
		{"latin-1", []string{"Content-Type", "application/json; charset=iso-8859-1"}, 415},
		{"malformed", []string{"Content-Type", "application/json; charset"}, 415},
		{"gzip", []string{"Content-Encoding", "gzip"}, 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := ts.do("POST", "/v1/exec", `{"code":"print(2 + 2)"}`, tt.headers...)
			if tt.status == 415 {
				wantError(t, rec, 415, boxer.ECodeUnsupportedMedia)
			} else if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
		})
	}
}

func TestAccessLog(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	ts.do("POST", "/v1/exec", `{"code":"print(2 + 2)"}`, "X-Request-Id", "log-1")
	ts.do("POST", "/v1/exec", `{"code":1}`, "X-Request-Id", "log-2")
	lines := ts.logLines("request")
	if len(lines) != 2 {
		t.Fatalf("%d access log lines, want 2:\n%s", len(lines), ts.logs)
	}
	want := []map[string]any{
		{"method": "POST", "path": "/v1/exec", "status": float64(200), "outcome": "ok", "request_id": "log-1"},
		{"method": "POST", "path": "/v1/exec", "status": float64(400), "outcome": "invalid_request", "request_id": "log-2"},
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
		if _, ok := lines[i]["duration"]; !ok {
			t.Errorf("line %d has no duration", i)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	tests := []struct {
		name string
		cfg  Config
		deps Deps
	}{
		{"no runner", Config{}, Deps{Store: ts.store}},
		{"no store", Config{}, Deps{Runner: ts.runner}},
		{"negative slots", Config{Slots: -1}, Deps{Runner: ts.runner, Store: ts.store}},
		{"cpus over max", Config{ExecLimits: boxer.Limits{CPUs: 3}}, Deps{Runner: ts.runner, Store: ts.store}},
		{"body under code", Config{MaxCodeBytes: 1 << 20}, Deps{Runner: ts.runner, Store: ts.store}},
		{"node timeout too short", Config{NodeTimeout: 599 * time.Millisecond}, Deps{Runner: ts.runner, Store: ts.store}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := New(tt.cfg, tt.deps); err == nil {
				s.Shutdown(context.Background())
				t.Fatal("New succeeded, want an error")
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ExecLimits.CPUs != 0.5 || c.ExecLimits.MemoryBytes != 512<<20 || c.ExecLimits.WallTime.Seconds() != 30 {
		t.Errorf("exec limits = %+v, want the seed's 0.5 CPU, 512 MiB, 30 s", c.ExecLimits)
	}
	wantRun := c.ExecLimits
	wantRun.CPUs = 1
	if c.RunLimits != wantRun {
		t.Errorf("run limits = %+v, want exec's but a whole CPU", c.RunLimits)
	}
	if c.MaxCodeBytes != 65536 || c.NodeTimeout != 30*time.Second || c.JobRetention.Hours() != 24 || c.Slots < 1 || c.Queue != 1024 || c.QueueBytes != 256<<20 || c.MaxQueueWait != 10*time.Second {
		t.Errorf("defaults = %+v", c)
	}
	if q := (Config{NoQueue: true, Queue: 5}).WithDefaults().Queue; q != 0 {
		t.Errorf("NoQueue left a queue of %d", q)
	}
}

// TestPaymentHook: the hook wraps the priced routes only (the two run
// routes, a session's creation and its cells), after the method
// check (a wrong method is not asked to pay), and SetPayer reaches the log.
func TestPaymentHook(t *testing.T) {
	var wrapped []string
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			wrapped = append(wrapped, route)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Payment") == "" {
					w.WriteHeader(http.StatusPaymentRequired)
					return
				}
				SetPayer(r, r.Header.Get("X-Payment"))
				next.ServeHTTP(w, r)
			})
		}
	})
	if strings.Join(wrapped, ",") != "/v1/exec,/v1/run-python,/v1/sessions,/v1/sessions/{session_id}/exec,/v1/sessions/{session_id}/fork" {
		t.Fatalf("payment hook wrapped %v, want the priced routes", wrapped)
	}
	if rec := ts.do("GET", "/v1/exec", ""); rec.Code != 405 {
		t.Fatalf("GET /v1/exec = %d, want 405 before payment", rec.Code)
	}
	if rec := ts.do("POST", "/v1/exec", `{"code":"1"}`); rec.Code != 402 {
		t.Fatalf("unpaid POST = %d, want 402", rec.Code)
	}
	if rec := ts.do("POST", "/v1/exec", `{"code":"1"}`, "X-Payment", "0xabc"); rec.Code != 200 {
		t.Fatalf("paid POST = %d, want 200", rec.Code)
	}
	lines := ts.logLines("request")
	if got := lines[len(lines)-1]["payer"]; got != "0xabc" {
		t.Fatalf("access log payer = %v, want 0xabc", got)
	}
	if rec := ts.do("GET", "/healthz", ""); rec.Code != 200 {
		t.Fatalf("free route = %d, want 200", rec.Code)
	}
}

// The payment layer's own failures go out through the api's error writer:
// the one envelope, with success false, the status of the code's table and
// Retry-After on a 503, like every other error.
func TestPaymentFailureIsTheAPIsError(t *testing.T) {
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Payment = func(_ string, _ http.Handler, fail ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fail(w, r, boxer.Errorf(boxer.ECodeUnavailable, "payment facilitator unavailable; you were not charged"))
			})
		}
	})
	rec := ts.do("POST", "/v1/exec", `{"code":"1"}`)
	want := `{"success":false,"error":{"code":"unavailable","message":"payment facilitator unavailable; you were not charged"}}`
	if rec.Code != 503 || strings.TrimSpace(rec.Body.String()) != want || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("got %d %s (Retry-After %q), want 503 %s with Retry-After", rec.Code, rec.Body, rec.Header().Get("Retry-After"), want)
	}
}

// Four runs a CPU, no more than one a GiB of memory, but never fewer than
// one a CPU.
func TestSlotsFor(t *testing.T) {
	for _, c := range []struct {
		cpus   int
		memory uint64
		want   int
	}{
		{2, 24 << 30, 8},
		{2, 4 << 30, 4},
		{64, 16 << 30, 64},
		{1, 512 << 20, 1},
		{2, 2<<30 - 64<<20, 2},
		{4, 16<<30 - 1, 15},
	} {
		if got := slotsFor(c.cpus, c.memory); got != c.want {
			t.Errorf("slotsFor(%d, %d) = %d, want %d", c.cpus, c.memory, got, c.want)
		}
	}
	if DefaultSlots() < 1 {
		t.Fatalf("DefaultSlots() = %d", DefaultSlots())
	}
}
