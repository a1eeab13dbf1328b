package x402

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"boxer"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
)

// testNow is the pinned clock of the tests.
var testNow = time.Unix(1_800_000_000, 0)

const testPayTo = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"

func testConfig() Config {
	c := DefaultConfig()
	c.Mode = ModeX402
	c.PayTo = testPayTo
	c.FacilitatorURL = "http://127.0.0.1:9/unused"
	return c
}

func testOffer(t *testing.T, route string) *offer {
	t.Helper()
	cfg := testConfig()
	for _, r := range cfg.Routes {
		if r.Path == route {
			o, err := newOffer(&cfg, r)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
	}
	t.Fatalf("no route %s", route)
	return nil
}

// wallet is a payer key generated for the test.
type wallet struct {
	key  *secp256k1.PrivateKey
	addr Address
}

func newWallet(t *testing.T) wallet {
	t.Helper()
	k, err := secp256k1.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return wallet{key: k, addr: PubkeyAddress(k.PubKey())}
}

// signDigest returns Ethereum's r || s || v (v = 27 or 28).
func signDigest(k *secp256k1.PrivateKey, digest []byte) []byte {
	c := ecdsa.SignCompact(k, digest, false) // [27+recid] || r || s
	return append(append([]byte{}, c[1:]...), c[0])
}

// authFor is a valid authorization for offer o from w at testNow.
func authFor(w wallet, o *offer) Authorization {
	var nonce [32]byte
	_, _ = rand.Read(nonce[:])
	return Authorization{
		From:        w.addr.String(),
		To:          o.req.PayTo,
		Value:       o.req.Amount,
		ValidAfter:  "0",
		ValidBefore: big.NewInt(testNow.Unix() + int64(o.req.MaxTimeoutSeconds)).String(),
		Nonce:       "0x" + hex.EncodeToString(nonce[:]),
	}
}

// signAuth signs a over domain d with w's key.
func signAuth(t *testing.T, w wallet, d Domain, a Authorization) string {
	t.Helper()
	tr, err := ParseAuthorization(a)
	if err != nil {
		t.Fatal(err)
	}
	return "0x" + hex.EncodeToString(signDigest(w.key, tr.Digest(d)))
}

// payloadFor builds the payload the official client would send for o,
// echoing resource and the bazaar extension.
func payloadFor(t *testing.T, o *offer, a Authorization, sig string) *PaymentPayload {
	t.Helper()
	inner, err := json.Marshal(ExactEVMPayload{Signature: sig, Authorization: a})
	if err != nil {
		t.Fatal(err)
	}
	pr := o.paymentRequired("http://boxer.test", nil, "")
	ext := map[string]json.RawMessage{}
	b, _ := json.Marshal(o.bazaar)
	ext["bazaar"] = b
	return &PaymentPayload{X402Version: Version, Resource: &pr.Resource, Accepted: o.req, Payload: inner, Extensions: ext}
}

// header encodes p as the client's PAYMENT-SIGNATURE.
func header(t *testing.T, p *PaymentPayload) string {
	t.Helper()
	h, err := EncodeHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// paidHeader is a complete valid payment for o by w.
func paidHeader(t *testing.T, w wallet, o *offer) string {
	t.Helper()
	a := authFor(w, o)
	return header(t, payloadFor(t, o, a, signAuth(t, w, o.domain, a)))
}

// testFail stands in for the api's error writer (ErrorWriter): the status
// of the code in the api's table, and the code as the body.
func testFail(w http.ResponseWriter, _ *http.Request, e *boxer.Error) {
	status := http.StatusInternalServerError
	if e.Code == boxer.ECodeUnavailable {
		status = http.StatusServiceUnavailable
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(e.Code))
}
