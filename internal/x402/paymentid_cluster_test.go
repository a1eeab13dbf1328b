package x402

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"boxer"
	"boxer/internal/store"
	"boxer/internal/testenv"
)

// storeIDs is cmd/boxer's adapter (paymentIDs) again: the store as a
// PaymentIDStore. package main cannot be imported.
type storeIDs struct{ s *store.Store }

func (p storeIDs) ClaimPaymentID(ctx context.Context, payer, id, fp string, until time.Time) (*PaymentIDRecord, bool, error) {
	rec, claimed, err := p.s.ClaimPaymentID(ctx, payer, id, fp, until)
	if err != nil {
		return nil, false, err
	}
	out := &PaymentIDRecord{Fingerprint: rec.Fingerprint, Done: rec.State == store.PaymentIDDone, Mine: rec.Mine, Since: rec.CreatedAt}
	if out.Done {
		out.Answer = KeptAnswer{Status: rec.Status, Body: rec.Body}
		if err := json.Unmarshal(rec.Header, &out.Answer.Header); err != nil {
			return nil, false, err
		}
	}
	return out, claimed, nil
}

func (p storeIDs) FinishPaymentID(ctx context.Context, payer, id, fp string, a KeptAnswer, until time.Time) error {
	h, err := json.Marshal(a.Header)
	if err != nil {
		return err
	}
	return p.s.FinishPaymentID(ctx, payer, id, fp, a.Status, h, a.Body, until)
}

func (p storeIDs) ReleasePaymentID(ctx context.Context, payer, id, fp string) error {
	return p.s.ReleasePaymentID(ctx, payer, id, fp)
}

// Two nodes sharing a Postgres database: an id being answered on one is
// in flight on the other, which runs nothing; once answered, the other
// node returns the kept answer, uncharged, and refuses another request
// under the id.
func TestPaymentIDAcrossNodes(t *testing.T) {
	dsn := testenv.Postgres(t)
	node := func(name string) *idRig {
		s, err := store.Open(dsn, store.WithNode(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return newIDRig(t, func(_ *Config, d *Deps) { d.Nonces, d.PaymentIDs = s, storeIDs{s} })
	}
	a, b := node("a"), node("b")
	b.payer = a.payer
	hold, start := make(chan struct{}), make(chan struct{}, 1)
	a.handler.set(func(h *idHandler) { h.hold, h.start = hold, start })
	const id, body = "pay_two_nodes_000000001", `{"code":"print(1)"}`

	first := make(chan string, 1)
	go func() {
		w := a.pay1(t, "/v1/exec", body, id)
		first <- w.Body.String()
	}()
	<-start
	if w := b.pay1(t, "/v1/exec", body, id); w.Code != 409 || w.Body.String() != boxer.ECodePaymentIDInFlight {
		t.Fatalf("on b while a answers: %d %s", w.Code, w.Body)
	}
	close(hold)
	answer := <-first
	w := b.pay1(t, "/v1/exec", body, id)
	if w.Code != 200 || w.Body.String() != answer || w.Header().Get(HeaderReplayed) != "true" || w.Header().Get(HeaderPaymentResponse) == "" {
		t.Fatalf("on b after a answered: %d %v %s; want a's answer %s", w.Code, w.Header(), w.Body, answer)
	}
	if w := b.pay1(t, "/v1/exec", `{"code":"print(2)"}`, id); w.Code != 409 || w.Body.String() != boxer.ECodePaymentIDConflict {
		t.Fatalf("another request on b: %d %s", w.Code, w.Body)
	}
	a.want(t, "node a", 1, 1, 1)
	b.want(t, "node b", 0, 0, 0)
}
