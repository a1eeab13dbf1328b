package x402

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"boxer"
)

// Sign-in with X (the x402 "sign-in-with-x" extension, CAIP-122): a caller
// proves it holds an address by signing a challenge, and is served as that
// address without paying. boxer uses it on the routes that serve what a
// payer already bought and carry no payment: GET /v1/jobs/{job_id} and a
// session's unpriced routes. A priced run is a new purchase and never
// accepts a sign-in instead of a payment.
//
//	client                          SignIn.Wrap                       store
//	  |-- GET (no SIGN-IN-WITH-X) ---->| nonce: random, expiry, MAC      |
//	  |                                |   (nothing stored)              |
//	  |<-- 402 PAYMENT-REQUIRED -------| accepts [], extensions          |
//	  |    (info, supportedChains)     |   "sign-in-with-x"              |
//	  |-- GET SIGN-IN-WITH-X: proof -->| nonce's MAC and expiry, then    |
//	  |                                | fields, times, signature        |
//	  |                                |-- UseSignInNonce (once) ------->|
//	  |<-- the signed-in address's ----| next, as that address           |
//	  |    answer                      |                                 |
//
// A challenge writes nothing (siwx_nonce.go): the nonce carries its own
// expiry under a MAC with a key every node shares, so that a caller
// without credentials cannot make the server write. The one write is a
// used nonce's row, made once a proof's signature holds, kept until the
// nonce expires. A refused proof is a 401 sign_in_rejected whose message
// starts with one of the SignInReason* codes; the caller asks for a new
// challenge.
//
// EVM addresses sign EIP-4361 (SIWE) text with personal_sign (EIP-191),
// verified by secp256k1 recovery; Solana addresses sign the same text
// (SIWS) with ed25519. Smart-contract wallets (EIP-1271, EIP-6492) need a
// call to the chain and are refused.

// Header and extension names of the sign-in-with-x extension.
const (
	HeaderSignInWithX    = "SIGN-IN-WITH-X"
	ExtensionSignInWithX = "sign-in-with-x"
)

// DefaultSignInStatement is the statement a challenge asks to sign.
const DefaultSignInStatement = "Sign in to boxer to reach the jobs and sessions you paid for"

// Reasons a sign-in is refused: the start of a sign_in_rejected error's
// message, stable for clients to switch on.
const (
	SignInReasonMalformed      = "sign_in_malformed"       // not base64 JSON of the proof's fields
	SignInReasonDomain         = "sign_in_domain_mismatch" // signed for another host
	SignInReasonURI            = "sign_in_uri_mismatch"    // signed for another origin
	SignInReasonChain          = "sign_in_unsupported_chain"
	SignInReasonStatement      = "sign_in_statement_mismatch"
	SignInReasonExpired        = "sign_in_expired"       // past expirationTime, too old, or the nonce expired
	SignInReasonNotYetValid    = "sign_in_not_yet_valid" // issuedAt or notBefore in the future
	SignInReasonSignature      = "sign_in_invalid_signature"
	SignInReasonNonceUsed      = "sign_in_nonce_used"    // a replay
	SignInReasonNonceUnknown   = "sign_in_nonce_unknown" // not issued here (a bad MAC, another form)
	SignInReasonUnsupportedSig = "sign_in_unsupported_signature_scheme"
)

// SignInConfig is how boxer asks callers to sign in.
type SignInConfig struct {
	// PublicURL, as Config.PublicURL: the origin a proof must name, and
	// its host the domain; empty means each request's Host.
	PublicURL string
	// Networks are the CAIP-2 chains a caller may sign in with, in order of
	// preference: eip155:<chain id> (EIP-191) or solana:<genesis hash>
	// (ed25519). Default: the payment network.
	Networks []string
	// Statement is the text a caller signs; a proof must carry it exactly.
	// Default: DefaultSignInStatement.
	Statement string
	// TTL is how long a challenge may be answered (its nonce's life and
	// the oldest issuedAt accepted). Default 5 minutes, the spec's.
	TTL time.Duration
	// Skew is how far in the future an issuedAt or notBefore may be: the
	// node that checks a proof may not be the one that issued it.
	// Default 5 s.
	Skew time.Duration
}

