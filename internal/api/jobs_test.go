package api

import (
	"boxer/internal/store"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"boxer"
)

const jobBody = `{"files":{"main.py":"print(2 + 2)"},"job_id":"job-42"}`

func TestJobReplayAndConflict(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	first := ts.do("POST", "/v1/run-python", jobBody)
	if first.Code != 200 {
		t.Fatalf("first run: %d %s", first.Code, first.Body)
	}
	steps := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   string
	}{
		{"same request replays", "POST", "/v1/run-python", jobBody, 200, ""},
		{"same request, other spelling", "POST", "/v1/run-python", `{"job_id":"job-42","files":{"./main.py":"print(2 + 2)"},"stdin":""}`, 200, ""},
		{"GET returns it", "GET", "/v1/jobs/job-42", "", 200, ""},
		{"other request conflicts", "POST", "/v1/run-python", `{"files":{"main.py":"print(3)"},"job_id":"job-42"}`, 409, boxer.ECodeJobIDConflict},
		{"other limits conflict", "POST", "/v1/run-python", `{"files":{"main.py":"print(2 + 2)"},"job_id":"job-42","timeout_seconds":5}`, 409, boxer.ECodeJobIDConflict},
		{"unknown job", "GET", "/v1/jobs/job-43", "", 404, boxer.ECodeNotFound},
		{"impossible job id", "GET", "/v1/jobs/a%20b", "", 404, boxer.ECodeNotFound},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			rec := ts.do(st.method, st.path, st.body)
			if st.code != "" {
				wantError(t, rec, st.status, st.code)
				return
			}
			if rec.Code != st.status || rec.Body.String() != first.Body.String() {
				t.Fatalf("got %d %s\nwant %d with the first response's bytes %s", rec.Code, rec.Body, st.status, first.Body)
			}
		})
	}
	if n := ts.runner.count(); n != 1 {
		t.Fatalf("runner ran %d times, want 1", n)
	}
	lines := ts.logLines("request")
	if got := lines[1]["outcome"]; got != "replay" {
		t.Errorf("outcome of a replay = %v, want replay", got)
	}
}

func TestJobReplaySurvivesRestart(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	first := ts.do("POST", "/v1/run-python", jobBody)
	if first.Code != 200 {
		t.Fatalf("first run: %d %s", first.Code, first.Body)
	}
	ts.close()

	ts2 := newTestServerAt(t, ts.dbPath, Config{}, nil)
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/run-python", jobBody},
		{"GET", "/v1/jobs/job-42", ""},
	} {
		rec := ts2.do(req.method, req.path, req.body)
		if rec.Code != 200 || rec.Body.String() != first.Body.String() {
			t.Fatalf("%s %s after restart: %d %s\nwant %s", req.method, req.path, rec.Code, rec.Body, first.Body)
		}
	}
	if n := ts2.runner.count(); n != 0 {
		t.Fatalf("the restarted server ran the job %d times, want 0", n)
	}
}

func TestJobFailureReleasesClaim(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) {
		return nil, errors.New("cgroup setup failed")
	})
	wantError(t, ts.do("POST", "/v1/run-python", jobBody), 500, boxer.ECodeInternal)
	wantError(t, ts.do("GET", "/v1/jobs/job-42", ""), 404, boxer.ECodeNotFound)

	ts.runner.set(nil)
	if rec := ts.do("POST", "/v1/run-python", jobBody); rec.Code != 200 {
		t.Fatalf("retry after an internal failure: %d %s", rec.Code, rec.Body)
	}
	if n := ts.runner.count(); n != 2 {
		t.Fatalf("runner ran %d times, want 2 (the failure and the retry)", n)
	}
}

// TestConcurrentJobRunsOnce: many requests with one job_id at once; the
// runner is held until every other request is waiting, so they really
// overlap. One run; every caller gets its bytes.
func TestConcurrentJobRunsOnce(t *testing.T) {
	const clients = 8
	// After the run, a woken waiter may wait once more on another woken
	// waiter that took ownership only to replay: room for every case.
	waiting := make(chan struct{}, clients*clients)
	ts := newTestServer(t, Config{}, nil)
	ts.onWait = func() { waiting <- struct{}{} }
	started := make(chan struct{})
	release := make(chan struct{})
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) {
		close(started)
		<-release
		return fourResult(), nil
	})

	recs := make([]*httptest.ResponseRecorder, clients)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		recs[0] = ts.do("POST", "/v1/run-python", jobBody)
	}()
	<-started
	for i := 1; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs[i] = ts.do("POST", "/v1/run-python", jobBody)
		}()
	}
	for range clients - 1 {
		<-waiting
	}
	// A different request with the job_id conflicts at once, not after the run.
	wantError(t, ts.do("POST", "/v1/run-python", `{"files":{"main.py":"other"},"job_id":"job-42"}`), 409, boxer.ECodeJobIDConflict)
	// GET sees it running.
	if rec := ts.do("GET", "/v1/jobs/job-42", ""); rec.Code != 202 || rec.Body.String() != `{"job_id":"job-42","status":"running"}` {
		t.Fatalf("GET while running: %d %s", rec.Code, rec.Body)
	}
	close(release)
	wg.Wait()

	if n := ts.runner.count(); n != 1 {
		t.Fatalf("runner ran %d times, want 1", n)
	}
	for i, rec := range recs {
		if rec.Code != 200 || rec.Body.String() != recs[0].Body.String() {
			t.Fatalf("client %d: %d %s\nwant %s", i, rec.Code, rec.Body, recs[0].Body)
		}
	}
}

