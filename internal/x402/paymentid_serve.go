package x402

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"boxer"
)

// HeaderReplayed marks an answer sent again for a retried payment id; the
// PAYMENT-RESPONSE it carries is the first request's receipt.
const HeaderReplayed = "Idempotent-Replayed"

// idRequest is a paid request that carries a payment id.
type idRequest struct {
	payer string // lowercase 0x address, recovered from the signature
	nonce string // of the payment this request carries
	id    string
	fp    string // fingerprint: see fingerprint
	body  []byte
	log   *slog.Logger
}

// serveOnce is serve for a request whose payment may carry a payment id:
// without one, or with a payment that fails the local checks, it is serve;
// with one, the id's first request is served and its paid answer kept, and
// a retry gets that answer without a second run or charge (doc.go).
func (p *Payments) serveOnce(w http.ResponseWriter, r *http.Request, o *offer, next http.Handler, fail ErrorWriter) {
	header := r.Header.Get(HeaderPaymentSignature)
	if header == "" {
		p.serve(w, r, o, next, fail)
		return
	}
	payload, err := DecodePaymentHeader(header)
	if err != nil {
		p.serve(w, r, o, next, fail) // answers the decoding error
		return
	}
	id, e := PaymentIDOf(payload)
	if e != nil {
		fail(w, r, e)
		return
	}
	if id == "" {
		p.serve(w, r, o, next, fail)
		return
	}
	// Only a payment that passes the local checks, the signature's
	// recovery included, says whose id this is.
	checked, rej := o.check(payload, p.now(), p.cfg.ValidityMargin)
	if rej != nil {
		p.serve(w, r, o, next, fail) // answers the same refusal
		return
	}
	body, e := p.readIDBody(w, r)
	if e != nil {
		fail(w, r, e)
		return
	}
	if r.Context().Err() != nil {
		return // the caller left while sending the body
	}
	q := &idRequest{
		payer: checked.payerKey,
		nonce: checked.nonce,
		id:    id,
		fp:    fingerprint(r, o.route.Path, checked.req, body),
		body:  body,
	}
	q.log = p.log.With("route", o.route.Path, "payer", checked.payer, "payment_id", id)
	key := q.payer + "/" + id
	for {
		f, owner := p.idFlights.enter(key, q.fp)
		if owner {
			defer p.idFlights.leave(key, f)
			p.answerOnce(w, r, o, next, fail, q)
			return
		}
		if f.fp != q.fp {
			fail(w, r, idConflict(id))
			return
		}
		// The same request is being answered here: wait for its answer,
		// then look again (it is kept, or was released and is ours).
		if p.idFlights.onWait != nil {
			p.idFlights.onWait()
		}
		select {
		case <-f.done:
		case <-r.Context().Done():
			return
		}
	}
}

// answerOnce claims q's id in the store and answers: the kept answer, a
// conflict, or a run of its own. The caller owns q's flight in this process.
func (p *Payments) answerOnce(w http.ResponseWriter, r *http.Request, o *offer, next http.Handler, fail ErrorWriter, q *idRequest) {
	ctx := r.Context()
	rec, claimed, err := p.ids.ClaimPaymentID(ctx, q.payer, q.id, q.fp, p.now().Add(p.pid.Lease))
	if err == nil && !claimed && !rec.Done && rec.Mine && rec.Fingerprint == q.fp && rec.Since.Before(p.started) {
		// Pending, this node's and older than this process: it was left
		// by a process that died. Its run may have been charged just
		// before; it can no longer say, and the caller is retrying. (A
		// claim of this process's own whose answer the store failed to
		// keep is not taken over: its run was paid for.)
		q.log.Warn("x402: taking over a stale payment id claim")
		if err = p.ids.ReleasePaymentID(ctx, q.payer, q.id, q.fp); err == nil {
			rec, claimed, err = p.ids.ClaimPaymentID(ctx, q.payer, q.id, q.fp, p.now().Add(p.pid.Lease))
		}
	}
	switch {
	case err != nil:
		q.log.Error("x402: payment id store", "err", err)
		fail(w, r, boxer.Errorf(boxer.ECodeInternal, "internal error; you were not charged"))
	case claimed:
		p.runOnce(w, r, o, next, fail, q)
	case rec.Fingerprint != q.fp:
		fail(w, r, idConflict(q.id))
	case rec.Done:
		p.replay(w, r, fail, q, rec.Answer)
	default:
		fail(w, r, boxer.Errorf(boxer.ECodePaymentIDInFlight,
			"the first request with payment id %q is still being answered by another server; retry with the same id shortly", q.id))
	}
}

