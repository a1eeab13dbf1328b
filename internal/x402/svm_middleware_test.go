package x402

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// supportedFacilitator is fakeFacilitator with a GET /supported that
// answers what the official facilitator answers (x402Facilitator's
// getSupported, with the exact EVM and SVM schemes registered).
type supportedFacilitator struct {
	*fakeFacilitator
	mu        sync.Mutex
	supported string
}

func (f *supportedFacilitator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/supported" {
		f.mu.Lock()
		body := f.supported
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
		return
	}
	f.fakeFacilitator.ServeHTTP(w, r)
}

func (f *supportedFacilitator) answer(body string) {
	f.mu.Lock()
	f.supported = body
	f.mu.Unlock()
}

// officialSupported is the official facilitator's answer, as recorded from
// @x402/core 2.27.0 with ExactEvmScheme and ExactSvmScheme registered.
func officialSupported(feePayer string) string {
	return `{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"},` +
		`{"x402Version":2,"scheme":"exact","network":"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp","extra":{"feePayer":"` + feePayer + `"}}],` +
		`"extensions":[],"signers":{"eip155:*":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"],"solana:*":["` + feePayer + `"]}}`
}

type svmRig struct {
	w       svmWorld
	fac     *supportedFacilitator
	handler *countingHandler
	pay     *Payments
	srv     http.Handler
}

