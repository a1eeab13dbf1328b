package x402

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"boxer"
)

// guarded is what Payments.Wrap hands the handler it guards, in the
// request's context: whose payment it is (PayerOf), whether the handler
// waives the charge (Waive), and who is to be told the settlement's
// outcome (AfterSettlement).
type guarded struct {
	payer  string
	waived bool

	mu    sync.Mutex
	after []func(settled bool)
	told  bool
}

type guardKey struct{}

// guardOf is r's guard, nil outside a handler that Payments.Wrap guards.
func guardOf(r *http.Request) *guarded {
	g, _ := r.Context().Value(guardKey{}).(*guarded)
	return g
}

// PayerOf returns the address of the payer whose verified payment r carries,
// inside a handler that Payments.Wrap guards; "" elsewhere.
func PayerOf(r *http.Request) string {
	if g := guardOf(r); g != nil {
		return g.payer
	}
	return ""
}

// Waive tells the payment guarding r, inside a handler that Payments.Wrap
// guards, not to charge the answer: it is work an earlier request paid
// for (a kept job_id result). The payment is verified, spent and not
// settled, as for a failed run. Elsewhere it does nothing.
func Waive(r *http.Request) {
	if g := guardOf(r); g != nil {
		g.waived = true
	}
}

// AfterSettlement has f told, inside a handler that Payments.Wrap guards,
// whether the request's payment settled: once, after the handler has
// returned and settlement is decided, before the answer is released. A
// handler that keeps what it made for the payer (a job's result, a
// session) keeps it for good only then, or a payment that never settles
// would leave the payer something to fetch without paying. It reports
// false, and never calls f, outside such a handler.
func AfterSettlement(r *http.Request, f func(settled bool)) bool {
	g := guardOf(r)
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.after = append(g.after, f)
	return true
}

// tell calls the AfterSettlement functions with settled, the first time
// only.
func (g *guarded) tell(settled bool) {
	g.mu.Lock()
	fs, told := g.after, g.told
	g.after, g.told = nil, true
	g.mu.Unlock()
	if told {
		return
	}
	for _, f := range fs {
		f(settled)
	}
}

// Settlement is one payment that went through, reported to Deps.OnSettled
// (for /v1/health's uniquePayers30d and for accounting).
type Settlement struct {
	Route       string
	Payer       string // EIP-55 or base58 address
	Nonce       string // lowercase 0x hex; Solana: sha256:<hex of the message>
	Amount      string // atomic units
	Network     string
	Transaction string
	At          time.Time
}

// Deps are what Payments needs from the rest of boxer.
type Deps struct {
	// Nonces records used payments; required when payments are on.
	Nonces NonceStore
	// Facilitator defaults to a FacilitatorClient built from Config.
	Facilitator Facilitator
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now defaults to time.Now; tests pin it.
	Now func() time.Time
	// OnSettled, if set, is called after each settled payment, once the
	// response has been written. It must not block for long.
	OnSettled func(Settlement)
	// PaymentIDs keeps the answers of requests with a payment id; it
	// defaults to a MemoryPaymentIDStore.
	PaymentIDs PaymentIDStore
}

// Payments guards priced routes. Its zero value is not usable; call New.
type Payments struct {
	cfg       Config
	offers    map[string]*offer
	nonces    NonceStore
	fac       Facilitator
	log       *slog.Logger
	now       func() time.Time
	onSettled func(Settlement)
	inflight  inflight
	health    facilitatorHealth // see CheckFacilitator
	svmFee    *svmFeePayer      // nil unless Solana is offered
	ids       PaymentIDStore    // see serveOnce
	pid       PaymentIDConfig
	idFlights idFlights
	started   time.Time // older pending payment ids of this node are stale
}

