package x402

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A facilitator's GET /supported decides readiness: listing boxer's
// payment (v2, exact, its network) is ready; listing others is a
// configuration error (ErrUnsupported, which serve refuses to start
// with); no answer is an outage, unready until an answer comes.
func TestCheckFacilitator(t *testing.T) {
	var answer atomic.Value // the body of the next answer; "" answers 503
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if r.Method != http.MethodGet || r.URL.Path != "/supported" {
			http.NotFound(w, r)
			return
		}
		body := answer.Load().(string)
		if body == "" {
			http.Error(w, `{"error":"starting"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	defer srv.Close()
	cfg := testConfig()
	cfg.FacilitatorURL = srv.URL
	cfg.FacilitatorAuthHeader = "Authorization: Bearer fac-secret"
	p, err := New(cfg, Deps{Nonces: NewMemoryNonceStore()})
	if err != nil {
		t.Fatal(err)
	}
	const ours = `{"kinds":[{"x402Version":1,"scheme":"exact","network":"base"},{"x402Version":2,"scheme":"exact","network":"eip155:8453"}],"extensions":[],"signers":{}}`
	const others = `{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:84532"}]}`
	ctx := context.Background()
	for _, step := range []struct {
		name, body  string
		unsupported bool // the error wraps ErrUnsupported
		ready       bool
		errHas      string
	}{
		{"lists ours", ours, false, true, ""},
		{"answers 503", "", false, false, "HTTP 503"},
		{"answers again", ours, false, true, ""},
		{"lists another network", others, true, false, "lists v2 exact on eip155:84532, not v2 exact on eip155:8453"},
		{"lists nothing", `{"kinds":[]}`, true, false, "lists nothing"},
		{"answers without kinds", `{"ok":true}`, false, false, "no kinds"},
	} {
		answer.Store(step.body)
		err := p.CheckFacilitator(ctx)
		if errors.Is(err, ErrUnsupported) != step.unsupported || (err == nil) != (step.errHas == "") ||
			err != nil && !strings.Contains(err.Error(), step.errHas) {
			t.Errorf("%s: CheckFacilitator = %v, want unsupported %v and %q", step.name, err, step.unsupported, step.errHas)
		}
		if (p.Ready() == nil) != step.ready {
			t.Errorf("%s: Ready = %v, want ready %v", step.name, p.Ready(), step.ready)
		}
	}
	if got := auth.Load(); got != "Bearer fac-secret" {
		t.Errorf("GET /supported sent Authorization %q, want the configured header", got)
	}

	// Nothing listening: unreachable, not unsupported.
	srv.Close()
	if err := p.CheckFacilitator(ctx); err == nil || errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("closed facilitator: CheckFacilitator = %v, want unreachable", err)
	}
	if p.Ready() == nil {
		t.Error("closed facilitator: ready")
	}
}

// Payments off, or a facilitator that cannot say what it supports (a
// test's), leave readiness alone.
func TestCheckFacilitatorNotApplicable(t *testing.T) {
	off, err := New(DefaultConfig(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if off.CheckFacilitator(context.Background()) != nil || off.Ready() != nil {
		t.Error("payments off: not ready")
	}
	p, err := New(testConfig(), Deps{Nonces: NewMemoryNonceStore(), Facilitator: noSupported{}})
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckFacilitator(context.Background()) != nil || p.Ready() != nil {
		t.Error("a facilitator without Supported: not ready")
	}
}

// noSupported is a Facilitator without GET /supported.
type noSupported struct{}

func (noSupported) Verify(context.Context, *PaymentPayload, PaymentRequirements) (*VerifyResponse, error) {
	return nil, errors.New("not used")
}

func (noSupported) Settle(context.Context, *PaymentPayload, PaymentRequirements) (*SettleResponse, error) {
	return nil, errors.New("not used")
}

// After a failed check the watcher asks again, at growing intervals, until
// the facilitator answers; then readiness comes back, and the watcher
// waits its healthy interval, ending with its context.
func TestWatchFacilitatorRecovers(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 3 { // the first check and two of the watcher's
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"}]}`))
	}))
	defer srv.Close()
	cfg := testConfig()
	cfg.FacilitatorURL = srv.URL
	p, err := New(cfg, Deps{Nonces: NewMemoryNonceStore()})
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckFacilitator(context.Background()) == nil || p.Ready() == nil {
		t.Fatal("a facilitator answering 503: ready")
	}
	ctx, cancel := context.WithCancel(context.Background())
	checked, done := make(chan error), make(chan struct{})
	go func() {
		defer close(done)
		p.watch(ctx, time.Millisecond, 4*time.Millisecond, time.Hour, func(err error) { checked <- err })
	}()
	for i, wantOK := range []bool{false, false, true} {
		if err := <-checked; (err == nil) != wantOK {
			t.Fatalf("check %d by the watcher: %v, want ok %v", i+1, err, wantOK)
		}
	}
	if err := p.Ready(); err != nil {
		t.Errorf("after the facilitator answered: %v", err)
	}
	cancel()
	<-done
	if n := asked.Load(); n != 4 {
		t.Errorf("GET /supported asked %d times, want 4: none more within the healthy hour", n)
	}
}
