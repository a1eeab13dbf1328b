package x402

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// Payment modes.
const (
	ModeOff  = "off"  // every route is free (local use)
	ModeX402 = "x402" // priced routes answer 402 until paid
)

// Defaults: USDC on Base, as in the discovery records boxer is modelled on.
const (
	DefaultNetwork           = "eip155:8453"
	DefaultAsset             = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
	DefaultAssetName         = "USD Coin"
	DefaultAssetVersion      = "2"
	DefaultAssetDecimals     = 6
	DefaultMaxTimeoutSeconds = 300
)

// Config is the payment part of boxer's configuration. Suggested flags (and
// environment variables) are given per field; the first five are fixed by
// the project.
type Config struct {
	// Mode is ModeOff or ModeX402. --payments (BOXER_PAYMENTS)
	Mode string
	// PayTo receives the payments. --x402-pay-to (BOXER_X402_PAY_TO)
	PayTo string
	// FacilitatorURL is the base URL; /verify and /settle are appended.
	// --x402-facilitator-url (BOXER_X402_FACILITATOR_URL)
	FacilitatorURL string
	// FacilitatorAuthHeader is an optional "Name: value" header sent with
	// every facilitator call, e.g. "Authorization: Bearer ...".
	// --x402-facilitator-auth-header (BOXER_X402_FACILITATOR_AUTH_HEADER)
	FacilitatorAuthHeader string
	// FacilitatorTimeout bounds one facilitator call. Settlement waits for
	// the transaction receipt, so it must exceed a few block times.
	// --x402-facilitator-timeout (BOXER_X402_FACILITATOR_TIMEOUT)
	FacilitatorTimeout time.Duration
	// Network is the CAIP-2 chain. --x402-network (BOXER_X402_NETWORK)
	Network string
	// Asset is the EIP-3009 token contract. --x402-asset (BOXER_X402_ASSET)
	Asset string
	// AssetName and AssetVersion are the token's EIP-712 domain; they must
	// equal the contract's name() and version() or every signature fails.
	// --x402-asset-name, --x402-asset-version (BOXER_X402_ASSET_NAME, _VERSION)
	AssetName    string
	AssetVersion string
	// AssetDecimals converts USD prices to atomic units (USDC: 6).
	// --x402-asset-decimals (BOXER_X402_ASSET_DECIMALS)
	AssetDecimals int
	// MaxTimeoutSeconds is offered to clients; the official client signs an
	// authorization valid for this long. --x402-max-timeout-seconds
	MaxTimeoutSeconds int
	// ValidityMargin is how long a payment must still be valid when it
	// arrives, so that the run and the settlement fit in its window; a
	// payment about to expire would run and then fail to settle. Keep it
	// above the longest wall-time limit plus a settlement (default 60 s for
	// boxer's 30 s limit).
	// --x402-validity-margin (BOXER_X402_VALIDITY_MARGIN)
	ValidityMargin time.Duration
	// PublicURL is the externally visible base URL ("https://boxer.example")
	// used in resource.url; empty means it is derived from each request.
	// --x402-public-url (BOXER_X402_PUBLIC_URL)
	PublicURL string
	// Routes are the priced routes. DefaultRoutes gives /v1/exec and
	// /v1/run-python; prices can be set per route with
	// --x402-price-exec / --x402-price-run-python (BOXER_X402_PRICE_EXEC, ...).
	Routes []Route
	// Solana, when its PayTo is set, is offered beside the EVM payment
	// (svm.go).
	Solana SolanaConfig
	// PaymentID bounds the payment-identifier extension's kept answers;
	// zero fields take its defaults.
	PaymentID PaymentIDConfig
}

// Route is one priced route and how the bazaar extension describes it.
type Route struct {
	// Path is the route as mounted ("/v1/exec"); Wrap is called with it.
	Path string
	// Price is in USD, "0.02" or "$0.02", converted exactly to atomic units.
	Price       string
	Description string
	// Method is the HTTP method the bazaar entry advertises (POST).
	Method string
	// InputExample is an example JSON request body; BodySchema its JSON
	// Schema. OutputExample is an example JSON response.
	InputExample  json.RawMessage
	BodySchema    json.RawMessage
	OutputExample json.RawMessage
}

// DefaultConfig returns payments off with USDC on Base and the default
// routes; an operator who turns x402 on supplies PayTo and FacilitatorURL.
func DefaultConfig() Config {
	return Config{
		Mode:               ModeOff,
		FacilitatorTimeout: 60 * time.Second,
		Network:            DefaultNetwork,
		Asset:              DefaultAsset,
		AssetName:          DefaultAssetName,
		AssetVersion:       DefaultAssetVersion,
		AssetDecimals:      DefaultAssetDecimals,
		MaxTimeoutSeconds:  DefaultMaxTimeoutSeconds,
		ValidityMargin:     60 * time.Second,
		Routes:             DefaultRoutes(),
		Solana:             DefaultSolanaConfig(),
	}
}