func newSVMRig(t *testing.T) *svmRig {
	t.Helper()
	w := newSVMWorld(t)
	fac := &supportedFacilitator{fakeFacilitator: newFakeFacilitator()}
	fac.answer(officialSupported(w.feePayer.PublicKey().String()))
	fac.settleBody = `{"success":true,"transaction":"5p1vXfcgzS1NMwqRYSe38YbKsdaJWYc6YKo9hPsmioCUdL83MK4B53ytE3JzCKHiqjwziemzuaFf92zhhVb5ZDuQ","network":"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp","payer":"` + w.client.PublicKey().String() + `"}`
	fs := httptest.NewServer(fac)
	t.Cleanup(fs.Close)
	cfg := w.config()
	cfg.FacilitatorURL = fs.URL
	p, err := New(cfg, Deps{Nonces: NewMemoryNonceStore(), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	rg := &svmRig{w: w, fac: fac, handler: &countingHandler{status: 200}, pay: p}
	rg.srv = p.Wrap("/v1/exec", rg.handler, testFail)
	return rg
}

func (rg *svmRig) do(paymentHeader string) *httptest.ResponseRecorder {
	return postExec(rg.srv, paymentHeader)
}

func challengeAccepts(t *testing.T, w *httptest.ResponseRecorder) (*PaymentRequired, []map[string]any) {
	t.Helper()
	if w.Code != http.StatusPaymentRequired {
		t.Fatalf("status %d, want 402: %s", w.Code, w.Body)
	}
	var pr PaymentRequired
	if err := DecodeHeader(w.Header().Get(HeaderPaymentRequired), &pr); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Accepts []map[string]any `json:"accepts"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	return &pr, raw.Accepts
}

// TestSVMOffer: Solana is offered beside Base once the facilitator's
// /supported names the fee payer, with extra exactly {feePayer}; the EVM
// entry is unchanged.
func TestSVMOffer(t *testing.T) {
	rg := newSVMRig(t)
	_, acc := challengeAccepts(t, rg.do(""))
	if len(acc) != 1 {
		t.Fatalf("before /supported answered: %d accepts, want 1 (EVM)", len(acc))
	}
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil {
		t.Fatal(err)
	}
	fp := rg.w.feePayer.PublicKey().String()
	if rg.pay.SolanaFeePayer() != fp {
		t.Fatalf("fee payer %q, want %s", rg.pay.SolanaFeePayer(), fp)
	}
	_, acc = challengeAccepts(t, rg.do(""))
	if len(acc) != 2 {
		t.Fatalf("%d accepts, want 2", len(acc))
	}
	evm, _ := json.Marshal(acc[0]["extra"])
	if string(evm) != `{"name":"USD Coin","version":"2"}` || acc[0]["network"] != DefaultNetwork {
		t.Fatalf("EVM entry changed: %v", acc[0])
	}
	svm, _ := json.Marshal(acc[1])
	want := `{"amount":"20000","asset":"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v","extra":{"feePayer":"` + fp + `"},` +
		`"maxTimeoutSeconds":60,"network":"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp","payTo":"` + rg.w.payTo.String() + `","scheme":"exact"}`
	if string(svm) != want {
		t.Fatalf("SVM entry\n got %s\nwant %s", svm, want)
	}
}

// TestSVMPaidAndReplayed: a Solana payment runs the handler once, the
// facilitator gets the Solana requirements; the same payment again is
// refused before the facilitator is asked.
func TestSVMPaidAndReplayed(t *testing.T) {
	rg := newSVMRig(t)
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := rg.pay.offers["/v1/exec"].svm
	h := header(t, svmPayload(t, o, rg.w.build(t, rg.w.spec(o))))

	w := rg.do(h)
	if w.Code != 200 || !strings.Contains(w.Body.String(), handlerMark) {
		t.Fatalf("status %d body %s", w.Code, w.Body)
	}
	var receipt SettleResponse
	if err := DecodeHeader(w.Header().Get(HeaderPaymentResponse), &receipt); err != nil || !receipt.Success ||
		receipt.Network != DefaultSolanaNetwork || receipt.Payer != rg.w.client.PublicKey().String() {
		t.Fatalf("receipt %+v (%v)", receipt, err)
	}
	rg.fac.mu.Lock()
	sent := rg.fac.verifies[0].PaymentRequirements
	settled := rg.fac.settles[0].PaymentRequirements
	rg.fac.mu.Unlock()
	sentJSON, _ := json.Marshal(sent)
	settledJSON, _ := json.Marshal(settled)
	if sent.Network != DefaultSolanaNetwork || sent.Extra == nil || sent.Extra.FeePayer != rg.w.feePayer.PublicKey().String() || string(sentJSON) != string(settledJSON) {
		t.Fatalf("requirements sent: verify %+v settle %+v", sent, settled)
	}

	w = rg.do(h)
	pr, _ := challengeAccepts(t, w)
	if !strings.HasPrefix(pr.Error, ReasonReplay) {
		t.Fatalf("replay: %q", pr.Error)
	}
	if v, s := rg.fac.counts(); v != 1 || s != 1 || rg.handler.count() != 1 {
		t.Fatalf("verify %d settle %d runs %d after the replay, want 1 1 1", v, s, rg.handler.count())
	}

	// A refused local check costs the facilitator nothing either.
	s := rg.w.spec(o)
	s.amount--
	pr, _ = challengeAccepts(t, rg.do(header(t, svmPayload(t, o, rg.w.build(t, s)))))
	if !strings.HasPrefix(pr.Error, ReasonSVMAmount) {
		t.Fatalf("underpaid: %q", pr.Error)
	}
	if v, _ := rg.fac.counts(); v != 1 {
		t.Fatalf("facilitator asked to verify an underpayment")
	}
}

// TestSVMSupported: a facilitator that does not settle Solana, or names no
// fee payer, is a configuration error; a fee payer is kept while the
// facilitator still names it, and replaced when it does not.
func TestSVMSupported(t *testing.T) {
	rg := newSVMRig(t)
	fp := rg.w.feePayer.PublicKey().String()
	for _, body := range []string{
		`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"}]}`,
		`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"},{"x402Version":2,"scheme":"exact","network":"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"}]}`,
		`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"},{"x402Version":2,"scheme":"exact","network":"solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1","extra":{"feePayer":"` + fp + `"}}]}`,
		`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"},{"x402Version":2,"scheme":"exact","network":"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp","extra":{"feePayer":"0x00"}}]}`,
	} {
		rg.fac.answer(body)
		if err := rg.pay.CheckFacilitator(context.Background()); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "--x402-solana-network") {
			t.Fatalf("%s: %v, want ErrUnsupported naming the flag", body, err)
		}
	}

	rg.fac.answer(officialSupported(fp))
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := newSVMWorld(t).feePayer.PublicKey().String()
	both := strings.Replace(officialSupported(fp), `"extra":{"feePayer":"`+fp+`"}}`,
		`"extra":{"feePayer":"`+other+`"}},{"x402Version":2,"scheme":"exact","network":"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp","extra":{"feePayer":"`+fp+`"}}`, 1)
	rg.fac.answer(both)
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil || rg.pay.SolanaFeePayer() != fp {
		t.Fatalf("still named: fee payer %s (%v), want %s kept", rg.pay.SolanaFeePayer(), err, fp)
	}
	rg.fac.answer(officialSupported(other))
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil || rg.pay.SolanaFeePayer() != other {
		t.Fatalf("no longer named: fee payer %s (%v), want %s", rg.pay.SolanaFeePayer(), err, other)
	}
}

