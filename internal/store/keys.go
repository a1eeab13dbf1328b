package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Key is an API key's record. Its secret is shown once, by AddKey, and
// never stored: the database keeps its SHA-256 only.
type Key struct {
	ID   string
	Name string
	// RatePerMinute bounds the key's calls; 0 for no bound.
	RatePerMinute int
	CreatedAt     time.Time
	RevokedAt     time.Time // zero while the key is valid
	Calls         int64     // calls made with the key, over its life
	LastUsedAt    time.Time // zero before its first call
}

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// TokenPrefix starts every key, so that a key found in a log or a
// repository is recognised for what it is.
const TokenPrefix = "bxk_"

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newToken makes a key: its id (public: in logs and listings) and the
// whole token, "bxk_" + id + "_" + 256 random bits. A fast hash is enough
// to store it: the secret is random, not a password to guess.
func newToken() (id, token string, err error) {
	b := make([]byte, 6+32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	id = lowerBase32.EncodeToString(b[:6])
	return id, TokenPrefix + id + "_" + lowerBase32.EncodeToString(b[6:]), nil
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// AddKey makes a key named name and returns its record and its token,
// which nothing can show again.
func (s *Store) AddKey(ctx context.Context, name string, ratePerMinute int) (Key, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return Key{}, "", errors.New("store: a key's name must be 1 to 100 characters")
	}
	if ratePerMinute < 0 {
		return Key{}, "", fmt.Errorf("store: rate %d per minute is negative", ratePerMinute)
	}
	id, token, err := newToken()
	if err != nil {
		return Key{}, "", err
	}
	k := Key{ID: id, Name: name, RatePerMinute: ratePerMinute, CreatedAt: s.now().UTC().Truncate(time.Millisecond)}
	if _, err := s.c().exec(ctx, `INSERT INTO api_keys (id, name, hash, created_at, rate_per_minute) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.Name, tokenHash(token), unixMilli(k.CreatedAt), k.RatePerMinute); err != nil {
		return Key{}, "", fmt.Errorf("store: add key: %w", err)
	}
	return k, token, nil
}

// RevokeKey revokes key id at once; its token is refused from then on.
// Revoking a revoked key keeps its first revocation time.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	res, err := s.c().exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, unixMilli(s.now()), id)
	if err != nil {
		return fmt.Errorf("store: revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: key %q: %w", id, ErrNoKey)
	}
	return nil
}

const keyColumns = `id, name, rate_per_minute, created_at, revoked_at, calls, last_used_at`

func scanKey(row interface{ Scan(...any) error }) (Key, error) {
	var k Key
	var created int64
	var revoked, last sql.NullInt64
	if err := row.Scan(&k.ID, &k.Name, &k.RatePerMinute, &created, &revoked, &k.Calls, &last); err != nil {
		return Key{}, err
	}
	k.CreatedAt = fromUnixMilli(created)
	if revoked.Valid {
		k.RevokedAt = fromUnixMilli(revoked.Int64)
	}
	if last.Valid {
		k.LastUsedAt = fromUnixMilli(last.Int64)
	}
	return k, nil
}

// Keys lists every key, revoked ones too, oldest first.
func (s *Store) Keys(ctx context.Context) ([]Key, error) {
	rows, err := s.c().query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	defer rows.Close()
	var keys []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list keys: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// KeyByToken returns the key whose token is token, revoked or not, or
// ErrNoKey.
func (s *Store) KeyByToken(ctx context.Context, token string) (Key, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return Key{}, ErrNoKey
	}
	k, err := scanKey(s.c().queryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, tokenHash(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, ErrNoKey
	}
	if err != nil {
		return Key{}, fmt.Errorf("store: look up key: %w", err)
	}
	return k, nil
}

// ActiveKeys counts the keys not revoked.
func (s *Store) ActiveKeys(ctx context.Context) (int, error) {
	var n int
	err := s.c().queryRow(ctx, `SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL`).Scan(&n)
	return n, err
}
