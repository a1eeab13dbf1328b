package x402

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mr-tron/base58"

	"boxer"
	"boxer/internal/store"
)

// Vectors made by the official client (@x402/extensions 2.27.0
// createSIWxPayload + encodeSIWxHeader): EVM with viem's
// privateKeyToAccount(0x11…11), Solana with a tweetnacl key from the seed
// 07…07 as a wallet-adapter signer.
const (
	officialEVMHeader    = "eyJkb21haW4iOiIxMjcuMC4wLjE6ODA4MCIsImFkZHJlc3MiOiIweDE5RTdFMzc2RTdDMjEzQjdFN2U3ZTQ2Y2M3MEE1ZEQwODZEQWZmMkEiLCJzdGF0ZW1lbnQiOiJTaWduIGluIHRvIGJveGVyIHRvIHJlYWNoIHRoZSBqb2JzIGFuZCBzZXNzaW9ucyB5b3UgcGFpZCBmb3IiLCJ1cmkiOiJodHRwOi8vMTI3LjAuMC4xOjgwODAvdjEvam9icy9qMSIsInZlcnNpb24iOiIxIiwiY2hhaW5JZCI6ImVpcDE1NTo4NDUzIiwidHlwZSI6ImVpcDE5MSIsIm5vbmNlIjoiMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYiLCJpc3N1ZWRBdCI6IjIwMjYtMDktMDJUMjE6NDY6NDUuNTcxWiIsImV4cGlyYXRpb25UaW1lIjoiMjAyNi0wOS0wMlQyMTo1MTo0NS41NzFaIiwicmVzb3VyY2VzIjpbImh0dHA6Ly8xMjcuMC4wLjE6ODA4MC92MS9qb2JzL2oxIl0sInNpZ25hdHVyZSI6IjB4NDg4YjlhM2Y1YjlhYTE3MjZmNTYxNWE1ZjI0NjczNmMzZWY3NTgxZDQ4MmZhNDM4ZWFiMWU2MDU1MWU1MTYxMjVmNDQyYWFlOTIyNjA4MzE4MjhjYjc4NWJmYjc4NDQ1ZDVhYzRkNDg2MGFhOWMxNTQxMjZhOWI0NGMwMGUyYjYxYyJ9"
	officialEVMMessage   = "127.0.0.1:8080 wants you to sign in with your Ethereum account:\n0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A\n\nSign in to boxer to reach the jobs and sessions you paid for\n\nURI: http://127.0.0.1:8080/v1/jobs/j1\nVersion: 1\nChain ID: 8453\nNonce: 0123456789abcdef0123456789abcdef\nIssued At: 2026-09-02T21:46:45.571Z\nExpiration Time: 2026-09-02T21:51:45.571Z\nResources:\n- http://127.0.0.1:8080/v1/jobs/j1"
	officialSolHeader    = "eyJkb21haW4iOiIxMjcuMC4wLjE6ODA4MCIsImFkZHJlc3MiOiJHbWFEcnBwQkM3UDVBUktWOGczZGppd1A4OXZ6MWpMSzIzVjJHQmp1QUVHQiIsInN0YXRlbWVudCI6IlNpZ24gaW4gdG8gYm94ZXIgdG8gcmVhY2ggdGhlIGpvYnMgYW5kIHNlc3Npb25zIHlvdSBwYWlkIGZvciIsInVyaSI6Imh0dHA6Ly8xMjcuMC4wLjE6ODA4MC92MS9qb2JzL2oxIiwidmVyc2lvbiI6IjEiLCJjaGFpbklkIjoic29sYW5hOkV0V1RSQUJaYVlxNmlNZmVZS291UnUxNjZWVTJ4cWExIiwidHlwZSI6ImVkMjU1MTkiLCJub25jZSI6IjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVmIiwiaXNzdWVkQXQiOiIyMDI2LTA5LTAyVDIxOjQ2OjQ1LjU3MVoiLCJleHBpcmF0aW9uVGltZSI6IjIwMjYtMDktMDJUMjE6NTE6NDUuNTcxWiIsInJlc291cmNlcyI6WyJodHRwOi8vMTI3LjAuMC4xOjgwODAvdjEvam9icy9qMSJdLCJzaWduYXR1cmUiOiI1MWRSNDZMVUhoR0VBWlV0WWEyTXZRVEhGMjR5YmJhaFhRU1NRdUNlaWd2eHdqeURKbVc5dEg4djlhQnc1NWhDa3JyTjN5YnVDbkV6aXBtWWRHR3p6c0czIn0="
	officialSolMessage   = "127.0.0.1:8080 wants you to sign in with your Solana account:\nGmaDrppBC7P5ARKV8g3djiwP89vz1jLK23V2GBjuAEGB\n\nSign in to boxer to reach the jobs and sessions you paid for\n\nURI: http://127.0.0.1:8080/v1/jobs/j1\nVersion: 1\nChain ID: EtWTRABZaYq6iMfeYKouRu166VU2xqa1\nNonce: 0123456789abcdef0123456789abcdef\nIssued At: 2026-09-02T21:46:45.571Z\nExpiration Time: 2026-09-02T21:51:45.571Z\nResources:\n- http://127.0.0.1:8080/v1/jobs/j1"
	officialSolAddress   = "GmaDrppBC7P5ARKV8g3djiwP89vz1jLK23V2GBjuAEGB"
	testSolanaDevnet     = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
	officialVectorIssued = "2026-09-02T21:46:45.571Z"
)

