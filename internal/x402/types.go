package x402

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the x402 protocol version boxer speaks.
const Version = 2

// SchemeExact is the only payment scheme boxer offers: an EIP-3009
// transferWithAuthorization of exactly the route's price.
const SchemeExact = "exact"

// HTTP header names of the x402 v2 HTTP transport. Go canonicalizes header
// keys, so these are only used through http.Header's Get and Set.
const (
	HeaderPaymentRequired  = "PAYMENT-REQUIRED"
	HeaderPaymentSignature = "PAYMENT-SIGNATURE"
	HeaderPaymentResponse  = "PAYMENT-RESPONSE"
	// HeaderPaymentV1 is the header of x402 v1 clients, which boxer refuses
	// with a clear reason rather than ignoring.
	HeaderPaymentV1 = "X-PAYMENT"
)

// ResourceInfo describes the resource being paid for. Clients echo it back in
// their PaymentPayload, sometimes with extra metadata fields (serviceName,
// tags, iconUrl) that are ignored here.
type ResourceInfo struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// AssetExtra is the "extra" object of an offer. On EVM it is the EIP-712
// domain name and version of the token, which the client needs to sign, and
// exactly these two fields: anything more confuses some clients. On Solana
// it is only the facilitator's fee payer.
type AssetExtra struct {
	Name     string `json:"name,omitempty"`
	Version  string `json:"version,omitempty"`
	FeePayer string `json:"feePayer,omitempty"`
}

// PaymentRequirements is one way to pay, as offered in PaymentRequired.accepts
// and as echoed by the client in PaymentPayload.accepted.
//
// Amount is a decimal string of atomic token units and MaxTimeoutSeconds a
// number: the official clients break on a numeric amount, and compute a
// validBefore far in the future from a string timeout.
type PaymentRequirements struct {
	Scheme            string      `json:"scheme"`
	Network           string      `json:"network"`
	Amount            string      `json:"amount"`
	Asset             string      `json:"asset"`
	PayTo             string      `json:"payTo"`
	MaxTimeoutSeconds int         `json:"maxTimeoutSeconds"`
	Extra             *AssetExtra `json:"extra,omitempty"`
}

// Extension is one entry of the "extensions" object: data from the server
// (Info) and the JSON Schema that validates it (Schema).
type Extension struct {
	Info   any `json:"info"`
	Schema any `json:"schema"`
}

// PaymentRequired is the challenge a 402 carries, base64 JSON in the
// PAYMENT-REQUIRED header and plain JSON in the body.
type PaymentRequired struct {
	X402Version int                   `json:"x402Version"`
	Error       string                `json:"error,omitempty"`
	Resource    ResourceInfo          `json:"resource"`
	Accepts     []PaymentRequirements `json:"accepts"`
	Extensions  map[string]Extension  `json:"extensions,omitempty"`
}

// PaymentPayload is what a client sends in PAYMENT-SIGNATURE. The official
// clients echo resource, extensions (the whole bazaar block) and the accepted
// requirements; all are tolerated, only Accepted and Payload are checked.
type PaymentPayload struct {
	X402Version int                        `json:"x402Version"`
	Resource    *ResourceInfo              `json:"resource,omitempty"`
	Accepted    PaymentRequirements        `json:"accepted"`
	Payload     json.RawMessage            `json:"payload"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`

	// raw is the decoded header JSON, forwarded to the facilitator unchanged
	// so that no field boxer does not model is lost on the way.
	raw json.RawMessage
}

// Raw returns the payload's JSON exactly as the client sent it (after
// base64 decoding). It is nil for a payload built in Go rather than decoded.
func (p *PaymentPayload) Raw() json.RawMessage { return p.raw }

// Authorization is the EIP-3009 TransferWithAuthorization message. Numbers
// are strings: decimal, or hex with a 0x prefix; nonce is 32 bytes of hex.
type Authorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
}

// ExactEVMPayload is PaymentPayload.Payload for the exact scheme on EVM with
// EIP-3009: a 65-byte signature (r || s || v, hex) over the authorization.
type ExactEVMPayload struct {
	Signature     string        `json:"signature"`
	Authorization Authorization `json:"authorization"`
}

// ExactEVM decodes the scheme-specific payload. It fails for any other shape,
// such as a Permit2 payload, which boxer does not offer.
func (p *PaymentPayload) ExactEVM() (*ExactEVMPayload, error) {
	if len(p.Payload) == 0 || string(p.Payload) == "null" {
		return nil, errors.New("payload is missing")
	}
	var e ExactEVMPayload
	if err := json.Unmarshal(p.Payload, &e); err != nil {
		return nil, fmt.Errorf("payload is not an exact EVM payload: %w", err)
	}
	if e.Signature == "" || e.Authorization.From == "" {
		return nil, errors.New("payload lacks signature or authorization (only EIP-3009 is accepted)")
	}
	return &e, nil
}

// FacilitatorRequest is the body of POST /verify and POST /settle.
// PaymentPayload is the client's payload, unchanged; PaymentRequirements are
// the route's own requirements, never the client's "accepted" echo: the
// facilitator checks the signed value against what it is given here.
type FacilitatorRequest struct {
	X402Version         int                 `json:"x402Version"`
	PaymentPayload      json.RawMessage     `json:"paymentPayload"`
	PaymentRequirements PaymentRequirements `json:"paymentRequirements"`
}

// VerifyResponse is the facilitator's answer to /verify. A facilitator may
// answer HTTP 200 with IsValid false.
type VerifyResponse struct {
	IsValid        bool   `json:"isValid"`
	InvalidReason  string `json:"invalidReason,omitempty"`
	InvalidMessage string `json:"invalidMessage,omitempty"`
	Payer          string `json:"payer,omitempty"`
}

// SettleResponse is the facilitator's answer to /settle, and (without
// ErrorMessage) what boxer sends back in PAYMENT-RESPONSE.
type SettleResponse struct {
	Success      bool   `json:"success"`
	ErrorReason  string `json:"errorReason,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Payer        string `json:"payer,omitempty"`
	Transaction  string `json:"transaction"`
	Network      string `json:"network"`
}
