package x402

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxHeaderBytes bounds an encoded PAYMENT-SIGNATURE header. The official
// client's payload echoes the whole bazaar extension (about 2 KB); 32 KiB is
// ample and keeps a hostile header from costing much to decode.
const MaxHeaderBytes = 32 << 10

// EncodeHeader returns v as standard padded base64 of its JSON, the encoding
// the x402 HTTP transport uses in its three headers. It never contains a
// newline. HTML characters are not escaped, to match what JavaScript's
// JSON.stringify produces (either form is valid JSON).
func EncodeHeader(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// decodeBase64 accepts standard base64, padded or not. URL-safe base64 is
// refused: no x402 client sends it, and accepting it would hide a bug.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty header")
	}
	if len(s) > MaxHeaderBytes {
		return nil, fmt.Errorf("header is %d bytes, more than %d", len(s), MaxHeaderBytes)
	}
	if strings.ContainsAny(s, "-_") {
		return nil, errors.New("header is not standard base64 (URL-safe alphabet)")
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("header is not standard base64: %w", err)
	}
	return b, nil
}

// DecodeHeader decodes a base64 JSON header into v. It is meant for the
// headers a server sends (PAYMENT-REQUIRED, PAYMENT-RESPONSE); payments go
// through DecodePaymentHeader, which checks more.
func DecodeHeader(s string, v any) error {
	b, err := decodeBase64(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// DecodePaymentHeader decodes a PAYMENT-SIGNATURE header into a v2
// PaymentPayload and keeps the decoded JSON for forwarding.
//
// Go matches JSON keys without regard to case, JavaScript does not. A
// payload holding both "payload" and "Payload" would then be checked here in
// one form and verified by the facilitator in the other, so keys that differ
// from a known field only by case are refused.
func DecodePaymentHeader(s string) (*PaymentPayload, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, err
	}
	if err := checkKeyCase(b); err != nil {
		return nil, err
	}
	var p PaymentPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("payment is not valid JSON: %w", err)
	}
	if p.X402Version != Version {
		return nil, fmt.Errorf("x402Version is %d, want %d", p.X402Version, Version)
	}
	p.raw = json.RawMessage(b)
	return &p, nil
}

var (
	payloadFields       = []string{"x402Version", "resource", "accepted", "payload", "extensions"}
	requirementFields   = []string{"scheme", "network", "amount", "asset", "payTo", "maxTimeoutSeconds", "extra"}
	exactPayloadFields  = []string{"signature", "authorization"}
	authorizationFields = []string{"from", "to", "value", "validAfter", "validBefore", "nonce"}
)

// checkKeyCase refuses case variants of the fields boxer checks, at each
// level it reads. Objects that are absent or of another type are left to
// json.Unmarshal to judge.
func checkKeyCase(b []byte) error {
	top, err := objectKeys(b, "payment", payloadFields)
	if err != nil || top == nil {
		return err
	}
	if _, err := objectKeys(top["accepted"], "accepted", requirementFields); err != nil {
		return err
	}
	inner, err := objectKeys(top["payload"], "payload", exactPayloadFields)
	if err != nil || inner == nil {
		return err
	}
	_, err = objectKeys(inner["authorization"], "authorization", authorizationFields)
	return err
}

// objectKeys decodes b as an object and checks its keys against known. It
// returns nil, nil when b is absent or not an object.
func objectKeys(b json.RawMessage, what string, known []string) (map[string]json.RawMessage, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil
	}
	for k := range m {
		for _, f := range known {
			if k != f && strings.EqualFold(k, f) {
				return nil, fmt.Errorf("%s has key %q, which differs from %q only by case", what, k, f)
			}
		}
	}
	return m, nil
}