// Validate checks the networks and fills the defaults.
func (c *SignInConfig) Validate() error {
	if len(c.Networks) == 0 {
		return errors.New("sign-in: no network to sign in with")
	}
	for _, n := range c.Networks {
		if _, err := signatureType(n); err != nil {
			return fmt.Errorf("sign-in: %w", err)
		}
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("sign-in: public URL %q is not http(s)://host", c.PublicURL)
		}
	}
	if strings.ContainsAny(c.Statement, "\r\n") {
		return errors.New("sign-in: the statement must be one line")
	}
	if c.Statement == "" {
		c.Statement = DefaultSignInStatement
	}
	if c.TTL <= 0 {
		c.TTL = 5 * time.Minute
	}
	if c.Skew <= 0 {
		c.Skew = 5 * time.Second
	}
	return nil
}

// signatureType is the CAIP-122 signature type of a network.
func signatureType(network string) (string, error) {
	switch {
	case strings.HasPrefix(network, "eip155:"):
		if _, err := ChainID(network); err != nil {
			return "", err
		}
		return "eip191", nil
	case strings.HasPrefix(network, "solana:"):
		if ref := strings.TrimPrefix(network, "solana:"); ref == "" || !isBase58(ref) {
			return "", fmt.Errorf("network %q has no genesis-hash reference", network)
		}
		return "ed25519", nil
	}
	return "", fmt.Errorf("network %q is neither eip155:* nor solana:*", network)
}

// SignInNonceStore keeps the spent nonces of sign-in challenges, each
// until it expires; internal/store implements it on SQLite and Postgres.
// UseSignInNonce must be atomic: of concurrent uses of one nonce, on any
// node, exactly one is fresh.
type SignInNonceStore interface {
	UseSignInNonce(ctx context.Context, nonce string, expires, now time.Time) (fresh bool, err error)
}

// SignInDeps are what SignIn needs from the rest of boxer.
type SignInDeps struct {
	// Nonces is required.
	Nonces SignInNonceStore
	// Key MACs the challenges' nonces: at least SignInKeyMin random bytes,
	// the same on every node sharing Nonces (store.SignInKey), a secret.
	// Required.
	Key []byte
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// SignIn guards the routes a payer reaches by signing in. Make it with
// NewSignIn.
type SignIn struct {
	cfg    SignInConfig
	chains []SupportedChain
	nonces SignInNonceStore
	key    []byte
	log    *slog.Logger
	now    func() time.Time
}

// NewSignIn validates cfg and returns the guard.
func NewSignIn(cfg SignInConfig, deps SignInDeps) (*SignIn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Nonces == nil {
		return nil, errors.New("sign-in: needs a nonce store")
	}
	if len(deps.Key) < SignInKeyMin {
		return nil, fmt.Errorf("sign-in: the nonce key has %d bytes, want %d or more", len(deps.Key), SignInKeyMin)
	}
	s := &SignIn{cfg: cfg, nonces: deps.Nonces, key: bytes.Clone(deps.Key), log: deps.Logger, now: deps.Now}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, n := range cfg.Networks {
		typ, _ := signatureType(n)
		s.chains = append(s.chains, SupportedChain{ChainID: n, Type: typ})
	}
	return s, nil
}

type signedInKey struct{}

// SignedInAs returns the address a request to a route SignIn.Wrap guards
// signed in as: an EVM address in lowercase 0x hex (as PayerOf gives a
// payer), a Solana address in base58; "" elsewhere.
func SignedInAs(r *http.Request) string {
	a, _ := r.Context().Value(signedInKey{}).(string)
	return a
}

// Wrap returns next behind sign-in: a request without a proof gets a 402
// challenge, one with a bad proof a 401 through fail, one with a good
// proof reaches next, SignedInAs telling it who signed.
func (s *SignIn) Wrap(next http.Handler, fail ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get(HeaderSignInWithX)
		if header == "" {
			s.challenge(w, r, fail)
			return
		}
		addr, e := s.check(r, header)
		if e != nil {
			s.log.Debug("x402: sign-in refused", "path", r.URL.Path, "error", e.Message)
			w.Header().Set("Cache-Control", "no-store")
			fail(w, r, e)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), signedInKey{}, addr)))
	})
}

// SupportedChain is one way to sign in: a CAIP-2 chain and its signature
// type ("eip191" or "ed25519").
type SupportedChain struct {
	ChainID         string `json:"chainId"`
	Type            string `json:"type"`
	SignatureScheme string `json:"signatureScheme,omitempty"`
}