// New validates cfg and returns the payment guard. With Mode off it returns
// a Payments whose Wrap is the identity.
func New(cfg Config, deps Deps) (*Payments, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Payments{cfg: cfg, nonces: deps.Nonces, fac: deps.Facilitator, log: deps.Logger, now: deps.Now, onSettled: deps.OnSettled}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.ids, p.pid = deps.PaymentIDs, cfg.PaymentID.withDefaults(cfg.FacilitatorTimeout, cfg.ValidityMargin)
	p.started = p.now().Truncate(time.Millisecond) // as the store keeps times
	if p.ids == nil {
		p.ids = NewMemoryPaymentIDStore(p.now)
	}
	if !p.Enabled() {
		return p, nil
	}
	if p.nonces == nil {
		return nil, errors.New("payments: x402 needs a nonce store")
	}
	if p.fac == nil {
		fc, err := NewFacilitatorClient(cfg.FacilitatorURL, cfg.FacilitatorAuthHeader, cfg.FacilitatorTimeout, nil)
		if err != nil {
			return nil, fmt.Errorf("payments: %w", err)
		}
		p.fac = fc
	}
	p.offers = map[string]*offer{}
	if cfg.Solana.Enabled() {
		p.svmFee = &svmFeePayer{}
	}
	for _, r := range cfg.Routes {
		o, err := newOffer(&p.cfg, r)
		if err != nil {
			return nil, fmt.Errorf("payments: %w", err)
		}
		if p.svmFee != nil {
			if o.svm, err = newSVMOffer(&p.cfg, r, p.svmFee); err != nil {
				return nil, fmt.Errorf("payments: %w", err)
			}
		}
		p.offers[r.Path] = o
	}
	return p, nil
}

// Enabled reports whether routes are priced.
func (p *Payments) Enabled() bool { return p.cfg.Mode == ModeX402 }

// PaymentRequired returns the challenge for route as seen by request r (for
// resource.url), for discovery documents; ok is false for a free route.
func (p *Payments) PaymentRequired(route string, r *http.Request) (pr *PaymentRequired, ok bool) {
	o := p.offers[route]
	if o == nil {
		return nil, false
	}
	return o.paymentRequired(p.cfg.PublicURL, r, ""), true
}

// ErrorWriter answers a request with boxer's error envelope and the HTTP
// status its code maps to: the api's one error table, which the caller of
// Wrap hands in, so that a failure of the payment layer reads like any other.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, e *boxer.Error)

// Wrap returns next guarded by payment for route; fail writes the payment
// layer's own failures (not its 402 challenges, whose body is the
// protocol's). With payments off it returns next. It panics when payments
// are on and route has no price: that is a wiring mistake that would
// otherwise serve the route for free.
func (p *Payments) Wrap(route string, next http.Handler, fail ErrorWriter) http.Handler {
	if !p.Enabled() {
		return next
	}
	o := p.offers[route]
	if o == nil {
		panic(fmt.Sprintf("x402: route %q has no price in the payment config", route))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serveOnce(w, r, o, next, fail)
	})
}

