package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A payment identifier (the x402 payment-identifier extension) makes a paid
// request idempotent per payer: the first request with an id runs and its
// answer is kept here; a retry with the same id gets that answer back
// without running or paying again. internal/x402 decides what is kept and
// for how long; the store keeps it atomically and durably.

// PaymentIDState is where a payment id's record is in its life.
type PaymentIDState string

const (
	// PaymentIDPending: claimed by a request that has not been answered.
	PaymentIDPending PaymentIDState = "pending"
	// PaymentIDDone: answered and paid; Status, Header and Body are kept.
	PaymentIDDone PaymentIDState = "done"
)

// PaymentIDRecord is one (payer, id) row.
type PaymentIDRecord struct {
	Payer, ID string
	// Fingerprint identifies the request that claimed the id; a retry
	// must carry the same one.
	Fingerprint string
	State       PaymentIDState
	// Status, Header (opaque to the store) and Body are the kept answer
	// of a done record.
	Status    int
	Header    []byte
	Body      []byte
	CreatedAt time.Time
	// ExpiresAt ends a pending record's claim (its lease) or a done
	// record's retention. An expired record is as good as absent.
	ExpiresAt time.Time
	// Node is the node that claimed it; Mine says it is this store's.
	Node string
	Mine bool
}

// ErrNotPending: FinishPaymentID on a record that is not pending, or not
// pending for this fingerprint.
var ErrNotPending = errors.New("store: payment id is not pending")

// ClaimPaymentID takes (payer, id) for a request with fingerprint, pending
// until until.
//
//   - No record, or an expired one: a pending record is inserted and
//     claimed is true; the caller must answer the request, then
//     FinishPaymentID or ReleasePaymentID.
//   - A live record: it is returned with claimed false, whatever its
//     fingerprint; the caller compares.
//
// The insert is one statement guarded by the primary key, so of any number
// of concurrent claims of one (payer, id), on any number of nodes, exactly
// one is claimed.
func (s *Store) ClaimPaymentID(ctx context.Context, payer, id, fingerprint string, until time.Time) (rec *PaymentIDRecord, claimed bool, err error) {
	for range claimAttempts {
		now := unixMilli(s.now())
		// An expired record is deleted in the statement's own check, so
		// two claimers cannot both delete it and both insert.
		if _, err := s.c().exec(ctx, `DELETE FROM payment_ids WHERE payer = ? AND id = ? AND expires_at <= ?`, payer, id, now); err != nil {
			return nil, false, fmt.Errorf("store: claim payment id: %w", err)
		}
		res, err := s.c().exec(ctx, `
INSERT INTO payment_ids (payer, id, fingerprint, state, status, created_at, expires_at, node)
VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)
ON CONFLICT (payer, id) DO NOTHING`, payer, id, fingerprint, now, unixMilli(until), s.node)
		if err != nil {
			return nil, false, fmt.Errorf("store: claim payment id: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, false, fmt.Errorf("store: claim payment id: %w", err)
		}
		if n == 1 {
			return &PaymentIDRecord{
				Payer: payer, ID: id, Fingerprint: fingerprint, State: PaymentIDPending,
				CreatedAt: fromUnixMilli(now), ExpiresAt: fromUnixMilli(unixMilli(until)), Node: s.node, Mine: true,
			}, true, nil
		}
		rec, err := s.GetPaymentID(ctx, payer, id)
		if errors.Is(err, ErrNotFound) {
			continue // released between our insert and read: try again
		}
		if err != nil {
			return nil, false, err
		}
		if rec.ExpiresAt.UnixMilli() <= unixMilli(s.now()) {
			continue // expired between our delete and insert
		}
		return rec, false, nil
	}
	return nil, false, fmt.Errorf("store: claim payment id: still contended after %d attempts", claimAttempts)
}

// FinishPaymentID keeps the answer of a pending (payer, id) claimed with
// fingerprint, until until. A done record is never overwritten.
func (s *Store) FinishPaymentID(ctx context.Context, payer, id, fingerprint string, status int, header, body []byte, until time.Time) error {
	if body == nil {
		body = []byte{}
	}
	res, err := s.c().exec(ctx, `
UPDATE payment_ids SET state = 'done', status = ?, header = ?, body = ?, expires_at = ?
WHERE payer = ? AND id = ? AND fingerprint = ? AND state = 'pending'`,
		status, header, body, unixMilli(until), payer, id, fingerprint)
	if err != nil {
		return fmt.Errorf("store: finish payment id: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: finish payment id: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store: finish payment id: %w", ErrNotPending)
	}
	return nil
}

// ReleasePaymentID drops a pending claim of (payer, id) with fingerprint,
// for a request that was not charged, so that a retry runs. A done record
// is left alone; releasing what is not there is not an error.
func (s *Store) ReleasePaymentID(ctx context.Context, payer, id, fingerprint string) error {
	if _, err := s.c().exec(ctx, `DELETE FROM payment_ids WHERE payer = ? AND id = ? AND fingerprint = ? AND state = 'pending'`,
		payer, id, fingerprint); err != nil {
		return fmt.Errorf("store: release payment id: %w", err)
	}
	return nil
}

// GetPaymentID returns the record of (payer, id), expired or not, or
// ErrNotFound.
func (s *Store) GetPaymentID(ctx context.Context, payer, id string) (*PaymentIDRecord, error) {
	var (
		rec              PaymentIDRecord
		state            string
		created, expires int64
	)
	err := s.c().queryRow(ctx, `
SELECT payer, id, fingerprint, state, status, header, body, created_at, expires_at, node
FROM payment_ids WHERE payer = ? AND id = ?`, payer, id).
		Scan(&rec.Payer, &rec.ID, &rec.Fingerprint, &state, &rec.Status, &rec.Header, &rec.Body, &created, &expires, &rec.Node)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: payment id: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get payment id: %w", err)
	}
	rec.State = PaymentIDState(state)
	rec.CreatedAt, rec.ExpiresAt = fromUnixMilli(created), fromUnixMilli(expires)
	rec.Mine = rec.Node == s.node
	return &rec, nil
}

// PrunePaymentIDs deletes the records expired at now (done ones past their
// retention, pending ones past their lease) and reports how many.
func (s *Store) PrunePaymentIDs(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM payment_ids WHERE expires_at <= ?`, unixMilli(now))
	if err != nil {
		return 0, fmt.Errorf("store: prune payment ids: %w", err)
	}
	return res.RowsAffected()
}