// SignInInfo is what a challenge asks to sign.
type SignInInfo struct {
	Domain         string   `json:"domain"`
	URI            string   `json:"uri"`
	Statement      string   `json:"statement,omitempty"`
	Version        string   `json:"version"`
	Nonce          string   `json:"nonce"`
	IssuedAt       string   `json:"issuedAt"`
	ExpirationTime string   `json:"expirationTime,omitempty"`
	Resources      []string `json:"resources,omitempty"`
}

// SignInExtension is extensions["sign-in-with-x"] of a challenge.
type SignInExtension struct {
	Info            SignInInfo       `json:"info"`
	SupportedChains []SupportedChain `json:"supportedChains"`
	Schema          any              `json:"schema"`
}

// signInRequired is a PaymentRequired whose one way in is to sign in:
// accepts is empty, as the official server has it for a route that needs
// no payment.
type signInRequired struct {
	X402Version int                        `json:"x402Version"`
	Error       string                     `json:"error,omitempty"`
	Resource    ResourceInfo               `json:"resource"`
	Accepts     []PaymentRequirements      `json:"accepts"`
	Extensions  map[string]SignInExtension `json:"extensions"`
}

// challenge answers 402 with what to sign. It stores nothing: the nonce
// vouches for itself (siwx_nonce.go).
func (s *SignIn) challenge(w http.ResponseWriter, r *http.Request, fail ErrorWriter) {
	now := s.now().UTC().Truncate(time.Millisecond)
	expires := now.Add(s.cfg.TTL)
	nonce := newSignInNonce(s.key, expires)
	uri := resourceURL(s.cfg.PublicURL, r, r.URL.EscapedPath())
	ext := SignInExtension{
		Info: SignInInfo{
			Domain: s.domain(r), URI: uri, Statement: s.cfg.Statement, Version: "1", Nonce: nonce,
			IssuedAt: isoMillis(now), ExpirationTime: isoMillis(expires), Resources: []string{uri},
		},
		SupportedChains: s.chains,
		Schema:          signInSchema,
	}
	pr := signInRequired{
		X402Version: Version,
		Error:       "sign_in_required: sign the sign-in-with-x challenge with the address that paid, and send it in SIGN-IN-WITH-X",
		Resource:    ResourceInfo{URL: uri, Description: "What the signed-in payer bought; no payment is taken here", MimeType: "application/json"},
		Accepts:     []PaymentRequirements{},
		Extensions:  map[string]SignInExtension{ExtensionSignInWithX: ext},
	}
	write402(w, r, fail, pr)
}

// isoMillis is JavaScript's Date.toISOString: UTC, milliseconds, Z.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// origin is the scheme://host[:port] proofs must name, and domain its
// host with the port: the official client refuses a challenge whose domain
// is not the host it asked, port included. Without a PublicURL it is the
// request's Host, which a client chooses: set --x402-public-url where a
// proof signed for another name must not be accepted.
func (s *SignIn) origin(r *http.Request) *url.URL {
	u, err := url.Parse(resourceURL(s.cfg.PublicURL, r, "/"))
	if err != nil {
		return &url.URL{}
	}
	return u
}

func (s *SignIn) domain(r *http.Request) string { return s.origin(r).Host }

// SignInProof is the SIGN-IN-WITH-X header's JSON: the challenge's fields
// echoed, the chain chosen, the address and its signature. Fields the
// message prints only when present are pointers, so that an empty value
// and an absent one are told apart as the official client tells them.
type SignInProof struct {
	Domain          string    `json:"domain"`
	Address         string    `json:"address"`
	Statement       *string   `json:"statement"`
	URI             string    `json:"uri"`
	Version         string    `json:"version"`
	ChainID         string    `json:"chainId"`
	Type            string    `json:"type"`
	Nonce           string    `json:"nonce"`
	IssuedAt        string    `json:"issuedAt"`
	ExpirationTime  *string   `json:"expirationTime"`
	NotBefore       *string   `json:"notBefore"`
	RequestID       *string   `json:"requestId"`
	Resources       *[]string `json:"resources"`
	SignatureScheme *string   `json:"signatureScheme"`
	Signature       string    `json:"signature"`
}

// DecodeSignInHeader parses a SIGN-IN-WITH-X header: standard base64 of a
// JSON object with every required field a string.
func DecodeSignInHeader(header string) (*SignInProof, error) {
	raw, err := decodeBase64(header)
	if err != nil {
		return nil, err
	}
	var p SignInProof
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("not a JSON sign-in proof: %v", err)
	}
	for name, v := range map[string]string{"domain": p.Domain, "address": p.Address, "uri": p.URI, "version": p.Version,
		"chainId": p.ChainID, "type": p.Type, "nonce": p.Nonce, "issuedAt": p.IssuedAt, "signature": p.Signature} {
		if v == "" {
			return nil, fmt.Errorf("%s is required", name)
		}
	}
	return &p, nil
}