// serve is one request to a priced route; doc.go draws its sequence. It
// reports whether the payment settled.
func (p *Payments) serve(w http.ResponseWriter, r *http.Request, o *offer, next http.Handler, fail ErrorWriter) (settled bool) {
	ctx := r.Context()
	header := r.Header.Get(HeaderPaymentSignature)
	if header == "" {
		if r.Header.Get(HeaderPaymentV1) != "" {
			p.challenge(w, r, fail, o, reject(ReasonV1Unsupported, "x402 v1 (X-PAYMENT) is not accepted; pay with x402 v2 (PAYMENT-SIGNATURE)"), nil)
			return
		}
		p.challenge(w, r, fail, o, reject(ReasonMissing, "PAYMENT-SIGNATURE header is required"), nil)
		return
	}
	payload, err := DecodePaymentHeader(header)
	if err != nil {
		p.challenge(w, r, fail, o, reject(ReasonInvalidPayload, "PAYMENT-SIGNATURE: %v", err), nil)
		return
	}
	checked, rej := o.check(payload, p.now(), p.cfg.ValidityMargin)
	if rej != nil {
		p.challenge(w, r, fail, o, rej, nil)
		return
	}
	payer, nonce, req := checked.payerKey, checked.nonce, checked.req
	log := p.log.With("route", o.route.Path, "payer", checked.payer, "nonce", nonce)

	key := payer + "/" + nonce
	if !p.inflight.claim(key) {
		p.challenge(w, r, fail, o, reject(ReasonInFlight, "this payment is already being processed by another request"), nil)
		return
	}
	defer p.inflight.release(key)

	// The nonce is spent before the facilitator is asked, so a replay
	// costs nothing but a store lookup. A payment whose run boxer then
	// fails is never settled: the caller signs a new one.
	fresh, err := p.nonces.UseNonce(ctx, payer, nonce)
	if err != nil {
		log.Error("x402: nonce store", "err", err)
		fail(w, r, boxer.Errorf(boxer.ECodeInternal, "internal error; you were not charged"))
		return
	}
	if !fresh {
		p.challenge(w, r, fail, o, reject(ReasonReplay, "this payment (payer and nonce) was already used; sign a new one"), nil)
		return
	}

	vr, err := p.fac.Verify(ctx, payload, req)
	if err != nil {
		log.Warn("x402: verify", "err", err)
		fail(w, r, boxer.Errorf(boxer.ECodeUnavailable, "payment facilitator unavailable; you were not charged"))
		return
	}
	if !vr.IsValid {
		// The facilitator's message can hold a raw contract revert; the
		// caller gets its reason code, the log gets the rest.
		log.Info("x402: verify refused", "reason", vr.InvalidReason, "message", vr.InvalidMessage)
		p.challenge(w, r, fail, o, reject(ReasonVerifyFailed, "facilitator refused the payment: %s", orUnknown(vr.InvalidReason)), nil)
		return
	}

	buf := newBufferedResponse()
	g := &guarded{payer: payer}
	defer g.tell(false) // a panic, or any way out below that does not settle
	next.ServeHTTP(buf, r.WithContext(context.WithValue(ctx, guardKey{}, g)))

	if !charged(buf.status) || g.waived {
		// boxer failed (5xx), was busy (429) or refused the request
		// (other 4xx), or answered with work already paid for (Waive):
		// the caller gets the answer and is not charged.
		log.Info("x402: not settled", "status", buf.status, "waived", g.waived)
		buf.writeTo(w)
		return
	}
	if ctx.Err() != nil {
		log.Info("x402: caller left before settlement; not settled")
		return
	}
	sr, err := p.settle(ctx, payload, req)
	if err != nil {
		// The outcome is unknown: the transaction may land. The output is
		// withheld all the same; the log line lets an operator reconcile.
		log.Error("x402: settle", "err", err)
		failed := &SettleResponse{Success: false, ErrorReason: ReasonSettlementFailed, Network: req.Network, Payer: checked.payer}
		p.challenge(w, r, fail, o, reject(ReasonSettlementFailed, "settlement could not be completed; the output is withheld"), failed)
		return
	}
	if !sr.Success {
		log.Warn("x402: settlement refused", "reason", sr.ErrorReason, "message", sr.ErrorMessage, "tx", sr.Transaction)
		p.challenge(w, r, fail, o, reject(ReasonSettlementFailed, "settlement failed: %s; the output is withheld", orUnknown(sr.ErrorReason)), sr)
		return
	}
	receipt := SettleResponse{Success: true, Transaction: sr.Transaction, Network: sr.Network, Payer: sr.Payer}
	if receipt.Network == "" {
		receipt.Network = req.Network
	}
	if receipt.Payer == "" {
		receipt.Payer = checked.payer
	}
	enc, err := EncodeHeader(receipt)
	if err != nil {
		log.Error("x402: encode receipt", "err", err)
	} else {
		buf.header.Set(HeaderPaymentResponse, enc)
	}
	g.tell(true) // before the answer goes out: what it names is kept
	buf.writeTo(w)
	log.Info("x402: settled", "tx", sr.Transaction)
	if p.onSettled != nil {
		p.onSettled(Settlement{
			Route: o.route.Path, Payer: checked.payer, Nonce: nonce, Amount: req.Amount,
			Network: receipt.Network, Transaction: sr.Transaction, At: p.now(),
		})
	}
	return true
}

