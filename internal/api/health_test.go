package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"boxer"
)

func TestHealthz(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	rec := ts.do("GET", "/healthz", "")
	if rec.Code != 200 || rec.Body.String() != `{"status":"ok"}` {
		t.Fatalf("GET /healthz = %d %s", rec.Code, rec.Body)
	}
}

func TestReadyz(t *testing.T) {
	var ready error
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Ready = func(context.Context) error { return ready }
	})
	if rec := ts.do("GET", "/readyz", ""); rec.Code != 200 || rec.Body.String() != `{"status":"ready"}` {
		t.Fatalf("ready: %d %s", rec.Code, rec.Body)
	}
	ready = errors.New("clone: operation not permitted")
	rec := ts.do("GET", "/readyz", "")
	e := wantError(t, rec, 503, boxer.ECodeUnavailable)
	if strings.Contains(e.Message, "clone") {
		t.Errorf("detail leaked: %q", e.Message)
	}
	if !strings.Contains(ts.logs.String(), "operation not permitted") {
		t.Error("the reason is not logged")
	}
}

func TestHealthFigures(t *testing.T) {
	ts := newTestServer(t, Config{Version: "1.2.3"}, func(d *Deps) {
		d.PythonVersion = "3.11.2"
		d.Payment = func(_ string, next http.Handler, _ ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch p := r.Header.Get("X-Payer"); p {
				case "":
					w.WriteHeader(http.StatusPaymentRequired)
				case "free":
					next.ServeHTTP(w, r)
				default:
					SetPayer(r, p)
					next.ServeHTTP(w, r)
				}
			})
		}
	})

	empty := ts.do("GET", "/v1/health", "")
	want := `{"status":"ok","version":"1.2.3","pythonVersion":"3.11.2","startedAt":"2026-09-02T21:46:45.571Z",` +
		`"uptimeSeconds":0,"runsTotal":0,"successRate":null,"p50DurationMs":null,"recentRuns":0,"calls30d":0,` +
		`"uniquePayers30d":0,"lastCalledAt":null,"slots":2,"running":0,"queued":0,"sessions":null}`
	if empty.Code != 200 || empty.Body.String() != want {
		t.Fatalf("empty health =\n%s\nwant\n%s", empty.Body, want)
	}

	durations := []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	var mu sync.Mutex
	i := 0
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) {
		mu.Lock()
		d := durations[i]
		i++
		mu.Unlock()
		ts.clock.Advance(d) // the run takes d on the server's clock
		return fourResult(), nil
	})
	calls := []struct{ payer, body string }{
		{"0xaaa", `{"code":"1"}`},
		{"0xbbb", `{"code":"1"}`},
		{"0xaaa", `{"code":"1"}`},
		{"0xaaa", `{"code":1}`}, // 400: a call, not a run, not in the rate
		{"", `{"code":"1"}`},    // 402: not a call
	}
	for _, c := range calls {
		ts.do("POST", "/v1/exec", c.body, "X-Payer", c.payer)
	}
	ts.clock.Advance(time.Hour)
	ts.do("POST", "/v1/run-python", `{"files":{"main.py":"x"},"job_id":"j"}`, "X-Payer", "free")
	ts.do("POST", "/v1/run-python", `{"files":{"main.py":"x"},"job_id":"j"}`, "X-Payer", "free") // replay: a call, not a run
	last := ts.clock.Now()                                                                       // the replay started then: it does not move the clock

	rec := ts.do("GET", "/v1/health", "")
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// The fake clock moves only inside the runner, so the four runs'
	// recorded durations are exactly 300, 100, 200 and 400 ms: the
	// nearest-rank median is 200 ms. Six calls: three runs and a 400 on
	// /v1/exec (the 402 is not one), a run and a replay on /v1/run-python.
	wantFields := map[string]any{
		"runsTotal":       3.0 + 1,
		"successRate":     1.0,
		"p50DurationMs":   200.0,
		"recentRuns":      4.0,
		"calls30d":        6.0,
		"uniquePayers30d": 2.0,
		"lastCalledAt":    last.UTC().Format(timeFormat),
		"uptimeSeconds":   3601.0, // an hour and the four runs' second
	}
	for k, v := range wantFields {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
}

// recordingMetrics is a Metrics that remembers what it was told.
type recordingMetrics struct {
	mu       sync.Mutex
	requests []string
	runs     []string
	maxRuns  int
}

func (m *recordingMetrics) ObserveRequest(route string, status int, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, route+" "+http.StatusText(status))
}

func (m *recordingMetrics) ObserveRun(route string, status boxer.Status, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, route+" "+string(status))
}

func (m *recordingMetrics) SetRuns(running, _ int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maxRuns = max(m.maxRuns, running)
}

func TestMetrics(t *testing.T) {
	m := &recordingMetrics{}
	ts := newTestServer(t, Config{}, func(d *Deps) { d.Metrics = m })
	ts.do("POST", "/v1/exec", `{"code":"1"}`)
	ts.do("POST", "/v1/run-python", `{"files":{"main.py":"1"}}`)
	ts.do("GET", "/v1/jobs/nope", "")
	ts.do("GET", "/nowhere", "")
	wantReq := []string{"/v1/exec OK", "/v1/run-python OK", "/v1/jobs/{job_id} Not Found", "other Not Found"}
	wantRun := []string{"/v1/exec ok", "/v1/run-python ok"}
	m.mu.Lock()
	defer m.mu.Unlock()
	if strings.Join(m.requests, ",") != strings.Join(wantReq, ",") {
		t.Errorf("requests = %v, want %v", m.requests, wantReq)
	}
	if strings.Join(m.runs, ",") != strings.Join(wantRun, ",") {
		t.Errorf("runs = %v, want %v", m.runs, wantRun)
	}
	if m.maxRuns != 1 {
		t.Errorf("max running reported = %d, want 1", m.maxRuns)
	}
}