// Validate refuses an incomplete or inconsistent config with a message that
// names the flag to fix. With Mode off nothing else is checked.
func (c *Config) Validate() error {
	switch c.Mode {
	case ModeOff, "":
		return nil
	case ModeX402:
	default:
		return fmt.Errorf("payments: mode %q is neither %q nor %q (--payments)", c.Mode, ModeOff, ModeX402)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("payments: "+format, args...)) }
	if c.PayTo == "" {
		bad("x402 needs a recipient address (--x402-pay-to / BOXER_X402_PAY_TO)")
	} else if a, err := ParseAddress(c.PayTo); err != nil {
		bad("pay-to: %v (--x402-pay-to)", err)
	} else if a == (Address{}) {
		bad("pay-to is the zero address (--x402-pay-to)")
	}
	if c.FacilitatorURL == "" {
		bad("x402 needs a facilitator (--x402-facilitator-url / BOXER_X402_FACILITATOR_URL)")
	} else if u, err := url.Parse(c.FacilitatorURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("facilitator URL %q is not an http(s) URL (--x402-facilitator-url)", c.FacilitatorURL)
	}
	if c.FacilitatorAuthHeader != "" {
		if _, _, err := parseAuthHeader(c.FacilitatorAuthHeader); err != nil {
			bad("%v (--x402-facilitator-auth-header)", err)
		}
	}
	if c.FacilitatorTimeout <= 0 {
		bad("facilitator timeout must be positive (--x402-facilitator-timeout)")
	}
	if _, err := ChainID(c.Network); err != nil {
		bad("%v (--x402-network)", err)
	}
	if _, err := ParseAddress(c.Asset); err != nil {
		bad("asset: %v (--x402-asset)", err)
	}
	if c.AssetName == "" || c.AssetVersion == "" {
		bad("the asset's EIP-712 name and version are required (--x402-asset-name, --x402-asset-version)")
	}
	if c.AssetDecimals < 0 || c.AssetDecimals > 36 {
		bad("asset decimals %d out of range (--x402-asset-decimals)", c.AssetDecimals)
	}
	if c.MaxTimeoutSeconds <= 0 {
		bad("max timeout seconds must be positive (--x402-max-timeout-seconds)")
	}
	if c.ValidityMargin < 0 || c.ValidityMargin >= time.Duration(c.MaxTimeoutSeconds)*time.Second {
		bad("validity margin %v must be under max timeout %ds, or no client payment could pass", c.ValidityMargin, c.MaxTimeoutSeconds)
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("public URL %q is not an http(s) URL (--x402-public-url)", c.PublicURL)
		}
	}
	errs = append(errs, c.Solana.validate()...)
	if err := c.PaymentID.validate(c.FacilitatorTimeout, c.ValidityMargin); err != nil {
		bad("%v", err)
	}
	if len(c.Routes) == 0 {
		bad("no priced routes")
	}
	seen := map[string]bool{}
	for _, r := range c.Routes {
		if !strings.HasPrefix(r.Path, "/") {
			bad("route %q must start with /", r.Path)
		}
		if seen[r.Path] {
			bad("route %q is priced twice", r.Path)
		}
		seen[r.Path] = true
		if amt, err := AtomicAmount(r.Price, c.AssetDecimals); err != nil {
			bad("route %s: %v", r.Path, err)
		} else if amt.Sign() == 0 {
			bad("route %s: price is zero; use --payments off for free routes", r.Path)
		}
		if c.Solana.Enabled() {
			if _, err := AtomicAmount(r.Price, c.Solana.AssetDecimals); err != nil {
				bad("route %s: solana: %v", r.Path, err)
			}
		}
		for name, j := range map[string]json.RawMessage{"input example": r.InputExample, "body schema": r.BodySchema, "output example": r.OutputExample} {
			if len(j) > 0 && !json.Valid(j) {
				bad("route %s: %s is not valid JSON", r.Path, name)
			}
		}
	}
	return errors.Join(errs...)
}

// AtomicAmount converts a USD price ("0.02", "$0.02") to atomic units of a
// token with the given decimals (20000 for USDC). The conversion is exact: a
// price with more fractional digits than the token has is refused rather
// than rounded.
func AtomicAmount(price string, decimals int) (*big.Int, error) {
	p := strings.TrimPrefix(strings.TrimSpace(price), "$")
	whole, frac, _ := strings.Cut(p, ".")
	if p == "" || (whole == "" && frac == "") || strings.Trim(whole+frac, "0123456789") != "" {
		return nil, fmt.Errorf("price %q is not a decimal number of USD", price)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > decimals {
		return nil, fmt.Errorf("price %q has more than %d decimals", price, decimals)
	}
	n, ok := new(big.Int).SetString("0"+whole+frac+strings.Repeat("0", decimals-len(frac)), 10)
	if !ok {
		return nil, fmt.Errorf("price %q is not a decimal number of USD", price)
	}
	return n, nil
}

// parseAuthHeader splits "Name: value".
func parseAuthHeader(h string) (name, value string, err error) {
	name, value, ok := strings.Cut(h, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || value == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
		return "", "", errors.New(`facilitator auth header must be "Name: value"`)
	}
	return textproto.CanonicalMIMEHeaderKey(name), value, nil
}
