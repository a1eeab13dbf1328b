package x402

import (
	"reflect"
	"testing"
	"time"
)

// FuzzDecodePaymentHeader feeds arbitrary header bytes to the decoder and
// to the local checks after it: neither may panic.
func FuzzDecodePaymentHeader(f *testing.F) {
	f.Add(specExampleHeader)
	f.Add("")
	f.Add("e30=")
	f.Add("eyJ4NDAyVmVyc2lvbiI6Mn0=")
	f.Add(encodeHeaderMust(f, map[string]any{"x402Version": 2, "accepted": map[string]any{"scheme": "exact"}, "payload": map[string]any{"signature": "0x", "authorization": map[string]any{"from": "0x0"}}}))
	cfg := testConfig()
	o, err := newOffer(&cfg, cfg.Routes[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, h string) {
		p, err := DecodePaymentHeader(h)
		if err != nil {
			return
		}
		_, _ = o.check(p, time.Unix(1_800_000_000, 0), time.Minute)
	})
}

func encodeHeaderMust(f *testing.F, v any) string {
	f.Helper()
	h, err := EncodeHeader(v)
	if err != nil {
		f.Fatal(err)
	}
	return h
}

// FuzzSignInProof feeds arbitrary SIGN-IN-WITH-X headers to the decoder
// and to the signature check after it (the address's and signature's
// parsing, the message's rebuilding): neither may panic, and none of them
// may pass as signed.
func FuzzSignInProof(f *testing.F) {
	f.Add(officialEVMHeader)
	f.Add(officialSolHeader)
	f.Add("")
	f.Add("e30=")
	var signed []*SignInProof
	for _, h := range []string{officialEVMHeader, officialSolHeader} {
		p, err := DecodeSignInHeader(h)
		if err != nil {
			f.Fatal(err)
		}
		signed = append(signed, p)
	}
	f.Fuzz(func(t *testing.T, h string) {
		p, err := DecodeSignInHeader(h)
		if err != nil {
			return
		}
		if addr, e := verifyProof(p); e == nil && !reflect.DeepEqual(p, signed[0]) && !reflect.DeepEqual(p, signed[1]) {
			t.Fatalf("an arbitrary proof passed as signed by %s: %+v", addr, p)
		}
	})
}
