package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// SignInKeyLen is the length of the key SignInKey returns.
const SignInKeyLen = 32

// signInKeyName is the row of secrets that holds the sign-in nonce key.
const signInKeyName = "signin_nonce_key"

// SignInKey returns the key x402 sign-in nonces are MACed with: made on
// the first call against a database and kept in it, so that every node
// sharing the database, and every restart, has the same one (a challenge
// issued by one node is answered at another). Of nodes starting at once,
// the first insert wins and each reads back the stored key. The key is a
// secret: keep it out of logs.
//
// There is no rotation: a key only vouches that a nonce was issued here
// and when it expires, for at most a challenge's life; who signs in is
// proved by the signature alone. To replace it, stop every node, delete
// the row (DELETE FROM secrets WHERE name = 'signin_nonce_key') and
// start them again; open challenges are then refused as unknown and
// their callers ask anew.
func (s *Store) SignInKey(ctx context.Context) ([]byte, error) {
	key := make([]byte, SignInKeyLen)
	_, _ = rand.Read(key) // never fails (crypto/rand, Go 1.24+)
	if _, err := s.c().exec(ctx, `
INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?)
ON CONFLICT (name) DO NOTHING`, signInKeyName, key, unixMilli(s.now())); err != nil {
		return nil, fmt.Errorf("store: sign-in key: %w", err)
	}
	var stored []byte
	if err := s.c().queryRow(ctx, `SELECT value FROM secrets WHERE name = ?`, signInKeyName).Scan(&stored); err != nil {
		return nil, fmt.Errorf("store: sign-in key: %w", err)
	}
	if len(stored) != SignInKeyLen {
		return nil, fmt.Errorf("store: sign-in key: the stored key has %d bytes, want %d", len(stored), SignInKeyLen)
	}
	return stored, nil
}

// UseSignInNonce spends a sign-in nonce that expires at expires and
// reports whether it was fresh: of any number of concurrent calls with
// one nonce, on any node sharing the database and after a restart,
// exactly one sees fresh true (the primary key decides, not a read before
// the write). The caller has checked that the nonce is its own and
// unexpired, and that the proof spending it is signed: this is the only
// write a sign-in makes.
func (s *Store) UseSignInNonce(ctx context.Context, nonce string, expires, now time.Time) (fresh bool, err error) {
	res, err := s.c().exec(ctx, `
INSERT INTO used_signin_nonces (nonce, expires_at, used_at) VALUES (?, ?, ?)
ON CONFLICT (nonce) DO NOTHING`, nonce, unixMilli(expires), unixMilli(now))
	if err != nil {
		return false, fmt.Errorf("store: use sign-in nonce: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: use sign-in nonce: %w", err)
	}
	return n == 1, nil
}

// PruneSignInNonces forgets the spent sign-in nonces that expired before
// cutoff and reports how many. A forgotten nonce would be fresh again:
// pass a cutoff no node's clock can still find unexpired (the API's prune
// keeps a margin for clocks that disagree).
func (s *Store) PruneSignInNonces(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM used_signin_nonces WHERE expires_at < ?`, unixMilli(cutoff))
	if err != nil {
		return 0, fmt.Errorf("store: prune sign-in nonces: %w", err)
	}
	return res.RowsAffected()
}