// TestJobWaiterTakesOverCancelledRun: the first request's client leaves
// mid-run; the waiting request then runs the job itself.
func TestJobWaiterTakesOverCancelledRun(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	waiting := make(chan struct{}, 4)
	ts.onWait = func() { waiting <- struct{}{} }
	started := make(chan struct{}, 2)
	ts.runner.set(func(ctx context.Context, _ *boxer.Job) (*boxer.Result, error) {
		started <- struct{}{}
		if ts.runner.count() == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return fourResult(), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- ts.doCtx(ctx, "POST", "/v1/run-python", jobBody) }()
	<-started
	second := make(chan *httptest.ResponseRecorder)
	go func() { second <- ts.do("POST", "/v1/run-python", jobBody) }()
	<-waiting
	cancel()
	<-done
	if rec := <-second; rec.Code != 200 {
		t.Fatalf("waiting request: %d %s", rec.Code, rec.Body)
	}
	if n := ts.runner.count(); n != 2 {
		t.Fatalf("runner ran %d times, want 2", n)
	}
}

// TestJobIDInURL: any job_id the API accepts can be fetched with its
// path-escaped form.
func TestJobIDInURL(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	for _, id := range []string{"a%b", "x?y#z", "k:v=1&2", `q"u\o'te`, "~.-_+@!$*,;()[]{}|^`<>"} {
		body := `{"files":{"main.py":"1"},"job_id":` + strconv.Quote(id) + `}`
		if rec := ts.do("POST", "/v1/run-python", body); rec.Code != 200 {
			t.Fatalf("POST job_id %q: %d %s", id, rec.Code, rec.Body)
		}
		rec := ts.do("GET", "/v1/jobs/"+url.PathEscape(id), "")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"job_id":`+strconv.Quote(id)) {
			t.Fatalf("GET job_id %q: %d %s", id, rec.Code, rec.Body)
		}
	}
}

// TestPanicReleasesClaim: a run that panics does not leave its job_id
// claimed forever.
func TestPanicReleasesClaim(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) { panic("engine bug") })
	wantError(t, ts.do("POST", "/v1/run-python", jobBody), 500, boxer.ECodeInternal)
	ts.runner.set(nil)
	if rec := ts.do("POST", "/v1/run-python", jobBody); rec.Code != 200 {
		t.Fatalf("retry after a panic: %d %s", rec.Code, rec.Body)
	}
}

// TestStaleClaimTakenOver: a running record this process has no run for
// (left by a bug) is taken over rather than blocking its job_id.
func TestStaleClaimTakenOver(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	req, e := decodeRunPython([]byte(jobBody))
	if e != nil {
		t.Fatal(e)
	}
	if _, claimed, err := ts.store.Claim(context.Background(), "job-42", req.hash()); err != nil || !claimed {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	if rec := ts.do("POST", "/v1/run-python", jobBody); rec.Code != 200 {
		t.Fatalf("POST over a stale claim: %d %s", rec.Code, rec.Body)
	}
	if n := ts.runner.count(); n != 1 {
		t.Fatalf("runner ran %d times, want 1", n)
	}
}

// A run without a job_id is not stored: its response names it, and GET
// does not know the name; nothing of it is in the database.
func TestRunWithoutJobIDIsNotKept(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	rec := ts.do("POST", "/v1/run-python", `{"files":{"main.py":"print(2 + 2)"}}`)
	var body struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != 200 || err != nil || !strings.HasPrefix(body.JobID, "job_") {
		t.Fatalf("%d %s (%v), want a result with a generated job_id", rec.Code, rec.Body, err)
	}
	e := wantError(t, ts.do("GET", "/v1/jobs/"+body.JobID, ""), 404, boxer.ECodeNotFound)
	if !strings.Contains(e.Message, "without a job_id") {
		t.Errorf("message %q does not say why", e.Message)
	}
	if _, err := ts.store.Get(context.Background(), body.JobID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("store holds the run: %v", err)
	}
}

// A result larger than MaxKeptResultBytes goes to its caller once; the job
// is then done with result_not_kept, which a replay and a GET get instead
// of a second run.
func TestLargeResultNotKept(t *testing.T) {
	ts := newTestServer(t, Config{MaxKeptResultBytes: 1000}, nil)
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) {
		res := fourResult()
		res.Stdout = boxer.Output{Data: bytes.Repeat([]byte("x"), 2000), Bytes: 2000}
		return res, nil
	})
	if rec := ts.do("POST", "/v1/run-python", jobBody); rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), bytes.Repeat([]byte("x"), 2000)) {
		t.Fatalf("first run: %d %.200s", rec.Code, rec.Body)
	}
	for _, req := range [][3]string{{"POST", "/v1/run-python", jobBody}, {"GET", "/v1/jobs/job-42", ""}} {
		e := wantError(t, ts.do(req[0], req[1], req[2]), 410, boxer.ECodeResultNotKept)
		if want := "job job-42 ran; its response, "; !strings.HasPrefix(e.Message, want) {
			t.Errorf("%s %s: %q, want it to start %q", req[0], req[1], e.Message, want)
		}
	}
	if n := ts.runner.count(); n != 1 {
		t.Fatalf("runner ran %d times, want 1", n)
	}
}
