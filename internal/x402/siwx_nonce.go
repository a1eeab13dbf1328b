package x402

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"
)

// A sign-in challenge's nonce is stateless: nothing is stored when one is
// issued, so that a caller without credentials cannot make the server
// write. It is, in lowercase hex (EIP-4361 wants 8 or more letters and
// digits; the official SIWE library parses the text it signs by that
// grammar):
//
//	random (16 bytes) || expiry (8, Unix ms, big-endian) || MAC (16)
//
// MAC = HMAC-SHA256(key, signInNonceLabel || random || expiry), cut to
// 128 bits; the key is the database's (store.SignInKey), the same on every
// node. The MAC shows the nonce was issued here and when it expires; the
// random part makes each challenge's nonce its own, spent once.
const (
	signInNonceRandom = 16
	signInNonceMAC    = 16
	signInNonceBytes  = signInNonceRandom + 8 + signInNonceMAC
	signInNonceLen    = 2 * signInNonceBytes // hex digits: 80

	// SignInKeyMin is the shortest key SignInDeps.Key may be.
	SignInKeyMin = 32
)

// signInNonceLabel separates these MACs from any other use of the key.
var signInNonceLabel = []byte("boxer x402 sign-in nonce v1\x00")

// signInNonceMACOf is the MAC of a nonce's random and expiry bytes.
func signInNonceMACOf(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(signInNonceLabel)
	m.Write(body)
	return m.Sum(nil)[:signInNonceMAC]
}

// newSignInNonce makes a nonce that expires at expires.
func newSignInNonce(key []byte, expires time.Time) string {
	var b [signInNonceBytes]byte
	_, _ = rand.Read(b[:signInNonceRandom]) // never fails (Go 1.24+)
	binary.BigEndian.PutUint64(b[signInNonceRandom:], uint64(expires.UnixMilli()))
	copy(b[signInNonceRandom+8:], signInNonceMACOf(key, b[:signInNonceRandom+8]))
	return hex.EncodeToString(b[:])
}

// openSignInNonce checks that nonce is one newSignInNonce made with key
// and returns its expiry; ok is false for any other string. The MAC is
// compared in constant time.
func openSignInNonce(key []byte, nonce string) (expires time.Time, ok bool) {
	if len(nonce) != signInNonceLen || strings.Trim(nonce, "0123456789abcdef") != "" {
		return time.Time{}, false
	}
	b, err := hex.DecodeString(nonce)
	if err != nil {
		return time.Time{}, false
	}
	body, mac := b[:signInNonceRandom+8], b[signInNonceRandom+8:]
	if !hmac.Equal(mac, signInNonceMACOf(key, body)) {
		return time.Time{}, false
	}
	ms := binary.BigEndian.Uint64(body[signInNonceRandom:])
	if ms > 1<<62 {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)).UTC(), true
}