// The official client's proofs parse, print the very text it signed, and
// verify to the keys that made them.
func TestSignInOfficialVectors(t *testing.T) {
	key := secp256k1.PrivKeyFromBytes(bytesOf(0x11, 32))
	wantEVM := PubkeyAddress(key.PubKey())

	p, err := DecodeSignInHeader(officialEVMHeader)
	if err != nil {
		t.Fatal(err)
	}
	if got := siweMessage(p, wantEVM.String(), 8453); got != officialEVMMessage {
		t.Fatalf("SIWE text:\n%q\nwant\n%q", got, officialEVMMessage)
	}
	addr, e := verifyProof(p)
	if e != nil || addr != "0x"+hex.EncodeToString(wantEVM[:]) {
		t.Fatalf("EVM proof: %q, %v; want %s", addr, e, strings.ToLower(wantEVM.String()))
	}

	seedKey := ed25519.NewKeyFromSeed(bytesOf(7, 32))
	if got := base58.Encode(seedKey.Public().(ed25519.PublicKey)); got != officialSolAddress {
		t.Fatalf("base58 of the seed's key = %s, want %s", got, officialSolAddress)
	}
	p, err = DecodeSignInHeader(officialSolHeader)
	if err != nil {
		t.Fatal(err)
	}
	if got := siwsMessage(p); got != officialSolMessage {
		t.Fatalf("SIWS text:\n%q\nwant\n%q", got, officialSolMessage)
	}
	if addr, e := verifyProof(p); e != nil || addr != officialSolAddress {
		t.Fatalf("Solana proof: %q, %v", addr, e)
	}
}

// The optional lines print as the official formatters print them.
func TestSignInMessageOptionalLines(t *testing.T) {
	empty, rid := "", "r-1"
	none := []string{}
	p := &SignInProof{Domain: "h", Address: "A", URI: "http://h/", Version: "1", ChainID: "eip155:1", Nonce: "n", IssuedAt: "t"}
	if got, want := siweMessage(p, "0xA", 1), "h wants you to sign in with your Ethereum account:\n0xA\n\n\nURI: http://h/\nVersion: 1\nChain ID: 1\nNonce: n\nIssued At: t"; got != want {
		t.Fatalf("SIWE without statement:\n%q\nwant\n%q", got, want)
	}
	p.RequestID, p.Resources, p.NotBefore = &rid, &none, &empty
	if got, want := siweMessage(p, "0xA", 1), "h wants you to sign in with your Ethereum account:\n0xA\n\n\nURI: http://h/\nVersion: 1\nChain ID: 1\nNonce: n\nIssued At: t\nRequest ID: r-1\nResources:"; got != want {
		t.Fatalf("SIWE with empty resources:\n%q\nwant\n%q", got, want)
	}
	p.ChainID, p.RequestID = "solana:abc", &empty
	if got, want := siwsMessage(p), "h wants you to sign in with your Solana account:\nA\n\nURI: http://h/\nVersion: 1\nChain ID: abc\nNonce: n\nIssued At: t"; got != want {
		t.Fatalf("SIWS:\n%q\nwant\n%q", got, want)
	}
}

