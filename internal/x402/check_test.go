package x402

import (
	"encoding/hex"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	o := testOffer(t, "/v1/exec")
	payer := newWallet(t)
	other := newWallet(t)
	unix := testNow.Unix()
	otherAsset, _ := ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e")

	// Each case starts from a valid authorization and signs it over the
	// route's own domain unless it says otherwise.
	type kase struct {
		name   string
		edit   func(a *Authorization, acc *PaymentRequirements, d *Domain)
		signer *wallet
		// after edits the signature or the authorization once signed.
		after func(a *Authorization, sig *string)
		want  string // reason; "" means accepted
	}
	tests := []kase{
		{name: "good"},
		{name: "hex numbers", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) {
			a.Value = "0x4e20"
			a.ValidBefore = "0x" + strconv.FormatInt(unix+300, 16)
		}},
		{name: "accepted in other case and key order", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) {
			acc.PayTo = strings.ToLower(acc.PayTo)
			acc.Asset = strings.ToUpper(acc.Asset[2:])
			acc.Asset = "0x" + acc.Asset
			acc.Amount = "0x4e20"
		}},
		{name: "tampered nonce after signing", after: func(a *Authorization, _ *string) {
			last := "0"
			if strings.HasSuffix(a.Nonce, "0") { // a random nonce ends in 0 one time in 16
				last = "1"
			}
			a.Nonce = a.Nonce[:len(a.Nonce)-1] + last
		}, want: ReasonSignature},
		{name: "tampered signature", after: func(_ *Authorization, sig *string) {
			b := []byte(*sig)
			if b[10] == 'a' {
				b[10] = 'b'
			} else {
				b[10] = 'a'
			}
			*sig = string(b)
		}, want: ReasonSignature},
		{name: "wrong signer", signer: &other, want: ReasonSignature},
		{name: "expired", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) {
			a.ValidBefore = strconv.FormatInt(unix-1, 10)
		}, want: ReasonValidBefore},
		{name: "expires within the margin", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) {
			a.ValidBefore = strconv.FormatInt(unix+30, 10)
		}, want: ReasonValidBefore},
		{name: "not yet valid", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) {
			a.ValidAfter = strconv.FormatInt(unix+10, 10)
		}, want: ReasonValidAfter},
		{name: "valid after equals now", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) {
			a.ValidAfter = strconv.FormatInt(unix, 10)
		}, want: ReasonValidAfter},
		{name: "underpaid value", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) { a.Value = "10000" }, want: ReasonValue},
		{name: "overpaid value", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) { a.Value = "20001" }, want: ReasonValue},
		{name: "underpaid with edited accepted", edit: func(a *Authorization, acc *PaymentRequirements, _ *Domain) {
			a.Value, acc.Amount = "1", "1"
		}, want: ReasonRequirements},
		{name: "wrong recipient", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) { a.To = other.addr.String() }, want: ReasonRecipient},
		{name: "wrong recipient in accepted", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) { acc.PayTo = other.addr.String() }, want: ReasonRecipient},
		{name: "wrong network in accepted", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) { acc.Network = "eip155:84532" }, want: ReasonNetwork},
		{name: "signed for another chain", edit: func(_ *Authorization, _ *PaymentRequirements, d *Domain) { d.ChainID = big.NewInt(84532) }, want: ReasonSignature},
		{name: "wrong asset in accepted", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) { acc.Asset = otherAsset.String() }, want: ReasonRequirements},
		{name: "signed for another asset", edit: func(_ *Authorization, _ *PaymentRequirements, d *Domain) { d.VerifyingContract = otherAsset }, want: ReasonSignature},
		{name: "signed with another domain name", edit: func(_ *Authorization, _ *PaymentRequirements, d *Domain) { d.Name = "USDC" }, want: ReasonSignature},
		{name: "wrong scheme", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) { acc.Scheme = "upto" }, want: ReasonScheme},
		{name: "wrong timeout in accepted", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) { acc.MaxTimeoutSeconds = 60 }, want: ReasonRequirements},
		{name: "no extra in accepted", edit: func(_ *Authorization, acc *PaymentRequirements, _ *Domain) { acc.Extra = nil }, want: ReasonRequirements},
		{name: "high s", after: func(_ *Authorization, sig *string) {
			raw, _ := hex.DecodeString((*sig)[2:])
			*sig = highS(raw)
		}, want: ReasonSignature},
		{name: "bad v", after: func(_ *Authorization, sig *string) { *sig = (*sig)[:130] + "01" }, want: ReasonSignature},
		{name: "short nonce", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) { a.Nonce = "0x01" }, want: ReasonInvalidPayload},
		{name: "bad from", edit: func(a *Authorization, _ *PaymentRequirements, _ *Domain) { a.From = "me" }, want: ReasonInvalidPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := authFor(payer, o)
			acc := o.req
			extra := *o.req.Extra
			acc.Extra = &extra
			d := o.domain
			if tt.edit != nil {
				tt.edit(&a, &acc, &d)
			}
			w := payer
			if tt.signer != nil {
				w = *tt.signer
			}
			var sig string
			if strings.HasPrefix(a.From, "0x") && len(a.Nonce) == 66 {
				sig = signAuth(t, w, d, a)
			} else {
				sig = "0x" + strings.Repeat("00", 65)
			}
			if tt.after != nil {
				tt.after(&a, &sig)
			}
			p := payloadFor(t, o, a, sig)
			p.Accepted = acc
			got, rej := o.check(p, testNow, time.Minute)
			if tt.want == "" {
				if rej != nil {
					t.Fatalf("refused: %v", rej)
				}
				if got.payer != payer.addr.String() || got.payerKey != strings.ToLower(payer.addr.String()) || got.nonce != strings.ToLower(a.Nonce) {
					t.Fatalf("payer %s (key %s), nonce %s; want %s, %s", got.payer, got.payerKey, got.nonce, payer.addr, a.Nonce)
				}
				return
			}
			if rej == nil {
				t.Fatalf("accepted, want %s", tt.want)
			}
			if rej.Reason != tt.want {
				t.Fatalf("reason = %s (%s), want %s", rej.Reason, rej.Message, tt.want)
			}
		})
	}
}