// runOnce serves a claimed id's request and keeps its answer if it was paid
// for (serve reports it); otherwise (a failure, a refusal,
// an answer with work already paid for, no answer at all because the caller
// left) the claim is dropped, so that a retry runs.
func (p *Payments) runOnce(w http.ResponseWriter, r *http.Request, o *offer, next http.Handler, fail ErrorWriter, q *idRequest) {
	// Dropped on every way out but a kept answer, panics included.
	kept := false
	defer func() {
		if kept {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		if err := p.ids.ReleasePaymentID(ctx, q.payer, q.id, q.fp); err != nil {
			// The claim stays until its lease ends; meanwhile a retry
			// is told the id is in flight.
			q.log.Error("x402: release payment id", "err", err)
		}
	}()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(q.body)), int64(len(q.body))
	buf := newBufferedResponse()
	if !p.serve(buf, r, o, next, fail) {
		if buf.wroteHeader {
			buf.writeTo(w)
		}
		return
	}
	a := KeptAnswer{Status: buf.status, Header: keptHeader(buf.header), Body: buf.body.Bytes()}
	if int64(len(a.Body)) > p.pid.MaxAnswerBytes {
		// Paid for, sent once; a retry is told so (replay), not charged.
		a = KeptAnswer{Status: statusNotKept, Header: map[string][]string{}, Body: nil}
		if v := buf.header.Values(HeaderPaymentResponse); len(v) > 0 {
			a.Header[http.CanonicalHeaderKey(HeaderPaymentResponse)] = v
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := p.ids.FinishPaymentID(ctx, q.payer, q.id, q.fp, a, p.now().Add(p.pid.Retention)); err != nil {
		// The claim is kept pending, not released: the run was paid for,
		// and a retry within the lease must not run and pay again.
		q.log.Error("x402: keep payment id answer", "err", err)
	}
	kept = true
	buf.writeTo(w)
}

// statusNotKept stands, in a kept answer, for a paid answer too large to
// keep; its retry is answered result_not_kept.
const statusNotKept = 0

// replay answers a retry with the id's kept answer. The retry's own payment
// is not settled, and is marked used: it can pay for nothing else.
func (p *Payments) replay(w http.ResponseWriter, r *http.Request, fail ErrorWriter, q *idRequest, a KeptAnswer) {
	if _, err := p.nonces.UseNonce(r.Context(), q.payer, q.nonce); err != nil {
		q.log.Warn("x402: mark a replayed request's payment used", "err", err)
	}
	q.log.Info("x402: payment id replayed; not charged again")
	h := w.Header()
	for k, v := range a.Header {
		h[k] = v
	}
	h.Set(HeaderReplayed, "true")
	if a.Status == statusNotKept {
		fail(w, r, boxer.Errorf(boxer.ECodeResultNotKept,
			"the request with payment id %q was paid for and answered once; its answer was larger than the %d bytes kept", q.id, p.pid.MaxAnswerBytes))
		return
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// keptHeader is what of an answer's header a replay sends again: all but
// what describes one connection or one moment.
func keptHeader(h http.Header) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Date", "Connection", "Keep-Alive", "Content-Length", "Transfer-Encoding", "Set-Cookie", "Trailer":
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

// fingerprint says what makes two requests with one payer and id "the
// same": the route and request (method, path, query, Accept, body bytes)
// and the payment's terms (network, asset, recipient, amount). Not the
// payment's signature, nonce or validity window: the official clients sign
// a new payment for every attempt, and a retry is the same request paid
// the same way. Each part is length-prefixed, so no two differ in one
// place and agree in another.
func fingerprint(r *http.Request, route string, req PaymentRequirements, body []byte) string {
	h := sha256.New()
	for _, s := range []string{"boxer payment-id 1", route, r.Method, r.URL.Path, r.URL.RawQuery,
		r.Header.Get("Accept"), req.Scheme, req.Network, req.Asset, req.PayTo, req.Amount} {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	fmt.Fprintf(h, "%d:", len(body))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// readIDBody reads the body to fingerprint it, within the configured size
// and time; the handler then reads it from memory.
func (p *Payments) readIDBody(w http.ResponseWriter, r *http.Request) ([]byte, *boxer.Error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := p.pid.MaxBodyBytes
	tooLarge := boxer.Errorf(boxer.ECodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(p.pid.BodyTimeout)) // the wall clock, not the payments clock
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, boxer.Errorf(boxer.ECodeInternal, "internal error; you were not charged")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return body, nil
	case errors.As(err, &mbe):
		return nil, tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, boxer.Errorf(boxer.ECodeRequestTimeout, "the request body took longer than %s to arrive", p.pid.BodyTimeout)
	case r.Context().Err() != nil:
		return nil, nil // the caller left; serveOnce sees it
	}
	return nil, boxer.Errorf(boxer.ECodeInvalidJSON, "could not read the request body: it ended early")
}

func idConflict(id string) *boxer.Error {
	return boxer.Errorf(boxer.ECodePaymentIDConflict,
		"payment id %q was already used by this payer for a different request (route, body or price); use a new id for a new request", id)
}

// idFlights are the payment ids this process is answering, each with the
// fingerprint of its request. A second request with the same id waits for
// the first one's answer rather than asking the store, which would tell it
// only that the id is pending.
type idFlights struct {
	onWait func() // tests: a request starts waiting for another's answer

	mu sync.Mutex
	m  map[string]*idFlight
}

// idFlight is one id being answered; done is closed when it is.
type idFlight struct {
	fp   string
	done chan struct{}
}

// enter makes the caller the owner of key in this process, or returns the
// flight that owns it (owner false).
func (f *idFlights) enter(key, fp string) (fl *idFlight, owner bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[key]; ok {
		return fl, false
	}
	if f.m == nil {
		f.m = map[string]*idFlight{}
	}
	fl = &idFlight{fp: fp, done: make(chan struct{})}
	f.m[key] = fl
	return fl, true
}

// leave ends the owner's flight and wakes its waiters.
func (f *idFlights) leave(key string, fl *idFlight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[key] == fl {
		delete(f.m, key)
	}
	close(fl.done)
}
