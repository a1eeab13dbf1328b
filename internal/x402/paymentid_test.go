package x402

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"boxer"
)

// The declaration, as @x402/extensions 2.27.0's
// declarePaymentIdentifierExtension(false) returns it.
const officialPaymentIDDeclaration = `{"info":{"required":false},"schema":{"$schema":"https://json-schema.org/draft/2020-12/schema",` +
	`"type":"object","properties":{"required":{"type":"boolean"},"id":{"type":"string","minLength":16,"maxLength":128,` +
	`"pattern":"^[a-zA-Z0-9_-]+$"}},"required":["required"]}}`

// idHandler is boxer's handler stand-in for payment ids: it echoes the body
// it read and counts its runs; while hold is set, each run waits for it.
type idHandler struct {
	mu     sync.Mutex
	status int
	calls  int
	big    int // bytes of padding in the answer
	hold   chan struct{}
	start  chan struct{}
}

func (h *idHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.calls++
	n, status, hold, start, big := h.calls, h.status, h.hold, h.start, h.big
	h.mu.Unlock()
	if start != nil {
		start <- struct{}{}
	}
	if hold != nil {
		<-hold
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Run", fmt.Sprint(n))
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"run":%d,"body":%q,"pad":%q}`, n, body, strings.Repeat("x", big))
}

func (h *idHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func (h *idHandler) set(f func(h *idHandler)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

// idFail is the api's error table for the codes these tests meet.
func idFail(w http.ResponseWriter, _ *http.Request, e *boxer.Error) {
	status := map[string]int{
		boxer.ECodeInvalidPaymentID: 400, boxer.ECodePaymentIDConflict: 409, boxer.ECodePaymentIDInFlight: 409,
		boxer.ECodeResultNotKept: 410, boxer.ECodePayloadTooLarge: 413, boxer.ECodeUnavailable: 503,
	}[e.Code]
	if status == 0 {
		status = 500
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(e.Code))
}

type idRig struct {
	fac     *fakeFacilitator
	pay     *Payments
	handler *idHandler
	ids     PaymentIDStore
	routes  map[string]http.Handler
	payer   wallet
}

func newIDRig(t *testing.T, edit func(*Config, *Deps)) *idRig {
	t.Helper()
	fac := newFakeFacilitator()
	fs := httptest.NewServer(fac)
	t.Cleanup(fs.Close)
	cfg := testConfig()
	cfg.FacilitatorURL = fs.URL
	deps := Deps{Nonces: NewMemoryNonceStore(), Now: func() time.Time { return testNow }}
	deps.PaymentIDs = NewMemoryPaymentIDStore(deps.Now)
	if edit != nil {
		edit(&cfg, &deps)
	}
	p, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	rg := &idRig{fac: fac, pay: p, handler: &idHandler{status: 200}, ids: deps.PaymentIDs, payer: newWallet(t), routes: map[string]http.Handler{}}
	for _, route := range []string{"/v1/exec", "/v1/run-python"} {
		rg.routes[route] = p.Wrap(route, rg.handler, idFail)
	}
	return rg
}

// idPayment is a new payment by w for route carrying ext as its
// payment-identifier extension, as the official client builds it: the
// server's declaration echoed, with info.id added.
func (rg *idRig) idPayment(t *testing.T, w wallet, route string, ext json.RawMessage) string {
	t.Helper()
	o := rg.pay.offers[route]
	a := authFor(w, o)
	p := payloadFor(t, o, a, signAuth(t, w, o.domain, a))
	if ext != nil {
		p.Extensions[ExtensionPaymentIdentifier] = ext
	}
	return header(t, p)
}

func withID(id string) json.RawMessage {
	var ext map[string]any
	if err := json.Unmarshal([]byte(officialPaymentIDDeclaration), &ext); err != nil {
		panic(err)
	}
	ext["info"].(map[string]any)["id"] = id
	b, _ := json.Marshal(ext)
	return b
}

func (rg *idRig) send(route, body, payment string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://boxer.test"+route, strings.NewReader(body))
	if payment != "" {
		r.Header.Set(HeaderPaymentSignature, payment)
	}
	w := httptest.NewRecorder()
	rg.routes[route].ServeHTTP(w, r)
	return w
}

// pay sends body to route with a new payment of rg.payer carrying id.
func (rg *idRig) pay1(t *testing.T, route, body, id string) *httptest.ResponseRecorder {
	t.Helper()
	return rg.send(route, body, rg.idPayment(t, rg.payer, route, withID(id)))
}

func (rg *idRig) want(t *testing.T, what string, runs, verifies, settles int) {
	t.Helper()
	nv, ns := rg.fac.counts()
	if rg.handler.count() != runs || nv != verifies || ns != settles {
		t.Fatalf("%s: %d runs, %d verifies, %d settles; want %d, %d, %d", what, rg.handler.count(), nv, ns, runs, verifies, settles)
	}
}

func TestPaymentIdentifierDeclared(t *testing.T) {
	rg := newIDRig(t, nil)
	for route := range rg.routes {
		pr := challengeOf(t, rg.send(route, `{}`, ""))
		got, _ := json.Marshal(pr.Extensions[ExtensionPaymentIdentifier])
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal([]byte(officialPaymentIDDeclaration), &w)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s declares %s\nwant %s", route, got, officialPaymentIDDeclaration)
		}
		if _, ok := pr.Extensions["bazaar"]; !ok {
			t.Fatalf("%s: bazaar is gone: %v", route, pr.Extensions)
		}
	}
}

func TestPaymentIDOf(t *testing.T) {
	long := strings.Repeat("a", 128)
	tests := []struct {
		name, ext string
		id        string
		bad       bool
	}{
		{"no extension", "", "", false},
		{"declaration echoed without id", officialPaymentIDDeclaration, "", false},
		{"null id", `{"info":{"required":false,"id":null}}`, "", false},
		{"16 chars", `{"info":{"id":"pay_0123456789ab"}}`, "pay_0123456789ab", false},
		{"128 chars", `{"info":{"id":"` + long + `"}}`, long, false},
		{"dash and underscore", `{"info":{"id":"A-b_C-d_E-f_G-h_0"}}`, "A-b_C-d_E-f_G-h_0", false},
		{"15 chars", `{"info":{"id":"pay_0123456789a"}}`, "", true},
		{"129 chars", `{"info":{"id":"` + long + `a"}}`, "", true},
		{"space", `{"info":{"id":"pay 0123456789abc"}}`, "", true},
		{"dot", `{"info":{"id":"pay.0123456789abc"}}`, "", true},
		{"non-ASCII letter", `{"info":{"id":"pay_0123456789abé"}}`, "", true},
		{"NUL", `{"info":{"id":"pay_0123456789ab\u0000"}}`, "", true},
		{"number", `{"info":{"id":1234567890123456789}}`, "", true},
		{"object", `{"info":{"id":{}}}`, "", true},
		{"info missing", `{"schema":{}}`, "", true},
		{"info not an object", `{"info":"pay_0123456789abcdef"}`, "", true},
		{"extension a string", `"pay_0123456789abcdef"`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &PaymentPayload{Extensions: map[string]json.RawMessage{}}
			if tt.ext != "" {
				p.Extensions[ExtensionPaymentIdentifier] = json.RawMessage(tt.ext)
			}
			id, e := PaymentIDOf(p)
			if (e != nil) != tt.bad || id != tt.id {
				t.Fatalf("PaymentIDOf = %q, %v; want %q, bad %v", id, e, tt.id, tt.bad)
			}
			if e != nil && e.Code != boxer.ECodeInvalidPaymentID {
				t.Fatalf("code %s", e.Code)
			}
		})
	}
}

// A malformed id is refused before anything runs or is verified.
func TestPaymentIDInvalidIs400(t *testing.T) {
	rg := newIDRig(t, nil)
	h := rg.idPayment(t, rg.payer, "/v1/exec", json.RawMessage(`{"info":{"required":false,"id":"short"}}`))
	if w := rg.send("/v1/exec", `{}`, h); w.Code != 400 || w.Body.String() != boxer.ECodeInvalidPaymentID {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
	rg.want(t, "invalid id", 0, 0, 0)
}

// A retry with the same id and request, paid with a new signature as the
// official client does, gets the first answer back: one run, one charge.
func TestPaymentIDRetryIsAnsweredOnce(t *testing.T) {
	rg := newIDRig(t, nil)
	const id, body = "pay_7d5d747be160e280504c099d984bcfe0", `{"code":"print(1)"}`
	first := rg.pay1(t, "/v1/exec", body, id)
	if first.Code != 200 || first.Header().Get(HeaderPaymentResponse) == "" || first.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("first: %d %v %s", first.Code, first.Header(), first.Body)
	}
	rg.want(t, "first", 1, 1, 1)

	retryPayment := rg.idPayment(t, rg.payer, "/v1/exec", withID(id))
	for i := range 2 { // the retry, and the retry's exact bytes again
		w := rg.send("/v1/exec", body, retryPayment)
		if w.Code != 200 || w.Body.String() != first.Body.String() ||
			w.Header().Get(HeaderPaymentResponse) != first.Header().Get(HeaderPaymentResponse) ||
			w.Header().Get("X-Run") != "1" || w.Header().Get(HeaderReplayed) != "true" {
			t.Fatalf("retry %d: %d %v %s; want the first answer", i, w.Code, w.Header(), w.Body)
		}
	}
	rg.want(t, "after retries", 1, 1, 1)

	// The retry's payment was not settled, and pays for nothing else.
	var other PaymentPayload
	if err := DecodeHeader(retryPayment, &other); err != nil {
		t.Fatal(err)
	}
	delete(other.Extensions, ExtensionPaymentIdentifier)
	if pr := challengeOf(t, rg.send("/v1/exec", body, header(t, &other))); !strings.HasPrefix(pr.Error, ReasonReplay) {
		t.Fatalf("the retry's payment reused: %q", pr.Error)
	}

	// Another payer's id is their own, even when it is the same string.
	w := rg.send("/v1/exec", body, rg.idPayment(t, newWallet(t), "/v1/exec", withID(id)))
	if w.Code != 200 || w.Header().Get("X-Run") != "2" || w.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("other payer: %d %v %s", w.Code, w.Header(), w.Body)
	}
	rg.want(t, "other payer", 2, 2, 2)
}

// The same id with another request is a conflict, and costs nothing.
func TestPaymentIDConflict(t *testing.T) {
	rg := newIDRig(t, nil)
	const id, body = "pay_conflict_000000000001", `{"code":"print(1)"}`
	if w := rg.pay1(t, "/v1/exec", body, id); w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	tests := []struct{ name, route, body string }{
		{"other body", "/v1/exec", `{"code":"print(2)"}`},
		{"same body, reformatted", "/v1/exec", `{"code": "print(1)"}`},
		{"other route", "/v1/run-python", body},
	}
	for _, tt := range tests {
		if w := rg.pay1(t, tt.route, tt.body, id); w.Code != 409 || w.Body.String() != boxer.ECodePaymentIDConflict {
			t.Fatalf("%s: %d %s; want 409 %s", tt.name, w.Code, w.Body, boxer.ECodePaymentIDConflict)
		}
	}
	// A different query string is another request too.
	r := httptest.NewRequest(http.MethodPost, "http://boxer.test/v1/exec?stream=1", strings.NewReader(body))
	r.Header.Set(HeaderPaymentSignature, rg.idPayment(t, rg.payer, "/v1/exec", withID(id)))
	w := httptest.NewRecorder()
	rg.routes["/v1/exec"].ServeHTTP(w, r)
	if w.Code != 409 {
		t.Fatalf("other query: %d %s", w.Code, w.Body)
	}
	rg.want(t, "after conflicts", 1, 1, 1)
}

// A request that was not charged leaves its id free: the retry runs.
func TestPaymentIDUnchargedIsRetried(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(rg *idRig)
		want    int
	}{
		{"handler failed", func(rg *idRig) { rg.handler.set(func(h *idHandler) { h.status = 500 }) }, 500},
		{"handler busy", func(rg *idRig) { rg.handler.set(func(h *idHandler) { h.status = 429 }) }, 429},
		{"verify refused", func(rg *idRig) {
			rg.fac.mu.Lock()
			rg.fac.verifyBody = `{"isValid":false,"invalidReason":"insufficient_funds"}`
			rg.fac.mu.Unlock()
		}, 402},
		{"settle refused", func(rg *idRig) {
			rg.fac.mu.Lock()
			rg.fac.settleBody = `{"success":false,"errorReason":"x"}`
			rg.fac.mu.Unlock()
		}, 402},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newIDRig(t, nil)
			def := newFakeFacilitator()
			tt.breakIt(rg)
			const id, body = "pay_uncharged_0000000001", `{"code":"print(1)"}`
			if w := rg.pay1(t, "/v1/exec", body, id); w.Code != tt.want {
				t.Fatalf("first: %d %s; want %d", w.Code, w.Body, tt.want)
			}
			rg.handler.set(func(h *idHandler) { h.status = 200 })
			rg.fac.mu.Lock()
			rg.fac.verifyBody, rg.fac.settleBody = def.verifyBody, def.settleBody
			rg.fac.mu.Unlock()
			w := rg.pay1(t, "/v1/exec", body, id)
			if w.Code != 200 || w.Header().Get(HeaderReplayed) != "" || w.Header().Get(HeaderPaymentResponse) == "" {
				t.Fatalf("retry: %d %v %s; want a run of its own", w.Code, w.Header(), w.Body)
			}
			if _, ns := rg.fac.counts(); ns > 2 {
				t.Fatalf("%d settlements", ns)
			}
			// And now it is kept.
			if w := rg.pay1(t, "/v1/exec", body, id); w.Header().Get(HeaderReplayed) != "true" {
				t.Fatalf("third: %d %v", w.Code, w.Header())
			}
		})
	}
}

// Requests with the same id at once run once: the others wait for the
// first's answer and get it; one with another body is refused at once.
func TestPaymentIDConcurrentRunsOnce(t *testing.T) {
	rg := newIDRig(t, nil)
	const id, body, n = "pay_concurrent_00000001", `{"code":"print(1)"}`, 8
	// A waiter woken by the first's answer waits again while another
	// takes its turn: at most n*n waits in all.
	waiting := make(chan struct{}, n*n)
	rg.pay.idFlights.onWait = func() { waiting <- struct{}{} }
	hold, start := make(chan struct{}), make(chan struct{}, 16)
	rg.handler.set(func(h *idHandler) { h.hold, h.start = hold, start })
	payments := make([]string, n)
	for i := range payments {
		payments[i] = rg.idPayment(t, rg.payer, "/v1/exec", withID(id))
	}
	answers := make(chan *httptest.ResponseRecorder, n)
	go func() { answers <- rg.send("/v1/exec", body, payments[0]) }()
	<-start // the first runs
	for _, p := range payments[1:] {
		go func() { answers <- rg.send("/v1/exec", body, p) }()
	}
	for range n - 1 {
		<-waiting
	}
	if w := rg.pay1(t, "/v1/exec", `{"code":"other"}`, id); w.Code != 409 || w.Body.String() != boxer.ECodePaymentIDConflict {
		t.Fatalf("other body while in flight: %d %s", w.Code, w.Body)
	}
	close(hold)
	var bodies []string
	for range n {
		w := <-answers
		if w.Code != 200 {
			t.Fatalf("answer %d %s", w.Code, w.Body)
		}
		bodies = append(bodies, w.Body.String())
	}
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("answers differ: %s / %s", b, bodies[0])
		}
	}
	rg.want(t, "concurrent", 1, 1, 1)
}

// An answer too large to keep is sent once; a retry learns so, uncharged.
func TestPaymentIDAnswerTooLarge(t *testing.T) {
	rg := newIDRig(t, func(c *Config, _ *Deps) { c.PaymentID.MaxAnswerBytes = 1000 })
	rg.handler.set(func(h *idHandler) { h.big = 2000 })
	const id, body = "pay_large_0000000000001", `{}`
	first := rg.pay1(t, "/v1/exec", body, id)
	if first.Code != 200 || first.Body.Len() < 2000 {
		t.Fatalf("first: %d, %d bytes", first.Code, first.Body.Len())
	}
	w := rg.pay1(t, "/v1/exec", body, id)
	if w.Code != 410 || w.Body.String() != boxer.ECodeResultNotKept ||
		w.Header().Get(HeaderPaymentResponse) != first.Header().Get(HeaderPaymentResponse) {
		t.Fatalf("retry: %d %v %s", w.Code, w.Header(), w.Body)
	}
	rg.want(t, "too large", 1, 1, 1)
}

// stubIDs is a PaymentIDStore that holds one pending record of another node.
type stubIDs struct {
	*MemoryPaymentIDStore
	rec *PaymentIDRecord
}

func (s stubIDs) ClaimPaymentID(ctx context.Context, payer, id, fp string, until time.Time) (*PaymentIDRecord, bool, error) {
	if s.rec != nil {
		return s.rec, false, nil
	}
	return s.MemoryPaymentIDStore.ClaimPaymentID(ctx, payer, id, fp, until)
}

// A pending id: another node's is in flight (409, nothing runs), and so
// is this process's own; this node's from before this process started was
// left by a dead process and is taken over.
func TestPaymentIDPendingElsewhere(t *testing.T) {
	const id, body = "pay_pending_000000000001", `{}`
	rg := newIDRig(t, nil)
	fp := func() string {
		r := httptest.NewRequest(http.MethodPost, "http://boxer.test/v1/exec", nil)
		o := rg.pay.offers["/v1/exec"]
		return fingerprint(r, o.route.Path, o.req, []byte(body))
	}()
	rg.pay.ids = stubIDs{NewMemoryPaymentIDStore(nil), &PaymentIDRecord{Fingerprint: fp}}
	if w := rg.pay1(t, "/v1/exec", body, id); w.Code != 409 || w.Body.String() != boxer.ECodePaymentIDInFlight {
		t.Fatalf("pending elsewhere: %d %s", w.Code, w.Body)
	}
	rg.want(t, "pending elsewhere", 0, 0, 0)

	// This process's own claim, whose answer the store could not keep: in
	// flight, never run again (its run was paid for).
	payer := strings.ToLower(rg.payer.addr.String())
	mem := NewMemoryPaymentIDStore(func() time.Time { return testNow })
	if _, ok, _ := mem.ClaimPaymentID(context.Background(), payer, id, fp, testNow.Add(time.Hour)); !ok {
		t.Fatal("setup claim")
	}
	rg.pay.ids = mem
	if w := rg.pay1(t, "/v1/exec", body, id); w.Code != 409 || w.Body.String() != boxer.ECodePaymentIDInFlight {
		t.Fatalf("own unkept claim: %d %s", w.Code, w.Body)
	}
	rg.want(t, "own unkept claim", 0, 0, 0)

	// A claim older than this process: taken over.
	mem = NewMemoryPaymentIDStore(func() time.Time { return testNow.Add(-time.Second) })
	if _, ok, _ := mem.ClaimPaymentID(context.Background(), payer, id, fp, testNow.Add(time.Hour)); !ok {
		t.Fatal("setup claim")
	}
	rg.pay.ids = mem
	if w := rg.pay1(t, "/v1/exec", body, id); w.Code != 200 || w.Header().Get(HeaderReplayed) != "" {
		t.Fatalf("stale own claim: %d %v %s; want a run", w.Code, w.Header(), w.Body)
	}
	rg.want(t, "taken over", 1, 1, 1)
}

// The fingerprint is the request and the payment's terms, not the payment.
func TestFingerprint(t *testing.T) {
	o := testOffer(t, "/v1/exec")
	req := func(method, target, accept string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		r.Header.Set(HeaderPaymentSignature, "anything")
		return r
	}
	base := fingerprint(req("POST", "/v1/exec", ""), o.route.Path, o.req, []byte("{}"))
	if fingerprint(req("POST", "/v1/exec", ""), o.route.Path, o.req, []byte("{}")) != base {
		t.Fatal("not deterministic")
	}
	o2 := *o
	o2.req.Amount = "1"
	for name, fp := range map[string]string{
		"method": fingerprint(req("PUT", "/v1/exec", ""), o.route.Path, o.req, []byte("{}")),
		"path":   fingerprint(req("POST", "/v1/exec/x", ""), o.route.Path, o.req, []byte("{}")),
		"query":  fingerprint(req("POST", "/v1/exec?a", ""), o.route.Path, o.req, []byte("{}")),
		"accept": fingerprint(req("POST", "/v1/exec", "text/event-stream"), o.route.Path, o.req, []byte("{}")),
		"body":   fingerprint(req("POST", "/v1/exec", ""), o.route.Path, o.req, []byte("{ }")),
		"price":  fingerprint(req("POST", "/v1/exec", ""), o2.route.Path, o2.req, []byte("{}")),
	} {
		if fp == base {
			t.Errorf("a different %s has the same fingerprint", name)
		}
	}
}

func TestPaymentIDConfigValidate(t *testing.T) {
	c := testConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.PaymentID.Lease = time.Minute // shorter than 20 s + 60 s + 2 × 60 s
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("short lease: %v", err)
	}
	c = testConfig()
	c.PaymentID.MaxAnswerBytes = -1
	if err := c.Validate(); err == nil {
		t.Fatal("negative bound accepted")
	}
	c = testConfig()
	c.FacilitatorTimeout = 10 * time.Minute
	if got := c.PaymentID.withDefaults(c.FacilitatorTimeout, c.ValidityMargin).Lease; got < 2*(20*time.Second+c.ValidityMargin+20*time.Minute) {
		t.Fatalf("default lease %s does not follow a long facilitator timeout", got)
	}
}

// An id's kept answer goes only to a payment its payer signed: a payment
// naming the payer but signed by another key is refused as any forged
// payment is, and learns nothing of the answer.
func TestPaymentIDNeedsThePayersSignature(t *testing.T) {
	rg := newIDRig(t, nil)
	const id, body = "pay_forgery_000000000001", `{"code":"secret"}`
	first := rg.pay1(t, "/v1/exec", body, id)
	if first.Code != 200 {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	o := rg.pay.offers["/v1/exec"]
	a := authFor(rg.payer, o) // from: the payer
	p := payloadFor(t, o, a, signAuth(t, newWallet(t), o.domain, a))
	p.Extensions[ExtensionPaymentIdentifier] = withID(id)
	w := rg.send("/v1/exec", body, header(t, p))
	if w.Code != 402 || w.Header().Get(HeaderReplayed) != "" || strings.Contains(w.Body.String(), handlerMark) || strings.Contains(w.Body.String(), `"run"`) {
		t.Fatalf("forged payment: %d %v %s", w.Code, w.Header(), w.Body)
	}
	rg.want(t, "forgery", 1, 1, 1)
}

// waivingHandler answers 200 with work an earlier request paid for.
type waivingHandler struct{ idHandler }

func (h *waivingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	Waive(r)
	h.idHandler.ServeHTTP(w, r)
}

// A waived answer passes through unsettled, without a receipt; under a
// payment id it is not kept, so the id's retry asks the handler again
// (a job_id still running answers differently later).
func TestWaivedAnswerIsNotCharged(t *testing.T) {
	Waive(httptest.NewRequest(http.MethodPost, "/", nil)) // outside a guarded handler: nothing
	rg := newIDRig(t, nil)
	wh := &waivingHandler{idHandler{status: 200}}
	rg.routes["/v1/exec"] = rg.pay.Wrap("/v1/exec", wh, idFail)
	const id, body = "pay_waived_0000000000001", `{}`
	for i, payment := range []string{
		rg.idPayment(t, rg.payer, "/v1/exec", nil),
		rg.idPayment(t, rg.payer, "/v1/exec", withID(id)),
		rg.idPayment(t, rg.payer, "/v1/exec", withID(id)),
	} {
		w := rg.send("/v1/exec", body, payment)
		if w.Code != 200 || w.Header().Get(HeaderPaymentResponse) != "" || w.Header().Get(HeaderReplayed) != "" ||
			w.Header().Get("X-Run") != fmt.Sprint(i+1) {
			t.Fatalf("call %d: %d %v %s; want the handler's answer, unsettled", i, w.Code, w.Header(), w.Body)
		}
	}
	if nv, ns := rg.fac.counts(); wh.count() != 3 || nv != 3 || ns != 0 {
		t.Fatalf("%d runs, %d verifies, %d settles; want 3, 3, 0", wh.count(), nv, ns)
	}
}

// The body a payment id's request is fingerprinted by is read up to
// MaxBodyBytes: one byte more is 413 before anything is verified, run or
// settled, and the id stays free; at the bound the request is served.
func TestPaymentIDBodyBound(t *testing.T) {
	const limit = 64
	rg := newIDRig(t, func(c *Config, _ *Deps) { c.PaymentID.MaxBodyBytes = limit })
	at := `{"code":"` + strings.Repeat("x", limit-len(`{"code":""}`)) + `"}`
	if len(at) != limit {
		t.Fatalf("the test's body is %d bytes, want %d", len(at), limit)
	}
	over := at[:len(at)-2] + `x"}`
	const id = "pay_body_bound_0000000001"
	if w := rg.pay1(t, "/v1/exec", over, id); w.Code != 413 || w.Body.String() != boxer.ECodePayloadTooLarge {
		t.Fatalf("a body of %d bytes: %d %s; want 413", len(over), w.Code, w.Body)
	}
	rg.want(t, "over the bound", 0, 0, 0)
	if w := rg.pay1(t, "/v1/exec", at, id); w.Code != 200 {
		t.Fatalf("a body of %d bytes under the same id: %d %s; want 200", len(at), w.Code, w.Body)
	}
	rg.want(t, "at the bound", 1, 1, 1)
}
