package x402

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

// FuzzSVMCheck feeds arbitrary wire transactions, seeded with the
// official client's layout (v0 and legacy), to the Solana reader and the
// offer's local checks: neither may panic, and an accepted one must have a
// payer and a sha256 nonce.
func FuzzSVMCheck(f *testing.F) {
	w := newSVMWorld(f)
	cfg := w.config()
	if err := cfg.Validate(); err != nil {
		f.Fatal(err)
	}
	fee := &svmFeePayer{}
	fee.learn([]string{w.feePayer.PublicKey().String()})
	o, err := newSVMOffer(&cfg, cfg.Routes[0], fee)
	if err != nil {
		f.Fatal(err)
	}
	s := w.spec(o)
	f.Add(w.build(f, s))
	s.legacy = true
	f.Add(w.build(f, s))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{0xff, 0xff, 0x03})
	req, _ := o.requirements()
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = parseSolanaTx(raw)
		inner, _ := json.Marshal(ExactSVMPayload{Transaction: base64.StdEncoding.EncodeToString(raw)})
		c, rej := o.check(&PaymentPayload{X402Version: Version, Accepted: req, Payload: inner})
		if rej == nil && (c.payer == "" || len(c.nonce) != len("sha256:")+64) {
			t.Fatalf("accepted with payer %q nonce %q", c.payer, c.nonce)
		}
	})
}