func TestSolanaConfigValidate(t *testing.T) {
	w := newSVMWorld(t)
	tests := []struct {
		name string
		edit func(c *SolanaConfig)
		want string // "" is valid
	}{
		{name: "defaults"},
		{name: "devnet", edit: func(c *SolanaConfig) { c.Network = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1" }},
		{name: "EVM pay-to", edit: func(c *SolanaConfig) { c.PayTo = testPayTo }, want: "--x402-solana-pay-to"},
		{name: "EVM network", edit: func(c *SolanaConfig) { c.Network = "eip155:8453" }, want: "--x402-solana-network"},
		{name: "not base58", edit: func(c *SolanaConfig) { c.Network = "solana:0OIl" }, want: "--x402-solana-network"},
		{name: "too long", edit: func(c *SolanaConfig) { c.Network = "solana:" + strings.Repeat("a", 33) }, want: "--x402-solana-network"},
		{name: "bad asset", edit: func(c *SolanaConfig) { c.Asset = "USDC" }, want: "--x402-solana-asset"},
		{name: "decimals", edit: func(c *SolanaConfig) { c.AssetDecimals = 20 }, want: "--x402-solana-asset-decimals"},
		{name: "price finer than the token", edit: func(c *SolanaConfig) { c.AssetDecimals = 1 }, want: "solana: price"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := w.config()
			if tt.edit != nil {
				tt.edit(&c.Solana)
			}
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
	c := testConfig()
	c.Solana.Network = "nonsense" // not offered: not checked
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A facilitator that stops listing Solana after the start withdraws it
// from the offers and leaves the node ready (the EVM payment still
// works); listed again, it is offered again.
func TestSVMWithdrawnWhenNoLongerListed(t *testing.T) {
	rg := newSVMRig(t)
	fp := rg.w.feePayer.PublicKey().String()
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, acc := challengeAccepts(t, rg.do("")); len(acc) != 2 {
		t.Fatalf("at start: %d accepts, want EVM and Solana", len(acc))
	}
	rg.fac.answer(`{"kinds":[{"x402Version":2,"scheme":"exact","network":"eip155:8453"}]}`)
	err := rg.pay.CheckFacilitator(context.Background())
	if !errors.Is(err, ErrUnsupported) || rg.pay.Ready() != nil {
		t.Fatalf("Solana no longer listed: check %v, ready %v; want the check to say so and the node ready", err, rg.pay.Ready())
	}
	if _, acc := challengeAccepts(t, rg.do("")); len(acc) != 1 || acc[0]["network"] != "eip155:8453" || rg.pay.SolanaFeePayer() != "" {
		t.Fatalf("Solana no longer listed: accepts %v, fee payer %q; want EVM alone", acc, rg.pay.SolanaFeePayer())
	}
	rg.fac.answer(officialSupported(fp))
	if err := rg.pay.CheckFacilitator(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, acc := challengeAccepts(t, rg.do("")); len(acc) != 2 || rg.pay.SolanaFeePayer() != fp {
		t.Fatalf("listed again: %d accepts, fee payer %q", len(acc), rg.pay.SolanaFeePayer())
	}
}