func rejectSignIn(reason, format string, args ...any) *boxer.Error {
	return boxer.Errorf(boxer.ECodeSignInRejected, "%s: %s", reason, fmt.Sprintf(format, args...))
}

// check verifies a proof for request r and spends its nonce, returning
// the address it signs in.
func (s *SignIn) check(r *http.Request, header string) (string, *boxer.Error) {
	p, err := DecodeSignInHeader(header)
	if err != nil {
		return "", rejectSignIn(SignInReasonMalformed, "SIGN-IN-WITH-X: %v", err)
	}
	now := s.now()
	// The nonce first: it is the cheapest check, and the one that keeps
	// everything after it (the signature's curve arithmetic, the store's
	// write) to challenges this server issued and that are still open.
	expires, e := s.checkNonce(p.Nonce, now)
	if e != nil {
		return "", e
	}
	if e := s.checkFields(r, p, now); e != nil {
		return "", e
	}
	addr, e := verifyProof(p)
	if e != nil {
		return "", e
	}
	// Spent only once the signature holds, so that no one but the signer
	// can use up a challenge, and no one without a key can make a write.
	fresh, err := s.nonces.UseSignInNonce(r.Context(), p.Nonce, expires, now)
	if err != nil {
		s.log.Error("x402: use sign-in nonce", "err", err)
		return "", boxer.Errorf(boxer.ECodeInternal, "internal error; could not check the sign-in nonce")
	}
	if !fresh {
		return "", rejectSignIn(SignInReasonNonceUsed, "this sign-in was already used; ask for a new challenge")
	}
	return addr, nil
}

// checkNonce checks that nonce is one this server (any node sharing the
// key) issued and that it is open at now, returning its expiry. A nonce
// whose expiry is further off than a challenge's life is refused as not
// issued here: no node makes one (but for a clock ahead by more than the
// skew), and a store row kept that long would outlive the challenge.
func (s *SignIn) checkNonce(nonce string, now time.Time) (time.Time, *boxer.Error) {
	expires, ok := openSignInNonce(s.key, nonce)
	switch {
	case !ok:
		return time.Time{}, rejectSignIn(SignInReasonNonceUnknown, "the nonce was not issued by this server; ask for a new challenge")
	case !now.Before(expires):
		return time.Time{}, rejectSignIn(SignInReasonExpired, "the challenge expired; ask for a new one")
	case expires.After(now.Add(s.cfg.TTL + s.cfg.Skew)):
		return time.Time{}, rejectSignIn(SignInReasonNonceUnknown, "the nonce expires %s, later than any challenge this server issues; ask for a new one", isoMillis(expires))
	}
	return expires, nil
}

