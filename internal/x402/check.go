package x402

import (
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Reasons a payment is refused. Those that the official facilitator also
// reports use its spelling, so a client sees one vocabulary.
const (
	ReasonMissing           = "payment_required"
	ReasonV1Unsupported     = "x402_v1_unsupported"
	ReasonInvalidPayload    = "invalid_payload"
	ReasonRequirements      = "payment_requirements_mismatch"
	ReasonScheme            = "invalid_scheme"
	ReasonNetwork           = "invalid_exact_evm_network_mismatch"
	ReasonRecipient         = "invalid_exact_evm_recipient_mismatch"
	ReasonValue             = "invalid_exact_evm_payload_authorization_value_mismatch"
	ReasonValidAfter        = "invalid_exact_evm_payload_authorization_valid_after"
	ReasonValidBefore       = "invalid_exact_evm_payload_authorization_valid_before"
	ReasonSignature         = "invalid_exact_evm_signature"
	ReasonReplay            = "payment_already_used"
	ReasonInFlight          = "payment_in_flight"
	ReasonVerifyFailed      = "payment_verification_failed"
	ReasonSettlementFailed  = "payment_settlement_failed"
	ReasonFacilitatorFailed = "facilitator_unavailable"
)

// Rejection is a payment refused for a reason the caller can act on. It is
// returned as a 402 whose PAYMENT-REQUIRED error carries Reason and Message.
type Rejection struct {
	Reason  string
	Message string
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Message }

func reject(reason, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// checkedPayment is a payment that passed the local checks, on either
// network.
type checkedPayment struct {
	payer    string              // as shown: EIP-55 or base58
	payerKey string              // as stored and keyed: lowercase hex or base58
	nonce    string              // what makes the payment single-use
	req      PaymentRequirements // what it pays, sent to the facilitator
}

// check runs the cheap local checks, in the order that gives the most useful
// message, before anything leaves the process. The signature is recovered
// over this route's own EIP-712 domain, so a payment signed for another
// token or chain fails there even if its "accepted" echo was edited.
func (o *offer) check(p *PaymentPayload, now time.Time, margin time.Duration) (*checkedPayment, *Rejection) {
	if o.svm != nil && p.Accepted.Network == o.svm.req.Network {
		return o.svm.check(p)
	}
	if rej := o.matchAccepted(&p.Accepted); rej != nil {
		return nil, rej
	}
	ep, err := p.ExactEVM()
	if err != nil {
		return nil, reject(ReasonInvalidPayload, "%v", err)
	}
	t, err := ParseAuthorization(ep.Authorization)
	if err != nil {
		return nil, reject(ReasonInvalidPayload, "authorization: %v", err)
	}
	if t.To != o.payTo {
		return nil, reject(ReasonRecipient, "authorization pays %s, not %s", t.To, o.payTo)
	}
	want, _ := new(big.Int).SetString(o.req.Amount, 10)
	if t.Value.Cmp(want) != 0 {
		return nil, reject(ReasonValue, "authorization value is %s, the exact scheme needs %s", t.Value, want)
	}
	// The token accepts a transfer only when validAfter < block time <
	// validBefore. validBefore must leave room for the run and settlement.
	unix := big.NewInt(now.Unix())
	if t.ValidAfter.Cmp(unix) >= 0 {
		return nil, reject(ReasonValidAfter, "authorization is not valid before %s (now %d)", t.ValidAfter, now.Unix())
	}
	deadline := big.NewInt(now.Add(margin).Unix())
	if t.ValidBefore.Cmp(deadline) <= 0 {
		if t.ValidBefore.Cmp(unix) <= 0 {
			return nil, reject(ReasonValidBefore, "authorization expired at %s (now %d)", t.ValidBefore, now.Unix())
		}
		return nil, reject(ReasonValidBefore, "authorization expires at %s, too soon to run and settle (needs %v of validity)", t.ValidBefore, margin)
	}
	signer, err := RecoverSigner(t.Digest(o.domain), ep.Signature)
	if err != nil {
		return nil, reject(ReasonSignature, "%v", err)
	}
	if signer != t.From {
		return nil, reject(ReasonSignature, "signature is not by %s (it is not for this authorization, token or chain)", t.From)
	}
	return &checkedPayment{payer: t.From.String(), payerKey: strings.ToLower(t.From.String()), nonce: t.NonceHex(), req: o.req}, nil
}

// matchAccepted compares the client's echo of the requirements to the offer
// field by field: numbers by value, addresses by bytes, so key order, case
// and JSON escaping do not matter. Extra keys in "extra" are tolerated, as
// the official server tolerates them; name and version must match.
func (o *offer) matchAccepted(a *PaymentRequirements) *Rejection {
	if a.Scheme != o.req.Scheme {
		return reject(ReasonScheme, "scheme %q is not offered; use %q", a.Scheme, o.req.Scheme)
	}
	if a.Network != o.req.Network {
		return reject(ReasonNetwork, "network %q is not offered; use %q", a.Network, o.req.Network)
	}
	if amt, err := ParseUint256(a.Amount); err != nil || amt.String() != o.req.Amount {
		return reject(ReasonRequirements, "accepted amount %q differs from the price %s", a.Amount, o.req.Amount)
	}
	if asset, err := ParseAddress(a.Asset); err != nil || asset != o.asset {
		return reject(ReasonRequirements, "accepted asset %q is not %s", a.Asset, o.req.Asset)
	}
	if payTo, err := ParseAddress(a.PayTo); err != nil || payTo != o.payTo {
		return reject(ReasonRecipient, "accepted payTo %q is not %s", a.PayTo, o.req.PayTo)
	}
	if a.MaxTimeoutSeconds != o.req.MaxTimeoutSeconds {
		return reject(ReasonRequirements, "accepted maxTimeoutSeconds %d is not %d", a.MaxTimeoutSeconds, o.req.MaxTimeoutSeconds)
	}
	if a.Extra == nil || a.Extra.Name != o.req.Extra.Name || a.Extra.Version != o.req.Extra.Version {
		return reject(ReasonRequirements, "accepted extra does not name the token's EIP-712 domain %q version %q", o.req.Extra.Name, o.req.Extra.Version)
	}
	return nil
}
