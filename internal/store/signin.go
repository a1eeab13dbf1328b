package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Outcomes of UseSignInNonce. internal/x402 names the same strings
// (SignInNonceFresh and its siblings); a test holds them equal.
const (
	SignInNonceFresh   = "fresh"   // issued, unexpired, unused: now used
	SignInNonceUsed    = "used"    // accepted once already
	SignInNonceExpired = "expired" // issued, never used, past its expiry
	SignInNonceUnknown = "unknown" // never issued, or pruned after expiry
)

// IssueSignInNonce records a sign-in challenge's nonce, valid until
// expires. Nonces are random; one issued twice is an error.
func (s *Store) IssueSignInNonce(ctx context.Context, nonce string, issued, expires time.Time) error {
	if _, err := s.c().exec(ctx, `INSERT INTO signin_nonces (nonce, issued_at, expires_at) VALUES (?, ?, ?)`,
		nonce, unixMilli(issued), unixMilli(expires)); err != nil {
		return fmt.Errorf("store: issue sign-in nonce: %w", err)
	}
	return nil
}

// UseSignInNonce spends an issued sign-in nonce at now and says how it
// went: SignInNonceFresh for exactly one of any number of concurrent calls
// with one issued, unexpired nonce, on any node sharing the database and
// after a restart (the UPDATE's condition decides, not a read before it);
// otherwise why not.
func (s *Store) UseSignInNonce(ctx context.Context, nonce string, now time.Time) (string, error) {
	res, err := s.c().exec(ctx, `
UPDATE signin_nonces SET used_at = ?
WHERE nonce = ? AND used_at IS NULL AND expires_at > ?`, unixMilli(now), nonce, unixMilli(now))
	if err != nil {
		return "", fmt.Errorf("store: use sign-in nonce: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", fmt.Errorf("store: use sign-in nonce: %w", err)
	}
	if n == 1 {
		return SignInNonceFresh, nil
	}
	var used sql.NullInt64
	err = s.c().queryRow(ctx, `SELECT used_at FROM signin_nonces WHERE nonce = ?`, nonce).Scan(&used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return SignInNonceUnknown, nil
	case err != nil:
		return "", fmt.Errorf("store: use sign-in nonce: %w", err)
	case used.Valid:
		return SignInNonceUsed, nil
	}
	return SignInNonceExpired, nil
}

// PruneSignInNonces deletes the sign-in nonces that expired before cutoff,
// used or not, and reports how many: an expired nonce is refused whether
// or not it is still known.
func (s *Store) PruneSignInNonces(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM signin_nonces WHERE expires_at < ?`, unixMilli(cutoff))
	if err != nil {
		return 0, fmt.Errorf("store: prune sign-in nonces: %w", err)
	}
	return res.RowsAffected()
}