func bytesOf(b byte, n int) []byte { return []byte(strings.Repeat(string([]byte{b}), n)) }

// memorySignInNonces is a SignInNonceStore for tests that counts its
// writes: every call is one.
type memorySignInNonces struct {
	mu     sync.Mutex
	used   map[string]time.Time
	writes int
}

func newMemorySignInNonces() *memorySignInNonces {
	return &memorySignInNonces{used: map[string]time.Time{}}
}

func (m *memorySignInNonces) UseSignInNonce(_ context.Context, nonce string, expires, _ time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if _, ok := m.used[nonce]; ok {
		return false, nil
	}
	m.used[nonce] = expires
	return true, nil
}

func (m *memorySignInNonces) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

var _ SignInNonceStore = (*store.Store)(nil)

// testSignInKey is the nonce key of the tests' SignIns.
var testSignInKey = bytesOf(0x5a, 32)

// siwxRig is a SignIn in front of a handler that reports who signed in.
type siwxRig struct {
	t      *testing.T
	now    time.Time
	si     *SignIn
	nonces *memorySignInNonces
	h      http.Handler
	seen   []string
}

const siwxHost = "boxer.test:8080"

func newSiwxRig(t *testing.T) *siwxRig {
	rg := &siwxRig{t: t, now: testNow, nonces: newMemorySignInNonces()}
	si, err := NewSignIn(SignInConfig{Networks: []string{DefaultNetwork, testSolanaDevnet}},
		SignInDeps{Nonces: rg.nonces, Key: testSignInKey, Now: func() time.Time { return rg.now }})
	if err != nil {
		t.Fatal(err)
	}
	rg.wrap(si)
	return rg
}

// wrap puts si in front of the rig's handler.
func (rg *siwxRig) wrap(si *SignIn) {
	rg.si = si
	rg.h = si.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.seen = append(rg.seen, SignedInAs(r))
		w.WriteHeader(http.StatusOK)
	}), func(w http.ResponseWriter, _ *http.Request, e *boxer.Error) {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(e)
	})
}

func (rg *siwxRig) do(header string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "http://"+siwxHost+"/v1/jobs/j1", nil)
	if header != "" {
		r.Header.Set(HeaderSignInWithX, header)
	}
	w := httptest.NewRecorder()
	rg.h.ServeHTTP(w, r)
	return w
}

// challenge asks for one and returns its info, checking its form.
func (rg *siwxRig) challenge() SignInInfo {
	t := rg.t
	t.Helper()
	w := rg.do("")
	if w.Code != http.StatusPaymentRequired {
		t.Fatalf("no proof: %d, want 402", w.Code)
	}
	raw, err := base64.StdEncoding.DecodeString(w.Header().Get(HeaderPaymentRequired))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(w.Body.String()) != string(raw) {
		t.Fatalf("body and PAYMENT-REQUIRED differ:\n%s\n%s", w.Body, raw)
	}
	var pr struct {
		X402Version int                        `json:"x402Version"`
		Accepts     []json.RawMessage          `json:"accepts"`
		Extensions  map[string]SignInExtension `json:"extensions"`
	}
	if err := json.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.X402Version != 2 || pr.Accepts == nil || len(pr.Accepts) != 0 || !strings.Contains(string(raw), `"accepts":[]`) {
		t.Fatalf("challenge: %s", raw)
	}
	ext := pr.Extensions[ExtensionSignInWithX]
	info := ext.Info
	uri := "http://" + siwxHost + "/v1/jobs/j1"
	if info.Domain != siwxHost || info.URI != uri || info.Version != "1" || info.Statement != DefaultSignInStatement ||
		info.IssuedAt != isoMillis(rg.now) || info.ExpirationTime != isoMillis(rg.now.Add(5*time.Minute)) ||
		len(info.Resources) != 1 || info.Resources[0] != uri || len(info.Nonce) != 80 {
		t.Fatalf("challenge info: %+v", info)
	}
	if len(ext.SupportedChains) != 2 || ext.SupportedChains[0] != (SupportedChain{ChainID: DefaultNetwork, Type: "eip191"}) ||
		ext.SupportedChains[1] != (SupportedChain{ChainID: testSolanaDevnet, Type: "ed25519"}) {
		t.Fatalf("supportedChains: %+v", ext.SupportedChains)
	}
	return info
}

