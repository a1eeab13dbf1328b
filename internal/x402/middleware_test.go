package x402

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeFacilitator answers /verify and /settle as configured and records
// what it was sent.
type fakeFacilitator struct {
	verifyStatus int
	verifyBody   string
	settleStatus int
	settleBody   string
	// settleFirst, if any, are the answers to the first settles, in order;
	// settleStatus and settleBody answer the rest.
	settleFirst []fakeAnswer

	mu       sync.Mutex
	verifies []FacilitatorRequest
	settles  []FacilitatorRequest
	auth     []string
}

func newFakeFacilitator() *fakeFacilitator {
	return &fakeFacilitator{
		verifyStatus: 200,
		verifyBody:   `{"isValid":true,"payer":"0x0"}`,
		settleStatus: 200,
		settleBody:   `{"success":true,"transaction":"0xabc123","network":"eip155:8453","payer":"0x0"}`,
	}
}

func (f *fakeFacilitator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req FacilitatorRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	status, body := f.verifyStatus, f.verifyBody
	if r.URL.Path == "/settle" {
		f.settles = append(f.settles, req)
		status, body = f.settleStatus, f.settleBody
		if len(f.settleFirst) > 0 {
			status, body = f.settleFirst[0].status, f.settleFirst[0].body
			f.settleFirst = f.settleFirst[1:]
		}
	} else {
		f.verifies = append(f.verifies, req)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// fakeAnswer is one answer of the fake facilitator.
type fakeAnswer struct {
	status int
	body   string
}

func (f *fakeFacilitator) counts() (verify, settle int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.verifies), len(f.settles)
}

// handlerMark tells the handler's output apart from the bazaar example,
// which also shows "4\n".
const handlerMark = "handler-output-7f3a"

// countingHandler is boxer's handler stand-in.
type countingHandler struct {
	status int
	mu     sync.Mutex
	calls  int
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(h.status)
	io.WriteString(w, `{"success":true,"result":{"stdout":"4\n","id":"`+handlerMark+`"}}`)
}

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

type rig struct {
	fac      *fakeFacilitator
	handler  *countingHandler
	pay      *Payments
	srv      http.Handler
	offer    *offer
	settled  []Settlement
	settleMu sync.Mutex
}

func newRig(t *testing.T, fac *fakeFacilitator, status int) *rig {
	t.Helper()
	return newRigOn(t, fac, status, NewMemoryNonceStore())
}

// newRigOn is newRig with its used payments kept in nonces.
func newRigOn(t *testing.T, fac *fakeFacilitator, status int, nonces NonceStore) *rig {
	t.Helper()
	fs := httptest.NewServer(fac)
	t.Cleanup(fs.Close)
	cfg := testConfig()
	cfg.FacilitatorURL = fs.URL
	cfg.FacilitatorAuthHeader = "Authorization: Bearer sekret"
	rg := &rig{fac: fac, handler: &countingHandler{status: status}, offer: testOffer(t, "/v1/exec")}
	p, err := New(cfg, Deps{
		Nonces:    nonces,
		Now:       func() time.Time { return testNow },
		OnSettled: func(s Settlement) { rg.settleMu.Lock(); rg.settled = append(rg.settled, s); rg.settleMu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	rg.pay = p
	rg.srv = p.Wrap("/v1/exec", rg.handler, testFail)
	return rg
}

func (rg *rig) do(paymentHeader string) *httptest.ResponseRecorder {
	return postExec(rg.srv, paymentHeader)
}

// postExec sends srv a POST /v1/exec of print(2 + 2), with paymentHeader
// in PAYMENT-SIGNATURE unless it is empty.
func postExec(srv http.Handler, paymentHeader string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://boxer.test/v1/exec", strings.NewReader(`{"code":"print(2 + 2)"}`))
	if paymentHeader != "" {
		r.Header.Set(HeaderPaymentSignature, paymentHeader)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return w
}

// challengeOf decodes the 402's PAYMENT-REQUIRED header and checks the body
// carries the same requirements.
func challengeOf(t *testing.T, w *httptest.ResponseRecorder) *PaymentRequired {
	t.Helper()
	if w.Code != http.StatusPaymentRequired {
		t.Fatalf("status = %d, want 402; body %s", w.Code, w.Body)
	}
	var pr PaymentRequired
	if err := DecodeHeader(w.Header().Get(HeaderPaymentRequired), &pr); err != nil {
		t.Fatalf("PAYMENT-REQUIRED: %v", err)
	}
	var body PaymentRequired
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("402 body: %v", err)
	}
	if body.Error != pr.Error || len(body.Accepts) != 1 || body.Accepts[0].Amount != pr.Accepts[0].Amount {
		t.Fatalf("body %+v differs from header %+v", body, pr)
	}
	return &pr
}

func TestUnpaidGets402WithBazaar(t *testing.T) {
	rg := newRig(t, newFakeFacilitator(), 200)
	w := rg.do("")
	pr := challengeOf(t, w)
	if pr.X402Version != 2 || pr.Resource.URL != "http://boxer.test/v1/exec" || pr.Accepts[0].Amount != "20000" {
		t.Fatalf("challenge = %+v", pr)
	}
	b, ok := pr.Extensions["bazaar"]
	if !ok || b.Info == nil || b.Schema == nil {
		t.Fatalf("no bazaar extension: %+v", pr.Extensions)
	}
	if !strings.Contains(pr.Error, "PAYMENT-SIGNATURE") {
		t.Errorf("error = %q", pr.Error)
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("402 may be cached")
	}
	if rg.handler.count() != 0 {
		t.Fatal("handler ran unpaid")
	}

	r := httptest.NewRequest(http.MethodPost, "/v1/exec", nil)
	r.Header.Set(HeaderPaymentV1, "e30=")
	w = httptest.NewRecorder()
	rg.srv.ServeHTTP(w, r)
	if pr := challengeOf(t, w); !strings.HasPrefix(pr.Error, ReasonV1Unsupported) {
		t.Errorf("v1 error = %q", pr.Error)
	}
}

// pendingBody is a facilitator's settlement_pending answer.
const pendingBody = `{"success":false,"errorReason":"settlement_pending","errorMessage":"timed out waiting for receipt","transaction":"0xabc123","network":"eip155:8453"}`

func TestPaidRequest(t *testing.T) {
	tests := []struct {
		name          string
		handlerStatus int
		settleStatus  int
		settleBody    string
		settleFirst   []fakeAnswer
		wantStatus    int
		wantOutput    bool
		wantSettle    int
		wantReason    string
	}{
		{name: "success settles", handlerStatus: 200, wantStatus: 200, wantOutput: true, wantSettle: 1},
		{name: "settle refused withholds output", handlerStatus: 200, settleBody: `{"success":false,"errorReason":"insufficient_funds","transaction":"","network":"eip155:8453"}`,
			wantStatus: 402, wantSettle: 1, wantReason: ReasonSettlementFailed},
		{name: "settle HTTP 500 withholds output", handlerStatus: 200, settleStatus: 500, settleBody: `oops`,
			wantStatus: 402, wantSettle: 1, wantReason: ReasonSettlementFailed},
		{name: "settle refused with HTTP 400", handlerStatus: 200, settleStatus: 400, settleBody: `{"success":false,"errorReason":"invalid_exact_evm_nonce_already_used","transaction":"","network":"eip155:8453"}`,
			wantStatus: 402, wantSettle: 1, wantReason: ReasonSettlementFailed},
		// settlement_pending: the transfer went out but its receipt did not
		// come in time. Asked once more with the same payment, the
		// facilitator waits for that transfer rather than sending another.
		{name: "settlement pending, then settled: asked twice, released", handlerStatus: 200,
			settleFirst: []fakeAnswer{{200, pendingBody}}, wantStatus: 200, wantOutput: true, wantSettle: 2},
		{name: "settlement pending as HTTP 500 (the official facilitator's error), then settled", handlerStatus: 200,
			settleFirst: []fakeAnswer{{500, pendingBody}}, wantStatus: 200, wantOutput: true, wantSettle: 2},
		{name: "settlement pending twice: asked twice only, withheld", handlerStatus: 200,
			settleBody: pendingBody, wantStatus: 402, wantSettle: 2, wantReason: ReasonSettlementFailed},
		{name: "settlement pending without a transaction is not asked again", handlerStatus: 200,
			settleBody: `{"success":false,"errorReason":"settlement_pending","transaction":"","network":"eip155:8453"}`,
			wantStatus: 402, wantSettle: 1, wantReason: ReasonSettlementFailed},
		{name: "HTTP 500 claiming success is not believed", handlerStatus: 200, settleStatus: 500,
			settleBody: `{"success":true,"transaction":"0xabc123","network":"eip155:8453"}`, wantStatus: 402, wantSettle: 1, wantReason: ReasonSettlementFailed},
		{name: "HTTP 400 claiming success is not believed", handlerStatus: 200, settleStatus: 400,
			settleBody: `{"success":true,"transaction":"0xabc123","network":"eip155:8453"}`, wantStatus: 402, wantSettle: 1, wantReason: ReasonSettlementFailed},
		{name: "handler 500 not settled", handlerStatus: 500, wantStatus: 500, wantOutput: true},
		{name: "handler busy not settled", handlerStatus: 429, wantStatus: 429, wantOutput: true},
		{name: "handler 400 not settled", handlerStatus: 400, wantStatus: 400, wantOutput: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fac := newFakeFacilitator()
			if tt.settleStatus != 0 {
				fac.settleStatus = tt.settleStatus
			}
			if tt.settleBody != "" {
				fac.settleBody = tt.settleBody
			}
			fac.settleFirst = tt.settleFirst
			rg := newRig(t, fac, tt.handlerStatus)
			payer := newWallet(t)
			h := paidHeader(t, payer, rg.offer)
			w := rg.do(h)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.wantStatus, w.Body)
			}
			if got := strings.Contains(w.Body.String(), handlerMark); got != tt.wantOutput {
				t.Fatalf("output released = %v, want %v: %s", got, tt.wantOutput, w.Body)
			}
			if rg.handler.count() != 1 {
				t.Fatalf("handler ran %d times", rg.handler.count())
			}
			nv, ns := fac.counts()
			if nv != 1 || ns != tt.wantSettle {
				t.Fatalf("verify %d, settle %d calls; want 1, %d", nv, ns, tt.wantSettle)
			}
			if tt.wantReason != "" {
				if pr := challengeOf(t, w); !strings.HasPrefix(pr.Error, tt.wantReason) {
					t.Fatalf("error = %q, want %s", pr.Error, tt.wantReason)
				}
				var sr SettleResponse
				if err := DecodeHeader(w.Header().Get(HeaderPaymentResponse), &sr); err != nil || sr.Success {
					t.Fatalf("failed settlement not reported: %+v, %v", sr, err)
				}
			}
			if tt.wantStatus != 200 {
				if len(rg.settled) != 0 {
					t.Fatalf("OnSettled called for an unsettled payment")
				}
				return
			}
			var sr SettleResponse
			if err := DecodeHeader(w.Header().Get(HeaderPaymentResponse), &sr); err != nil {
				t.Fatal(err)
			}
			if !sr.Success || sr.Transaction != "0xabc123" || sr.Network != "eip155:8453" {
				t.Fatalf("PAYMENT-RESPONSE = %+v", sr)
			}
			if len(rg.settled) != 1 || rg.settled[0].Payer != payer.addr.String() || rg.settled[0].Amount != "20000" {
				t.Fatalf("OnSettled = %+v", rg.settled)
			}
			// The facilitator got the route's own requirements and the
			// client's payload byte for byte, with the auth header.
			for _, req := range append(fac.verifies, fac.settles...) {
				if req.X402Version != 2 || req.PaymentRequirements.Amount != "20000" || req.PaymentRequirements.PayTo != testPayTo ||
					req.PaymentRequirements.Extra == nil || req.PaymentRequirements.Extra.Name != "USD Coin" {
					t.Fatalf("facilitator request = %+v", req)
				}
				sent, _ := DecodePaymentHeader(h)
				var a, b bytes.Buffer
				json.Compact(&a, sent.Raw())
				json.Compact(&b, req.PaymentPayload)
				if a.String() != b.String() {
					t.Fatalf("payload changed on the way:\n%s\n%s", a.String(), b.String())
				}
			}
			if fac.auth[0] != "Bearer sekret" {
				t.Fatalf("auth header = %q", fac.auth[0])
			}
		})
	}
}

func TestRefusedPaymentsDoNotRun(t *testing.T) {
	payer := newWallet(t)
	tests := []struct {
		name         string
		verifyStatus int
		verifyBody   string
		header       func(o *offer) string
		wantStatus   int
		wantReason   string
		wantVerify   int
	}{
		{name: "verify isValid false", verifyBody: `{"isValid":false,"invalidReason":"insufficient_funds","invalidMessage":"revert-detail","payer":"0x1"}`,
			wantStatus: 402, wantReason: ReasonVerifyFailed, wantVerify: 1},
		{name: "verify isValid false with HTTP 400", verifyStatus: 400, verifyBody: `{"isValid":false,"invalidReason":"invalid_exact_evm_signature"}`,
			wantStatus: 402, wantReason: ReasonVerifyFailed, wantVerify: 1},
		{name: "facilitator down", verifyStatus: 502, verifyBody: `bad gateway`, wantStatus: 503, wantVerify: 1},
		{name: "facilitator answer without isValid", verifyBody: `{"error":"?"}`, wantStatus: 503, wantVerify: 1},
		{name: "underpaid refused locally", header: func(o *offer) string {
			a := authFor(payer, o)
			a.Value = "10000"
			return header(t, payloadFor(t, o, a, signAuth(t, payer, o.domain, a)))
		}, wantStatus: 402, wantReason: ReasonValue},
		{name: "malformed header", header: func(*offer) string { return "not base64!" }, wantStatus: 402, wantReason: ReasonInvalidPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fac := newFakeFacilitator()
			if tt.verifyStatus != 0 {
				fac.verifyStatus = tt.verifyStatus
			}
			if tt.verifyBody != "" {
				fac.verifyBody = tt.verifyBody
			}
			rg := newRig(t, fac, 200)
			h := paidHeader(t, payer, rg.offer)
			if tt.header != nil {
				h = tt.header(rg.offer)
			}
			w := rg.do(h)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.wantStatus, w.Body)
			}
			if tt.wantReason != "" {
				if pr := challengeOf(t, w); !strings.HasPrefix(pr.Error, tt.wantReason) {
					t.Fatalf("error = %q, want %s", pr.Error, tt.wantReason)
				}
			}
			if rg.handler.count() != 0 {
				t.Fatal("handler ran")
			}
			if strings.Contains(w.Body.String(), "revert-detail") {
				t.Fatal("facilitator's message reached the caller")
			}
			if nv, ns := fac.counts(); nv != tt.wantVerify || ns != 0 {
				t.Fatalf("verify %d, settle %d calls", nv, ns)
			}
		})
	}
}