// ReasonSettlementPending is a facilitator's answer when it broadcast the
// transfer but could not see it land in time (its wait for the receipt
// failed): the payment may yet go through.
const ReasonSettlementPending = "settlement_pending"

// settle asks the facilitator to settle, and asks once more, with the same
// payment and requirements, when the answer is settlement_pending with a
// transaction: the facilitator then waits for that transaction instead of
// sending a second one (the official facilitator keeps pending transfers
// for this), so the retry never charges twice. One retry only, as the
// official resource server does: a second pending answer is the outcome,
// and the output is withheld like any unsettled one.
func (p *Payments) settle(ctx context.Context, payload *PaymentPayload, req PaymentRequirements) (*SettleResponse, error) {
	sr, err := p.fac.Settle(ctx, payload, req)
	if err != nil || sr.Success || sr.ErrorReason != ReasonSettlementPending || sr.Transaction == "" {
		return sr, err
	}
	p.log.Info("x402: settlement pending; asking again", "tx", sr.Transaction)
	return p.fac.Settle(ctx, payload, req)
}

// charged says which handler answers are charged for: the successful ones.
func charged(status int) bool { return status >= 200 && status < 300 }

func orUnknown(reason string) string {
	if reason == "" {
		return "no reason given"
	}
	return reason
}

// challenge answers 402 with the route's requirements, the refusal in their
// error field, in the PAYMENT-REQUIRED header and as the JSON body. A failed
// settlement also goes back in PAYMENT-RESPONSE, as the HTTP transport spec
// shows.
func (p *Payments) challenge(w http.ResponseWriter, r *http.Request, fail ErrorWriter, o *offer, rej *Rejection, settle *SettleResponse) {
	if rej.Reason != ReasonMissing {
		p.log.Debug("x402: payment refused", "route", o.route.Path, "reason", rej.Reason, "message", rej.Message)
	}
	// A browser reads both headers only if CORS exposes them (api.CORS).
	if settle != nil {
		s := *settle
		s.ErrorMessage = "" // facilitator detail stays in the log
		if enc, err := EncodeHeader(s); err == nil {
			w.Header().Set(HeaderPaymentResponse, enc)
		}
	}
	write402(w, r, fail, o.paymentRequired(p.cfg.PublicURL, r, rej.Reason+": "+rej.Message))
}

// write402 answers 402 with pr (a PaymentRequired, or sign-in's twin of
// it) in PAYMENT-REQUIRED and as the JSON body, never to be cached.
func write402(w http.ResponseWriter, r *http.Request, fail ErrorWriter, pr any) {
	enc, err := EncodeHeader(pr)
	if err != nil {
		fail(w, r, boxer.Errorf(boxer.ECodeInternal, "internal error"))
		return
	}
	h := w.Header()
	h.Set(HeaderPaymentRequired, enc)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusPaymentRequired)
	_ = json.NewEncoder(w).Encode(pr)
}

// bufferedResponse holds a handler's answer until the payment is settled.
// It is used by one goroutine, the handler's.
type bufferedResponse struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func newBufferedResponse() *bufferedResponse {
	return &bufferedResponse{header: http.Header{}, status: http.StatusOK}
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	// Informational answers (103 Early Hints) cannot be buffered
	// meaningfully; the final status is the one that decides settlement.
	if b.wroteHeader || status < 200 {
		return
	}
	b.status, b.wroteHeader = status, true
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if !b.wroteHeader {
		b.WriteHeader(http.StatusOK)
	}
	return b.body.Write(p)
}

// writeTo releases the buffered answer.
func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}