// proofOf is the proof a client makes of info for chain.
func proofOf(info SignInInfo, chain, typ, address string) *SignInProof {
	st, exp := info.Statement, info.ExpirationTime
	res := append([]string(nil), info.Resources...)
	return &SignInProof{Domain: info.Domain, Address: address, Statement: &st, URI: info.URI, Version: info.Version,
		ChainID: chain, Type: typ, Nonce: info.Nonce, IssuedAt: info.IssuedAt, ExpirationTime: &exp, Resources: &res}
}

func signEVM(k *secp256k1.PrivateKey, p *SignInProof) *SignInProof {
	addr := PubkeyAddress(k.PubKey())
	p.Signature = "0x" + hex.EncodeToString(signDigest(k, personalDigest(siweMessage(p, addr.String(), 8453))))
	return p
}

func signSol(k ed25519.PrivateKey, p *SignInProof) *SignInProof {
	p.Signature = base58.Encode(ed25519.Sign(k, []byte(siwsMessage(p))))
	return p
}

func encodeProof(t *testing.T, p *SignInProof) string {
	t.Helper()
	h, err := EncodeHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// wantRejected checks a 401 sign_in_rejected with reason.
func wantRejected(t *testing.T, w *httptest.ResponseRecorder, reason string) {
	t.Helper()
	var e boxer.Error
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	if w.Code != http.StatusUnauthorized || e.Code != boxer.ECodeSignInRejected || !strings.HasPrefix(e.Message, reason+": ") {
		t.Fatalf("got %d %s, want 401 sign_in_rejected %s", w.Code, w.Body, reason)
	}
}

// A good proof signs in once, as its address; the same proof again is a
// replay.
func TestSignInEVM(t *testing.T) {
	rg := newSiwxRig(t)
	w := newWallet(t)
	h := encodeProof(t, signEVM(w.key, proofOf(rg.challenge(), DefaultNetwork, "eip191", w.addr.String())))
	if got := rg.do(h); got.Code != http.StatusOK {
		t.Fatalf("good proof: %d %s", got.Code, got.Body)
	}
	if want := strings.ToLower(w.addr.String()); len(rg.seen) != 1 || rg.seen[0] != want {
		t.Fatalf("signed in as %q, want %s", rg.seen, want)
	}
	wantRejected(t, rg.do(h), SignInReasonNonceUsed)
	if len(rg.seen) != 1 {
		t.Fatalf("a replay reached the handler: %q", rg.seen)
	}

	// An all-lowercase address is the same signer: the text has its
	// EIP-55 form, as the official client prints it.
	rg.now = rg.now.Add(time.Second)
	p := signEVM(w.key, proofOf(rg.challenge(), DefaultNetwork, "eip191", strings.ToLower(w.addr.String())))
	if got := rg.do(encodeProof(t, p)); got.Code != http.StatusOK {
		t.Fatalf("lowercase address: %d %s", got.Code, got.Body)
	}
}

func TestSignInSolana(t *testing.T) {
	rg := newSiwxRig(t)
	k := ed25519.NewKeyFromSeed(bytesOf(9, 32))
	addr := base58.Encode(k.Public().(ed25519.PublicKey))
	h := encodeProof(t, signSol(k, proofOf(rg.challenge(), testSolanaDevnet, "ed25519", addr)))
	if got := rg.do(h); got.Code != http.StatusOK {
		t.Fatalf("good Solana proof: %d %s", got.Code, got.Body)
	}
	if len(rg.seen) != 1 || rg.seen[0] != addr {
		t.Fatalf("signed in as %q, want %s", rg.seen, addr)
	}
	wantRejected(t, rg.do(h), SignInReasonNonceUsed)
}

// Each way a proof can be wrong is refused with its reason, reaches no
// handler, and (but for the time checks, which come first) leaves the
// nonce for the real signer.
func TestSignInRejections(t *testing.T) {
	w := newWallet(t)
	other := newWallet(t)
	solKey := ed25519.NewKeyFromSeed(bytesOf(9, 32))
	solAddr := base58.Encode(solKey.Public().(ed25519.PublicKey))
	evm := func(info SignInInfo) *SignInProof { return proofOf(info, DefaultNetwork, "eip191", w.addr.String()) }
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		make   func(rg *siwxRig, info SignInInfo) string
		reason string
	}{
		{"not base64", func(*siwxRig, SignInInfo) string { return "%%%" }, SignInReasonMalformed},
		{"not JSON", func(*siwxRig, SignInInfo) string { return base64.StdEncoding.EncodeToString([]byte("[1]")) }, SignInReasonMalformed},
		{"no signature", func(_ *siwxRig, i SignInInfo) string { return encodeProof(t, evm(i)) }, SignInReasonMalformed},
		{"a number for the nonce", func(*siwxRig, SignInInfo) string {
			return base64.StdEncoding.EncodeToString([]byte(`{"domain":"d","address":"a","uri":"u","version":"1","chainId":"c","type":"eip191","nonce":1,"issuedAt":"t","signature":"s"}`))
		}, SignInReasonMalformed},
		{"wrong domain", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Domain = "evil.test"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonDomain},
		{"domain without the port", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Domain = "boxer.test"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonDomain},
		{"uri on another origin", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.URI = "http://boxer.test:8080.evil.com/v1/jobs/j1"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonURI},
		{"uri with https for http", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.URI = "https://" + siwxHost + "/v1/jobs/j1"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonURI},
		{"chain not offered", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.ChainID = "eip155:1"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonChain},
		{"type not the chain's", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Type = "ed25519"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonChain},
		{"smart-wallet scheme", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.SignatureScheme = str("eip1271")
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonUnsupportedSig},
		{"other statement", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Statement = str("Transfer all my funds")
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonStatement},
		{"no statement", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Statement = nil
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonStatement},
		{"version 2", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Version = "2"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonMalformed},
		{"expirationTime passed", func(rg *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.ExpirationTime = str(isoMillis(rg.now.Add(-time.Millisecond)))
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonExpired},
		{"issuedAt too old", func(rg *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.IssuedAt, p.ExpirationTime = isoMillis(rg.now.Add(-5*time.Minute-time.Millisecond)), nil
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonExpired},
		{"issuedAt in the future", func(rg *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.IssuedAt = isoMillis(rg.now.Add(6 * time.Second))
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNotYetValid},
		{"notBefore in the future", func(rg *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.NotBefore = str(isoMillis(rg.now.Add(time.Minute)))
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNotYetValid},
		{"issuedAt not a time", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.IssuedAt = "yesterday"
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonMalformed},
		{"a nonce never issued", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = strings.Repeat("ab", 16)
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce of another form", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = strings.ToUpper(i.Nonce)
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce with its MAC changed", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = flipHexDigit(i.Nonce, len(i.Nonce)-1)
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce with its expiry moved", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = flipHexDigit(i.Nonce, 2*(signInNonceRandom+6)) // a digit of the expiry, the MAC kept
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce with its random part changed", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = flipHexDigit(i.Nonce, 0)
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce made with another key", func(rg *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = newSignInNonce(bytesOf(0x5b, 32), rg.now.Add(time.Minute))
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce expiring later than any challenge", func(rg *siwxRig, i SignInInfo) string {
			// As one minted with a leaked key would: its row would
			// outlive every challenge.
			p := evm(i)
			p.Nonce = newSignInNonce(testSignInKey, rg.now.Add(5*time.Minute+5*time.Second+time.Millisecond))
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonNonceUnknown},
		{"a nonce of this key that expired", func(rg *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Nonce = newSignInNonce(testSignInKey, rg.now)
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonExpired},
		{"another address claimed", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			signEVM(w.key, p)
			p.Address = other.addr.String()
			return encodeProof(t, p)
		}, SignInReasonSignature},
		{"signed by another key", func(_ *siwxRig, i SignInInfo) string {
			return encodeProof(t, signEVM(other.key, evm(i)))
		}, SignInReasonSignature},
		{"message tampered after signing", func(_ *siwxRig, i SignInInfo) string {
			p := signEVM(w.key, evm(i))
			p.Resources = &[]string{"http://" + siwxHost + "/v1/sessions/ses_x"}
			return encodeProof(t, p)
		}, SignInReasonSignature},
		{"signature bit flipped", func(_ *siwxRig, i SignInInfo) string {
			p := signEVM(w.key, evm(i))
			b := []byte(p.Signature)
			if b[10] == '0' {
				b[10] = '1'
			} else {
				b[10] = '0'
			}
			p.Signature = string(b)
			return encodeProof(t, p)
		}, SignInReasonSignature},
		{"high-s twin of a good signature", func(_ *siwxRig, i SignInInfo) string {
			p := signEVM(w.key, evm(i))
			p.Signature = malleate(t, p.Signature)
			return encodeProof(t, p)
		}, SignInReasonSignature},
		{"bad EIP-55 checksum", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.Address = flipCase(w.addr.String())
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonMalformed},
		{"a line break in requestId", func(_ *siwxRig, i SignInInfo) string {
			p := evm(i)
			p.RequestID = str("x\nResources:")
			return encodeProof(t, signEVM(w.key, p))
		}, SignInReasonMalformed},
		{"Solana: signed by another key", func(_ *siwxRig, i SignInInfo) string {
			p := proofOf(i, testSolanaDevnet, "ed25519", solAddr)
			return encodeProof(t, signSol(ed25519.NewKeyFromSeed(bytesOf(8, 32)), p))
		}, SignInReasonSignature},
		{"Solana: tampered after signing", func(_ *siwxRig, i SignInInfo) string {
			p := signSol(solKey, proofOf(i, testSolanaDevnet, "ed25519", solAddr))
			p.URI += "?x"
			return encodeProof(t, p)
		}, SignInReasonSignature},
		{"Solana: signature not base58", func(_ *siwxRig, i SignInInfo) string {
			p := signSol(solKey, proofOf(i, testSolanaDevnet, "ed25519", solAddr))
			p.Signature = "0x" + p.Signature
			return encodeProof(t, p)
		}, SignInReasonSignature},
		{"Solana: a small-order key", func(_ *siwxRig, i SignInInfo) string {
			// The identity point (y = 1) with R = identity, S = 0 verifies
			// for every message under the cofactorless check.
			id := append([]byte{1}, make([]byte, 31)...)
			p := proofOf(i, testSolanaDevnet, "ed25519", base58.Encode(id))
			p.Signature = base58.Encode(append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...))
			return encodeProof(t, p)
		}, SignInReasonMalformed},
		{"Solana: an EVM address on a Solana chain", func(_ *siwxRig, i SignInInfo) string {
			return encodeProof(t, signEVM(w.key, proofOf(i, testSolanaDevnet, "ed25519", w.addr.String())))
		}, SignInReasonMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rg := newSiwxRig(t)
			info := rg.challenge()
			wantRejected(t, rg.do(c.make(rg, info)), c.reason)
			if len(rg.seen) != 0 {
				t.Fatalf("reached the handler as %q", rg.seen)
			}
			if n := rg.nonces.count(); n != 0 {
				t.Fatalf("a refused proof wrote to the nonce store (%d writes)", n)
			}
			// The refused proof did not spend the nonce.
			good := encodeProof(t, signEVM(w.key, evm(info)))
			if got := rg.do(good); got.Code != http.StatusOK {
				t.Fatalf("the real signer after a refused proof: %d %s", got.Code, got.Body)
			}
		})
	}
}

// A challenge answered after its nonce expired is refused, even with
// times the client rewrote to look fresh.
func TestSignInNonceExpiry(t *testing.T) {
	rg := newSiwxRig(t)
	w := newWallet(t)
	info := rg.challenge()
	rg.now = rg.now.Add(5*time.Minute + time.Second)
	p := proofOf(info, DefaultNetwork, "eip191", w.addr.String())
	p.IssuedAt, p.ExpirationTime = isoMillis(rg.now), nil
	wantRejected(t, rg.do(encodeProof(t, signEVM(w.key, p))), SignInReasonExpired)
}

func TestSignInConfigValidate(t *testing.T) {
	for _, bad := range []SignInConfig{
		{},
		{Networks: []string{"eip155:x"}},
		{Networks: []string{"solana:"}},
		{Networks: []string{"solana:0OIl"}},
		{Networks: []string{"cosmos:hub"}},
		{Networks: []string{DefaultNetwork}, Statement: "two\nlines"},
		{Networks: []string{DefaultNetwork}, PublicURL: "ftp://x"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
	if _, err := NewSignIn(SignInConfig{Networks: []string{DefaultNetwork}}, SignInDeps{Key: testSignInKey}); err == nil {
		t.Error("NewSignIn without a nonce store accepted")
	}
	for _, key := range [][]byte{nil, bytesOf(1, SignInKeyMin-1)} {
		if _, err := NewSignIn(SignInConfig{Networks: []string{DefaultNetwork}}, SignInDeps{Nonces: newMemorySignInNonces(), Key: key}); err == nil {
			t.Errorf("NewSignIn with a %d-byte key accepted", len(key))
		}
	}
}

// With a public URL, the domain and origin are its, whatever Host says.
func TestSignInPublicURL(t *testing.T) {
	nonces := newMemorySignInNonces()
	si, err := NewSignIn(SignInConfig{Networks: []string{DefaultNetwork}, PublicURL: "https://boxer.example/"},
		SignInDeps{Nonces: nonces, Key: testSignInKey, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	h := si.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), func(w http.ResponseWriter, _ *http.Request, e *boxer.Error) {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(e)
	})
	r := httptest.NewRequest(http.MethodGet, "http://evil.test/v1/jobs/j1", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	raw, _ := base64.StdEncoding.DecodeString(rec.Header().Get(HeaderPaymentRequired))
	var pr signInRequired
	if err := json.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	info := pr.Extensions[ExtensionSignInWithX].Info
	if info.Domain != "boxer.example" || info.URI != "https://boxer.example/v1/jobs/j1" {
		t.Fatalf("info %+v", info)
	}
	// A proof naming the Host the request came with is refused.
	wlt := newWallet(t)
	p := proofOf(info, DefaultNetwork, "eip191", wlt.addr.String())
	p.Domain, p.URI = "evil.test", "http://evil.test/v1/jobs/j1"
	r = httptest.NewRequest(http.MethodGet, "http://evil.test/v1/jobs/j1", nil)
	r.Header.Set(HeaderSignInWithX, encodeProof(t, signEVM(wlt.key, p)))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	wantRejected(t, rec, SignInReasonDomain)
}

// malleate returns the high-s twin of an r || s || v signature: (r, n-s,
// v flipped), which recovers to the same key.
func malleate(t *testing.T, sig string) string {
	t.Helper()
	raw, err := hex.DecodeString(strings.TrimPrefix(sig, "0x"))
	if err != nil || len(raw) != 65 {
		t.Fatalf("signature %s", sig)
	}
	var s secp256k1.ModNScalar
	s.SetByteSlice(raw[32:64])
	s.Negate()
	b := s.Bytes()
	copy(raw[32:64], b[:])
	raw[64] ^= 1 // 27 <-> 28
	return "0x" + hex.EncodeToString(raw)
}

// flipCase breaks an EIP-55 address's checksum by swapping the case of
// its first letter.
func flipCase(a string) string {
	b := []byte(a)
	for i := 2; i < len(b); i++ {
		switch {
		case b[i] >= 'a' && b[i] <= 'f':
			b[i] -= 'a' - 'A'
			return string(b)
		case b[i] >= 'A' && b[i] <= 'F':
			b[i] += 'a' - 'A'
			return string(b)
		}
	}
	return a
}
