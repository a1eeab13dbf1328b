package x402

import (
	"context"
	"sync"
)

// NonceStore remembers which payments (payer + EIP-3009 nonce, or on Solana
// payer + "sha256:" hash of the transaction message) were used, so each is
// accepted once. internal/store implements it on SQLite.
//
// UseNonce records the pair and reports whether it was new. It must be
// atomic: of two concurrent calls with the same pair, exactly one sees fresh.
// payer is a lowercase 0x address (on Solana a base58 address, which is
// case-sensitive) and nonce lowercase hex, so a store may compare them as
// strings.
type NonceStore interface {
	UseNonce(ctx context.Context, payer, nonce string) (fresh bool, err error)
}

// MemoryNonceStore is a NonceStore that forgets on restart. It suits tests
// and a single process without a database; entries are never pruned.
type MemoryNonceStore struct {
	mu   sync.Mutex
	used map[string]struct{}
}

// NewMemoryNonceStore returns an empty store.
func NewMemoryNonceStore() *MemoryNonceStore {
	return &MemoryNonceStore{used: map[string]struct{}{}}
}

// UseNonce implements NonceStore.
func (s *MemoryNonceStore) UseNonce(_ context.Context, payer, nonce string) (bool, error) {
	k := payer + "/" + nonce
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.used[k]; ok {
		return false, nil
	}
	s.used[k] = struct{}{}
	return true, nil
}

// inflight is the set of payments being processed right now. It refuses a
// second copy of a payment while the first is between verify and settle:
// the official express middleware verifies both copies before settling
// either, and so runs the handler twice for one payment. It does not rely on
// the NonceStore being atomic, and answers a concurrent copy with its own
// reason rather than "replay".
type inflight struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

// claim reports whether key was free and takes it. The caller releases it.
func (f *inflight) claim(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]struct{}{}
	}
	if _, busy := f.keys[key]; busy {
		return false
	}
	f.keys[key] = struct{}{}
	return true
}

func (f *inflight) release(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, key)
}
