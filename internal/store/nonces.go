package store

import (
	"context"
	"fmt"
	"time"
)

// UseNonce marks the payment nonce of payer as used and reports whether it
// was fresh. Of any number of concurrent calls with one (payer, nonce), in
// this process or after a restart, exactly one sees fresh true: the primary
// key decides, not a read followed by a write.
//
// The store compares the strings as given; the caller normalises them (for
// example, lower-case hex addresses) so that one payment has one spelling.
func (s *Store) UseNonce(ctx context.Context, payer, nonce string) (fresh bool, err error) {
	res, err := s.c().exec(ctx, `
INSERT INTO nonces (payer, nonce, used_at) VALUES (?, ?, ?)
ON CONFLICT (payer, nonce) DO NOTHING`, payer, nonce, unixMilli(s.now()))
	if err != nil {
		return false, fmt.Errorf("store: use nonce: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: use nonce: %w", err)
	}
	return n == 1, nil
}

// ReleaseNonce forgets a nonce, for a payment that was verified but never
// settled (the call failed before it could be served), so the same signed
// payment may be presented again.
func (s *Store) ReleaseNonce(ctx context.Context, payer, nonce string) error {
	if _, err := s.c().exec(ctx, `DELETE FROM nonces WHERE payer = ? AND nonce = ?`, payer, nonce); err != nil {
		return fmt.Errorf("store: release nonce: %w", err)
	}
	return nil
}

// PruneNonces deletes nonces used before olderThan and reports how many.
// Call it with a cutoff older than the longest validity of a payment, so a
// pruned nonce's payment can no longer be settled anyway.
func (s *Store) PruneNonces(ctx context.Context, olderThan time.Time) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM nonces WHERE used_at < ?`, unixMilli(olderThan))
	if err != nil {
		return 0, fmt.Errorf("store: prune nonces: %w", err)
	}
	return res.RowsAffected()
}
