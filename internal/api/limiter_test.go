package api

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"boxer"
)

// blockingRunner makes every run wait on release, announcing itself on
// started, and reports the context error it saw on ended.
type blockingRunner struct {
	started chan struct{}
	release chan struct{}
	ended   chan error
}

func newBlockingRunner() *blockingRunner {
	return &blockingRunner{started: make(chan struct{}, 16), release: make(chan struct{}), ended: make(chan error, 16)}
}

func (b *blockingRunner) run(ctx context.Context, _ *boxer.Job) (*boxer.Result, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		b.ended <- nil
		return fourResult(), nil
	case <-ctx.Done():
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	}
}

// post sends a /v1/exec request in the background.
func (ts *testServer) post(ctx context.Context) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() { out <- ts.doCtx(ctx, "POST", "/v1/exec", `{"code":"print(2 + 2)"}`) }()
	return out
}

func queueHook(ts *testServer) <-chan struct{} {
	queued := make(chan struct{}, 16)
	ts.lim.onQueue = func() { queued <- struct{}{} }
	return queued
}

func TestBusyWhenSlotsAndQueueAreFull(t *testing.T) {
	ts := newTestServer(t, Config{Slots: 1, Queue: 1}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	queued := queueHook(ts)

	a := ts.post(context.Background())
	<-br.started
	b := ts.post(context.Background())
	<-queued
	if running, waiting := ts.lim.counts(); running != 1 || waiting != 1 {
		t.Fatalf("limiter = %d running, %d queued; want 1, 1", running, waiting)
	}

	c := ts.do("POST", "/v1/exec", `{"code":"print(2 + 2)"}`)
	e := wantError(t, c, 503, boxer.ECodeBusy)
	if got := c.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	if e.Message != "all 1 run slots are taken and 1 runs are waiting; retry later" {
		t.Errorf("message = %q", e.Message)
	}

	close(br.release)
	for name, ch := range map[string]<-chan *httptest.ResponseRecorder{"running": a, "queued": b} {
		if rec := <-ch; rec.Code != 200 {
			t.Errorf("%s request: %d %s", name, rec.Code, rec.Body)
		}
	}
}

func TestBusyWithoutQueue(t *testing.T) {
	ts := newTestServer(t, Config{Slots: 1, NoQueue: true}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	a := ts.post(context.Background())
	<-br.started
	wantError(t, ts.do("POST", "/v1/exec", `{"code":"1"}`), 503, boxer.ECodeBusy)
	// Non-run routes are not limited.
	if rec := ts.do("GET", "/v1/health", ""); rec.Code != 200 {
		t.Fatalf("health while full: %d", rec.Code)
	}
	close(br.release)
	<-a
}

func TestQueueTimeout(t *testing.T) {
	ts := newTestServer(t, Config{Slots: 1, Queue: 1, QueueTimeout: time.Millisecond}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	a := ts.post(context.Background())
	<-br.started
	wantError(t, ts.do("POST", "/v1/exec", `{"code":"1"}`), 503, boxer.ECodeBusy)
	close(br.release)
	<-a
}

func TestClientDisconnectCancelsRunningJob(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	ctx, cancel := context.WithCancel(context.Background())
	done := ts.post(ctx)
	<-br.started
	cancel()
	if err := <-br.ended; err != context.Canceled {
		t.Fatalf("runner saw %v, want context.Canceled", err)
	}
	<-done
	lines := ts.logLines("request")
	if got := lines[len(lines)-1]; got["status"] != float64(499) || got["outcome"] != codeCanceled {
		t.Fatalf("access log = %v, want status 499, outcome canceled", got)
	}
	if running, _ := ts.lim.counts(); running != 0 {
		t.Fatalf("%d runs still hold a slot", running)
	}
}

func TestClientDisconnectCancelsQueuedJob(t *testing.T) {
	ts := newTestServer(t, Config{Slots: 1, Queue: 4}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	queued := queueHook(ts)
	a := ts.post(context.Background())
	<-br.started
	ctx, cancel := context.WithCancel(context.Background())
	b := ts.post(ctx)
	<-queued
	cancel()
	<-b
	if _, waiting := ts.lim.counts(); waiting != 0 {
		t.Fatalf("%d still queued after the client left", waiting)
	}
	close(br.release)
	<-a
	if n := ts.runner.count(); n != 1 {
		t.Fatalf("runner ran %d jobs, want 1: the queued one must not run", n)
	}
}

func TestShutdownDrains(t *testing.T) {
	ts := newTestServer(t, Config{Slots: 1, Queue: 2}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	queued := queueHook(ts)
	a := ts.post(context.Background())
	<-br.started
	b := ts.post(context.Background())
	<-queued

	shut := make(chan error, 1)
	go func() { shut <- ts.Shutdown(context.Background()) }()
	// The queued run is turned away; the running one goes on.
	wantError(t, <-b, 503, boxer.ECodeUnavailable)
	wantError(t, ts.do("POST", "/v1/exec", `{"code":"1"}`), 503, boxer.ECodeUnavailable)
	wantError(t, ts.do("GET", "/readyz", ""), 503, boxer.ECodeUnavailable)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a run was in flight", err)
	default:
	}
	close(br.release)
	if rec := <-a; rec.Code != 200 {
		t.Fatalf("in-flight run: %d %s", rec.Code, rec.Body)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
}

func TestShutdownKillsAfterGrace(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	a := ts.post(context.Background())
	<-br.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the grace period is already over
	if err := ts.Shutdown(ctx); err != context.Canceled {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := <-br.ended; err != context.Canceled {
		t.Fatalf("runner saw %v, want its context cancelled", err)
	}
	// The client is still there: it is told to retry, not left in silence.
	wantError(t, <-a, 503, boxer.ECodeUnavailable)
}

func TestLimiterCountsUnderLoad(t *testing.T) {
	l := newLimiter(limits{slots: 3, queue: 5, queueBytes: 1 << 20, maxWait: time.Minute}, nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		peak int
		cur  int
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := l.acquire(context.Background(), 1)
			if err != nil {
				return // busy is fine here
			}
			mu.Lock()
			cur++
			peak = max(peak, cur)
			mu.Unlock()
			mu.Lock()
			cur--
			mu.Unlock()
			release()
			release() // a second call is harmless
		}()
	}
	wg.Wait()
	if peak > 3 {
		t.Fatalf("%d runs at once with 3 slots", peak)
	}
	if r, q := l.counts(); r != 0 || q != 0 {
		t.Fatalf("after load: %d running, %d queued", r, q)
	}
}

// A run waits when its expected wait (the runs ahead of it over the
// slots, times a run's recent time in its slot) is within the bound, and
// is refused when it is not, however short the queue; and the bytes of
// the waiting jobs are bounded too, though one job alone may always wait.
func TestAdmissionByExpectedWait(t *testing.T) {
	l := newLimiter(limits{slots: 2, queue: 100, queueBytes: 1000, maxWait: time.Minute, maxExpected: 100 * time.Millisecond}, nil)
	queued := make(chan struct{}, 16)
	l.onQueue = func() { queued <- struct{}{} }
	l.held = 60 * time.Millisecond // as if runs had held their slots 60 ms
	var releases []func()
	for range 2 {
		r, err := l.acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	waiting := make(chan error, 8)
	wait := func(size int64) {
		go func() {
			r, err := l.acquire(context.Background(), size)
			if err == nil {
				r()
			}
			waiting <- err
		}()
		<-queued
	}
	// Expected waits: 1 x 60 / 2 = 30 ms, 2 x 60 / 2 = 60 ms, 90 ms:
	// admitted; the fourth would wait 120 ms.
	wait(900) // alone, past nothing
	wait(100) // 1000 bytes waiting in all: at the bound
	if _, err := l.acquire(context.Background(), 1); err != errBusy {
		t.Fatalf("a job past the bytes' bound: %v, want busy", err)
	}
	wait(0)
	if got := l.expected(); got != 120*time.Millisecond {
		t.Fatalf("expected wait %v, want 120ms", got)
	}
	if _, err := l.acquire(context.Background(), 0); err != errBusy {
		t.Fatalf("an expected wait of 120 ms: %v, want busy", err)
	}
	for _, r := range releases {
		r()
	}
	for range 3 {
		if err := <-waiting; err != nil {
			t.Fatal(err)
		}
	}
}

// An async run answers before it waits for a slot, so it is refused at
// once where a run would be (every slot taken, no room in the queue),
// not accepted and then failed; with a slot free it is accepted.
func TestAsyncBusyRefusedAtOnce(t *testing.T) {
	ts := newTestServer(t, Config{Slots: 1, NoQueue: true}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	a := ts.post(context.Background())
	<-br.started
	const body = `{"async": true, "job_id": "a1", "files": {"main.py": "print(1)"}}`
	wantError(t, ts.do("POST", "/v1/run-python", body), 503, boxer.ECodeBusy)
	if rec := ts.do("GET", "/v1/jobs/a1", ""); rec.Code != 404 {
		t.Fatalf("a refused async job was kept: %d %s", rec.Code, rec.Body)
	}
	close(br.release)
	<-a
	ts.runner.set(nil)
	if rec := ts.do("POST", "/v1/run-python", body); rec.Code != 202 {
		t.Fatalf("async with a free slot: %d %s", rec.Code, rec.Body)
	}
	ts.Shutdown(context.Background()) // waits for the background run
}
