package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"boxer"
	"boxer/internal/store"
)

// fakeRunner records the jobs it is given and answers with fn (default: the
// seed's print(2 + 2) result).
type fakeRunner struct {
	mu   sync.Mutex
	jobs []*boxer.Job
	fn   func(ctx context.Context, job *boxer.Job) (*boxer.Result, error)
}

func (f *fakeRunner) Run(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
	f.mu.Lock()
	f.jobs = append(f.jobs, job)
	fn := f.fn
	f.mu.Unlock()
	if fn == nil {
		return fourResult(), nil
	}
	return fn(ctx, job)
}

func (f *fakeRunner) set(fn func(ctx context.Context, job *boxer.Job) (*boxer.Result, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobs)
}

func (f *fakeRunner) last() *boxer.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.jobs) == 0 {
		return nil
	}
	return f.jobs[len(f.jobs)-1]
}

// fourResult is what the seed's example shows for print(2 + 2).
func fourResult() *boxer.Result {
	return &boxer.Result{
		Status:     boxer.StatusOK,
		ExitCode:   0,
		Wall:       210 * time.Millisecond,
		CPU:        35 * time.Millisecond,
		MemoryPeak: 9 << 20,
		Stdout:     boxer.Output{Data: []byte("4\n"), Bytes: 2},
		Timing:     boxer.Timing{Acquire: 3 * time.Millisecond, Run: 210 * time.Millisecond, Collect: 2 * time.Millisecond},
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixedClock reads a settable time.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type testServer struct {
	*Server
	t      *testing.T
	runner *fakeRunner
	store  *store.Store
	dbPath string
	logs   *syncBuffer
	clock  *fixedClock
}

// newTestServer builds a Server on a fake runner and a real store in a
// temporary directory, with a fixed clock; edit tweaks cfg and deps first.
func newTestServer(t *testing.T, cfg Config, edit func(*Deps)) *testServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boxer.db")
	return newTestServerAt(t, path, cfg, edit)
}

func newTestServerAt(t *testing.T, dbPath string, cfg Config, edit func(*Deps)) *testServer {
	t.Helper()
	clock := &fixedClock{t: time.Date(2026, 9, 2, 21, 46, 45, 571_000_000, time.UTC)}
	st, err := store.Open(dbPath, store.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, runner: &fakeRunner{}, store: st, dbPath: dbPath, logs: &syncBuffer{}, clock: clock}
	deps := Deps{
		Runner: ts.runner,
		Store:  st,
		Logger: slog.New(slog.NewJSONHandler(ts.logs, nil)),
		Now:    clock.Now,
	}
	if edit != nil {
		edit(&deps)
	}
	if cfg.Slots == 0 {
		cfg.Slots = 2
	}
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = srv
	t.Cleanup(ts.close)
	return ts
}

// close shuts the server down and closes its store; safe to call twice.
func (ts *testServer) close() {
	ts.Shutdown(context.Background())
	ts.store.Close()
}

// do sends one request through the whole handler and returns the response.
// headers are name, value pairs; a POST with a body gets application/json
// unless headers set a Content-Type.
func (ts *testServer) do(method, path, body string, headers ...string) *httptest.ResponseRecorder {
	ts.t.Helper()
	return ts.doCtx(context.Background(), method, path, body, headers...)
}

func (ts *testServer) doCtx(ctx context.Context, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequestWithContext(ctx, method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	ts.ServeHTTP(rec, req)
	checkAgainstDoc(ts.t, req, rec)
	return rec
}

// apiError decodes an error envelope, failing the test if it is not one.
func apiError(t *testing.T, rec *httptest.ResponseRecorder) boxer.Error {
	t.Helper()
	var body struct {
		Success *bool        `json:"success"`
		Error   *boxer.Error `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Success == nil || *body.Success || body.Error == nil {
		t.Fatalf("not an error envelope (status %d): %s", rec.Code, rec.Body.String())
	}
	return *body.Error
}

// wantError checks status and error code of a response.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) boxer.Error {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body.String())
	}
	e := apiError(t, rec)
	if e.Code != code {
		t.Fatalf("error code = %q, want %q (message %q)", e.Code, code, e.Message)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	return e
}

// logLines parses the JSON log lines with the given msg.
func (ts *testServer) logLines(msg string) []map[string]any {
	ts.t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(ts.logs.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			ts.t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
