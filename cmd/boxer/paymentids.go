package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"boxer/internal/store"
	"boxer/internal/x402"
)

// paymentIDs is the store as x402 keeps payment ids in it: the kept
// answer's header goes in as JSON.
type paymentIDs struct{ s *store.Store }

func (p paymentIDs) ClaimPaymentID(ctx context.Context, payer, id, fingerprint string, until time.Time) (*x402.PaymentIDRecord, bool, error) {
	rec, claimed, err := p.s.ClaimPaymentID(ctx, payer, id, fingerprint, until)
	if err != nil {
		return nil, false, err
	}
	out := &x402.PaymentIDRecord{Fingerprint: rec.Fingerprint, Done: rec.State == store.PaymentIDDone, Mine: rec.Mine, Since: rec.CreatedAt}
	if out.Done {
		out.Answer = x402.KeptAnswer{Status: rec.Status, Body: rec.Body}
		if len(rec.Header) > 0 {
			if err := json.Unmarshal(rec.Header, &out.Answer.Header); err != nil {
				return nil, false, fmt.Errorf("payment id %q: kept header: %w", id, err)
			}
		}
	}
	return out, claimed, nil
}

func (p paymentIDs) FinishPaymentID(ctx context.Context, payer, id, fingerprint string, a x402.KeptAnswer, until time.Time) error {
	h, err := json.Marshal(a.Header)
	if err != nil {
		return err
	}
	return p.s.FinishPaymentID(ctx, payer, id, fingerprint, a.Status, h, a.Body, until)
}

func (p paymentIDs) ReleasePaymentID(ctx context.Context, payer, id, fingerprint string) error {
	return p.s.ReleasePaymentID(ctx, payer, id, fingerprint)
}
