package x402

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"boxer/internal/store"
	"boxer/internal/testenv"
)

// flipHexDigit changes the hex digit at i of s to another.
func flipHexDigit(s string, i int) string {
	b := []byte(s)
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

// A nonce opens to its expiry under its key, and under no other; a change
// to any one digit, or its case, makes it no nonce of ours.
func TestSignInNonceCodec(t *testing.T) {
	key := testSignInKey
	exp := testNow.Add(5 * time.Minute)
	n := newSignInNonce(key, exp)
	// EIP-4361: 8 or more letters and digits; ours are lowercase hex.
	if !regexp.MustCompile(`^[0-9a-f]{80}$`).MatchString(n) {
		t.Fatalf("nonce %q is not 80 lowercase hex digits", n)
	}
	if got, ok := openSignInNonce(key, n); !ok || !got.Equal(exp) {
		t.Fatalf("openSignInNonce = %s, %v; want %s", got, ok, exp)
	}
	if n2 := newSignInNonce(key, exp); n2 == n {
		t.Fatal("two nonces with one expiry are equal")
	}
	if _, ok := openSignInNonce(bytesOf(0x5b, 32), n); ok {
		t.Fatal("a nonce opened under another key")
	}
	for i := range n {
		if _, ok := openSignInNonce(key, flipHexDigit(n, i)); ok {
			t.Fatalf("a nonce with digit %d changed opened", i)
		}
	}
	for _, bad := range []string{"", n[:78], n + "00", strings.ToUpper(n), n[:79] + "g", "0123456789abcdef0123456789abcdef"} {
		if _, ok := openSignInNonce(key, bad); ok {
			t.Fatalf("openSignInNonce(%q) succeeded", bad)
		}
	}
}

// Challenges write nothing: many of them, each with its own nonce, and
// not one call to the store. Only a proof with a good signature writes,
// once.
func TestSignInChallengeWritesNothing(t *testing.T) {
	rg := newSiwxRig(t)
	seen := map[string]bool{}
	for range 200 {
		info := rg.challenge()
		if seen[info.Nonce] {
			t.Fatalf("nonce %s issued twice", info.Nonce)
		}
		seen[info.Nonce] = true
	}
	if n := rg.nonces.count(); n != 0 {
		t.Fatalf("200 challenges made %d store writes, want 0", n)
	}
	w := newWallet(t)
	h := encodeProof(t, signEVM(w.key, proofOf(rg.challenge(), DefaultNetwork, "eip191", w.addr.String())))
	if got := rg.do(h); got.Code != http.StatusOK {
		t.Fatalf("good proof: %d %s", got.Code, got.Body)
	}
	if n := rg.nonces.count(); n != 1 {
		t.Fatalf("a good proof made %d store writes, want 1", n)
	}
}

// signInOn is a SignIn whose nonces and key are st's, as a node's.
func signInOn(t *testing.T, st *store.Store, now func() time.Time) *siwxRig {
	t.Helper()
	key, err := st.SignInKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rg := &siwxRig{t: t, now: now()}
	si, err := NewSignIn(SignInConfig{Networks: []string{DefaultNetwork, testSolanaDevnet}},
		SignInDeps{Nonces: st, Key: key, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rg.wrap(si)
	return rg
}

// A challenge issued by one node is answered at another sharing the
// database (Postgres), and the proof is then refused on both.
func TestSignInAcrossNodes(t *testing.T) {
	dsn := testenv.Postgres(t)
	open := func(name string) *store.Store {
		s, err := store.Open(dsn, store.WithNode(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	now := func() time.Time { return testNow }
	a, b := signInOn(t, open("a"), now), signInOn(t, open("b"), now)
	w := newWallet(t)
	h := encodeProof(t, signEVM(w.key, proofOf(a.challenge(), DefaultNetwork, "eip191", w.addr.String())))
	if got := b.do(h); got.Code != http.StatusOK {
		t.Fatalf("a's challenge answered at b: %d %s", got.Code, got.Body)
	}
	wantRejected(t, a.do(h), SignInReasonNonceUsed)
	wantRejected(t, b.do(h), SignInReasonNonceUsed)
}

// A challenge outlives a restart of a SQLite node, and so does its spent
// nonce: the key and the used nonce are in the file.
func TestSignInAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxer.db")
	open := func() *store.Store {
		s, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := func() time.Time { return testNow }
	st := open()
	info := signInOn(t, st, now).challenge()
	st.Close()

	st = open()
	rg := signInOn(t, st, now)
	w := newWallet(t)
	h := encodeProof(t, signEVM(w.key, proofOf(info, DefaultNetwork, "eip191", w.addr.String())))
	if got := rg.do(h); got.Code != http.StatusOK {
		t.Fatalf("a challenge from before the restart: %d %s", got.Code, got.Body)
	}
	st.Close()

	st = open()
	defer st.Close()
	wantRejected(t, signInOn(t, st, now).do(h), SignInReasonNonceUsed)
}