func TestReplayRefused(t *testing.T) {
	fac := newFakeFacilitator()
	rg := newRig(t, fac, 200)
	h := paidHeader(t, newWallet(t), rg.offer)
	if w := rg.do(h); w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w := rg.do(h)
	if pr := challengeOf(t, w); !strings.HasPrefix(pr.Error, ReasonReplay) {
		t.Fatalf("error = %q", pr.Error)
	}
	if rg.handler.count() != 1 {
		t.Fatalf("handler ran %d times", rg.handler.count())
	}
	if nv, ns := fac.counts(); nv != 1 || ns != 1 {
		t.Fatalf("verify %d, settle %d", nv, ns)
	}
}

// blockingHandler holds the first run until released, so a duplicate can be
// sent while it is in flight.
type blockingHandler struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (h *blockingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	h.entered <- struct{}{}
	<-h.release
	io.WriteString(w, `{"success":true}`)
}

func TestConcurrentDuplicateRunsOnce(t *testing.T) {
	fac := newFakeFacilitator()
	rg := newRig(t, fac, 200)
	bh := &blockingHandler{entered: make(chan struct{}, 2), release: make(chan struct{})}
	srv := rg.pay.Wrap("/v1/exec", bh, testFail)
	h := paidHeader(t, newWallet(t), rg.offer)
	send := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://boxer.test/v1/exec", nil)
		r.Header.Set(HeaderPaymentSignature, h)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- send() }()
	<-bh.entered // the first copy is running

	w := send()
	pr := challengeOf(t, w)
	if !strings.HasPrefix(pr.Error, ReasonInFlight) {
		t.Fatalf("duplicate error = %q", pr.Error)
	}
	close(bh.release)
	if w := <-first; w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	// After the first completes the payment is spent: a late copy is a replay.
	if pr := challengeOf(t, send()); !strings.HasPrefix(pr.Error, ReasonReplay) {
		t.Fatalf("late duplicate error = %q", pr.Error)
	}
	if bh.calls != 1 {
		t.Fatalf("handler ran %d times", bh.calls)
	}
}

