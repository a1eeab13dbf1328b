package x402

import (
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
)

// TestDigestMatchesViem checks the hand-written EIP-712 hashing against a
// vector made with viem's signTypedData (the library the official client
// signs with), using anvil's well-known first test key.
func TestDigestMatchesViem(t *testing.T) {
	asset, _ := ParseAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")
	d := Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(8453), VerifyingContract: asset}
	tr, err := ParseAuthorization(Authorization{
		From:        "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
		To:          "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
		Value:       "20000",
		ValidAfter:  "0",
		ValidBefore: "1740672154",
		Nonce:       "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480",
	})
	if err != nil {
		t.Fatal(err)
	}
	const wantDigest = "90ce5a3e642aa8b6a492751fe96ea1c55350d06d547b597f0d0ffdbe78b5259a"
	if got := hex.EncodeToString(tr.Digest(d)); got != wantDigest {
		t.Fatalf("digest = %s, want %s", got, wantDigest)
	}
	const sig = "0xf0d68b353cd58aa5527d511aa619510fe7b41fb5c47462c63ecabbb6a4d6dcbd43fd9a589ceb025a6d675eed32c2948f4515a2705043431d66262a0f918aef6c1b"
	signer, err := RecoverSigner(tr.Digest(d), sig)
	if err != nil {
		t.Fatal(err)
	}
	if signer != tr.From {
		t.Fatalf("recovered %s, want %s", signer, tr.From)
	}
}

func TestAddressChecksum(t *testing.T) {
	// Vectors of EIP-55 itself.
	for _, want := range []string{
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
		"0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
		"0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
		"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
	} {
		t.Run(want, func(t *testing.T) {
			a, err := ParseAddress(want)
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != want {
				t.Fatalf("checksum form = %s, want %s", a, want)
			}
		})
	}
	for _, bad := range []string{"", "0x12", "833589fCD6eDb6E08f4c7C32D4f71b54bdA0291300", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA0291Z"} {
		if _, err := ParseAddress(bad); err == nil {
			t.Errorf("ParseAddress(%q) accepted", bad)
		}
	}
}

func TestParseUint256(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means an error
	}{
		{"0", "0"},
		{"20000", "20000"},
		{"0x4e20", "20000"},
		{"0X4E20", "20000"},
		{"115792089237316195423570985008687907853269984665640564039457584007913129639935", "115792089237316195423570985008687907853269984665640564039457584007913129639935"},
		{"115792089237316195423570985008687907853269984665640564039457584007913129639936", ""},
		{"", ""},
		{"0x", ""},
		{"-1", ""},
		{"+1", ""},
		{" 1", ""},
		{"1e3", ""},
		{"0b101", ""},
		{"1_000", ""},
		{"0xg", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := ParseUint256(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("accepted, got %s", n)
				}
				return
			}
			if err != nil || n.String() != tt.want {
				t.Fatalf("got %v, %v; want %s", n, err, tt.want)
			}
		})
	}
}

func TestChainID(t *testing.T) {
	tests := map[string]int64{"eip155:8453": 8453, "eip155:84532": 84532, "eip155:0": -1, "base": -1, "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp": -1, "eip155:": -1, "eip155:-1": -1}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			id, err := ChainID(in)
			if want < 0 {
				if err == nil {
					t.Fatalf("accepted: %s", id)
				}
				return
			}
			if err != nil || id.Int64() != want {
				t.Fatalf("got %v, %v", id, err)
			}
		})
	}
}

func TestRecoverSignerRefusals(t *testing.T) {
	w := newWallet(t)
	digest := keccak256([]byte("message"))
	good := signDigest(w.key, digest)
	if a, err := RecoverSigner(digest, "0x"+hex.EncodeToString(good)); err != nil || a != w.addr {
		t.Fatalf("good signature: %v, %v", a, err)
	}

	mutate := func(f func(sig []byte)) string {
		s := append([]byte{}, good...)
		f(s)
		return "0x" + hex.EncodeToString(s)
	}
	tests := []struct {
		name string
		sig  string
		want error
	}{
		{"no 0x", hex.EncodeToString(good), ErrSignatureFormat},
		{"64 bytes", "0x" + hex.EncodeToString(good[:64]), ErrSignatureFormat},
		{"66 bytes", "0x" + hex.EncodeToString(append(append([]byte{}, good...), 0)), ErrSignatureFormat},
		{"v 0", mutate(func(s []byte) { s[64] -= 27 }), ErrSignatureV},
		{"v 29", mutate(func(s []byte) { s[64] = 29 }), ErrSignatureV},
		{"high s", highS(good), ErrSignatureHighS},
		{"s zero", mutate(func(s []byte) { clear(s[32:64]) }), ErrSignatureBad},
		{"r zero", mutate(func(s []byte) { clear(s[:32]) }), ErrSignatureBad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RecoverSigner(digest, tt.sig)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// highS returns the malleable twin of sig: s' = n - s with v flipped, which
// recovers to the same address and must still be refused.
func highS(sig []byte) string {
	n, _ := new(big.Int).SetString("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141", 16)
	s := new(big.Int).SetBytes(sig[32:64])
	out := append([]byte{}, sig...)
	new(big.Int).Sub(n, s).FillBytes(out[32:64])
	out[64] = 27 + 28 - sig[64]
	return "0x" + hex.EncodeToString(out)
}