// checkFields checks everything but the nonce, the signature and the
// nonce's use.
func (s *SignIn) checkFields(r *http.Request, p *SignInProof, now time.Time) *boxer.Error {
	origin := s.origin(r)
	if p.Domain != origin.Host {
		return rejectSignIn(SignInReasonDomain, "domain %q is not this server's %q", p.Domain, origin.Host)
	}
	u, err := url.Parse(p.URI)
	if err != nil || u.Scheme != origin.Scheme || u.Host != origin.Host || u.User != nil {
		return rejectSignIn(SignInReasonURI, "uri %q is not on this server's origin %s://%s", p.URI, origin.Scheme, origin.Host)
	}
	if p.Version != "1" {
		return rejectSignIn(SignInReasonMalformed, "version %q is not 1", p.Version)
	}
	chain, ok := s.chain(p.ChainID)
	if !ok {
		return rejectSignIn(SignInReasonChain, "chainId %q is not one this server offers", p.ChainID)
	}
	if p.Type != chain.Type {
		return rejectSignIn(SignInReasonChain, "type %q is not %q, the signature type of %s", p.Type, chain.Type, p.ChainID)
	}
	if e := checkScheme(p); e != nil {
		return e
	}
	if p.Statement == nil || *p.Statement != s.cfg.Statement {
		return rejectSignIn(SignInReasonStatement, "the statement is not the one this server asks to sign")
	}
	issued, err := time.Parse(time.RFC3339Nano, p.IssuedAt)
	if err != nil {
		return rejectSignIn(SignInReasonMalformed, "issuedAt %q is not an ISO 8601 time", p.IssuedAt)
	}
	if issued.After(now.Add(s.cfg.Skew)) {
		return rejectSignIn(SignInReasonNotYetValid, "issuedAt %s is in the future", p.IssuedAt)
	}
	if now.Sub(issued) > s.cfg.TTL {
		return rejectSignIn(SignInReasonExpired, "issuedAt %s is more than %s ago", p.IssuedAt, s.cfg.TTL)
	}
	if p.ExpirationTime != nil && *p.ExpirationTime != "" {
		t, err := time.Parse(time.RFC3339Nano, *p.ExpirationTime)
		if err != nil {
			return rejectSignIn(SignInReasonMalformed, "expirationTime %q is not an ISO 8601 time", *p.ExpirationTime)
		}
		if !now.Before(t) {
			return rejectSignIn(SignInReasonExpired, "expirationTime %s has passed", *p.ExpirationTime)
		}
	}
	if p.NotBefore != nil && *p.NotBefore != "" {
		t, err := time.Parse(time.RFC3339Nano, *p.NotBefore)
		if err != nil {
			return rejectSignIn(SignInReasonMalformed, "notBefore %q is not an ISO 8601 time", *p.NotBefore)
		}
		if t.After(now.Add(s.cfg.Skew)) {
			return rejectSignIn(SignInReasonNotYetValid, "notBefore %s is in the future", *p.NotBefore)
		}
	}
	// The message is lines of text: a field with a line break in it would
	// make one message read as another.
	free := []string{p.Address, p.Signature}
	if p.RequestID != nil {
		free = append(free, *p.RequestID)
	}
	if p.Resources != nil {
		free = append(free, *p.Resources...)
	}
	for _, f := range free {
		if strings.ContainsFunc(f, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return rejectSignIn(SignInReasonMalformed, "a field holds a control character")
		}
	}
	return nil
}

func (s *SignIn) chain(id string) (SupportedChain, bool) {
	for _, c := range s.chains {
		if c.ChainID == id {
			return c, true
		}
	}
	return SupportedChain{}, false
}

// checkScheme refuses the signature schemes boxer cannot verify offline.
func checkScheme(p *SignInProof) *boxer.Error {
	if p.SignatureScheme == nil {
		return nil
	}
	switch sc := *p.SignatureScheme; {
	case p.Type == "eip191" && sc == "eip191", p.Type == "ed25519" && sc == "siws":
		return nil
	case sc == "eip1271" || sc == "eip6492":
		return rejectSignIn(SignInReasonUnsupportedSig, "smart-contract wallets (%s) are not supported; sign with the key of an EOA", sc)
	default:
		return rejectSignIn(SignInReasonUnsupportedSig, "signatureScheme %q does not go with type %q", sc, p.Type)
	}
}

// verifyProof checks the signature over the message the proof's fields
// make and returns the signer's address in its canonical form.
func verifyProof(p *SignInProof) (string, *boxer.Error) {
	switch p.Type {
	case "eip191":
		return verifyEVMProof(p)
	case "ed25519":
		return verifySolanaProof(p)
	}
	return "", rejectSignIn(SignInReasonChain, "type %q is not supported", p.Type)
}

// signInSchema is the JSON Schema of a proof, as the spec gives it.
var signInSchema = map[string]any{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type":    "object",
	"properties": map[string]any{
		"domain":         map[string]any{"type": "string"},
		"address":        map[string]any{"type": "string"},
		"statement":      map[string]any{"type": "string"},
		"uri":            map[string]any{"type": "string", "format": "uri"},
		"version":        map[string]any{"type": "string"},
		"chainId":        map[string]any{"type": "string"},
		"type":           map[string]any{"type": "string"},
		"nonce":          map[string]any{"type": "string"},
		"issuedAt":       map[string]any{"type": "string", "format": "date-time"},
		"expirationTime": map[string]any{"type": "string", "format": "date-time"},
		"notBefore":      map[string]any{"type": "string", "format": "date-time"},
		"requestId":      map[string]any{"type": "string"},
		"resources":      map[string]any{"type": "array", "items": map[string]any{"type": "string", "format": "uri"}},
		"signature":      map[string]any{"type": "string"},
	},
	"required": []string{"domain", "address", "uri", "version", "chainId", "type", "nonce", "issuedAt", "signature"},
}