func TestModeOffIsFree(t *testing.T) {
	p, err := New(DefaultConfig(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	h := &countingHandler{status: 200}
	w := httptest.NewRecorder()
	p.Wrap("/v1/exec", h, testFail).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/exec", nil))
	if w.Code != 200 || h.count() != 1 {
		t.Fatalf("status %d, calls %d", w.Code, h.count())
	}
}

func TestWrapUnknownRoutePanics(t *testing.T) {
	rg := newRig(t, newFakeFacilitator(), 200)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an unpriced route")
		}
	}()
	rg.pay.Wrap("/v1/free-lunch", rg.handler, testFail)
}

func TestNewNeedsNonceStore(t *testing.T) {
	if _, err := New(testConfig(), Deps{}); err == nil {
		t.Fatal("x402 without a nonce store accepted")
	}
}

// A handler learns whether its request's payment settled, once, after it
// returned and before its answer goes out: true only for a settled one.
func TestAfterSettlement(t *testing.T) {
	for _, tt := range []struct {
		name       string
		status     int
		settleBody string
		panics     bool
		want       string
	}{
		{name: "settled", status: 200, want: "true"},
		{name: "settlement refused", status: 200, settleBody: `{"success":false,"errorReason":"insufficient_funds","transaction":"","network":"eip155:8453"}`, want: "false"},
		{name: "handler failed: not settled", status: 500, want: "false"},
		{name: "handler panicked", panics: true, want: "false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fac := newFakeFacilitator()
			if tt.settleBody != "" {
				fac.settleBody = tt.settleBody
			}
			rg := newRig(t, fac, 200)
			var got []string
			var registered bool
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				registered = AfterSettlement(r, func(settled bool) {
					_, ns := fac.counts()
					got = append(got, fmt.Sprintf("%v", settled))
					if settled && ns != 1 {
						t.Errorf("told settled before settlement (%d settles)", ns)
					}
				})
				if tt.panics {
					panic("handler bug")
				}
				w.WriteHeader(tt.status)
			})
			srv := rg.pay.Wrap("/v1/exec", h, testFail)
			req := httptest.NewRequest(http.MethodPost, "http://boxer.test/v1/exec", strings.NewReader(`{}`))
			req.Header.Set(HeaderPaymentSignature, paidHeader(t, newWallet(t), rg.offer))
			func() {
				defer func() {
					if p := recover(); (p != nil) != tt.panics {
						t.Errorf("panic = %v", p)
					}
				}()
				srv.ServeHTTP(httptest.NewRecorder(), req)
			}()
			if !registered || strings.Join(got, ",") != tt.want {
				t.Fatalf("registered %v, told %v; want once, %s", registered, got, tt.want)
			}
		})
	}
	if AfterSettlement(httptest.NewRequest(http.MethodGet, "/", nil), func(bool) { t.Fatal("called outside a payment") }) {
		t.Fatal("registered outside a payment")
	}
}
