package x402

import (
	"bytes"
	"testing"

	solana "github.com/gagliardetto/solana-go"
)

func TestCompactU16(t *testing.T) {
	tests := []struct {
		in   []byte
		want int
		bad  bool
	}{
		{in: []byte{0x00}, want: 0},
		{in: []byte{0x7f}, want: 127},
		{in: []byte{0x80, 0x01}, want: 128},
		{in: []byte{0xff, 0x7f}, want: 16383},
		{in: []byte{0x80, 0x80, 0x01}, want: 16384},
		{in: []byte{0xff, 0xff, 0x03}, want: 65535},
		{in: []byte{0x80, 0x00}, bad: true},             // alias of 0
		{in: []byte{0xff, 0x80, 0x00}, bad: true},       // alias of 127
		{in: []byte{0xff, 0xff, 0x04}, bad: true},       // 65536+
		{in: []byte{0x80, 0x80, 0x80, 0x01}, bad: true}, // 4 bytes
		{in: []byte{0x80}, bad: true},                   // truncated
		{in: nil, bad: true},
	}
	for _, tt := range tests {
		r := &txReader{b: tt.in}
		got := r.compactU16()
		if tt.bad {
			if r.err == nil {
				t.Errorf("% x: got %d, want an error", tt.in, got)
			}
			continue
		}
		if r.err != nil || got != tt.want || r.off != len(tt.in) {
			t.Errorf("% x: got %d (err %v, read %d), want %d", tt.in, got, r.err, r.off, tt.want)
		}
	}
}

// TestParseSolanaTxAgreesWithSolanaGo decodes transactions that solana-go
// encoded and compares every field with solana-go's own decoding.
func TestParseSolanaTxAgreesWithSolanaGo(t *testing.T) {
	w := newSVMWorld(t)
	o := w.offer(t, "/v1/exec")
	for _, legacy := range []bool{false, true} {
		s := w.spec(o)
		s.legacy = legacy
		raw := w.build(t, s)
		got, err := parseSolanaTx(raw)
		if err != nil {
			t.Fatalf("legacy=%v: %v", legacy, err)
		}
		want, err := solana.TransactionFromBytes(raw)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := want.Message.MarshalBinary()
		if !bytes.Equal(got.Message, msg) || got.Versioned == legacy {
			t.Fatalf("legacy=%v: message or version differs", legacy)
		}
		h := want.Message.Header
		if got.NumRequiredSignatures != int(h.NumRequiredSignatures) || got.NumReadonlySigned != int(h.NumReadonlySignedAccounts) ||
			got.NumReadonlyUnsigned != int(h.NumReadonlyUnsignedAccounts) {
			t.Fatalf("header %+v, solana-go %+v", got, h)
		}
		if len(got.Accounts) != len(want.Message.AccountKeys) || len(got.Signatures) != len(want.Signatures) {
			t.Fatal("account or signature count differs")
		}
		for i, k := range want.Message.AccountKeys {
			if got.Accounts[i] != PublicKey(k) {
				t.Fatalf("account %d: %s, solana-go %s", i, got.Accounts[i], k)
			}
		}
		for i, s := range want.Signatures {
			if got.Signatures[i] != [64]byte(s) {
				t.Fatalf("signature %d differs", i)
			}
		}
		if got.Blockhash != [32]byte(want.Message.RecentBlockhash) {
			t.Fatal("blockhash differs")
		}
		if len(got.Instructions) != len(want.Message.Instructions) {
			t.Fatal("instruction count differs")
		}
		for i, ci := range want.Message.Instructions {
			prog, _ := want.ResolveProgramIDIndex(ci.ProgramIDIndex)
			gi := got.Instructions[i]
			if gi.Program != PublicKey(prog) || !bytes.Equal(gi.Data, ci.Data) || len(gi.Accounts) != len(ci.Accounts) {
				t.Fatalf("instruction %d differs", i)
			}
			for j, a := range ci.Accounts {
				if gi.AccountIndexes[j] != int(a) || gi.Accounts[j] != PublicKey(want.Message.AccountKeys[a]) {
					t.Fatalf("instruction %d account %d differs", i, j)
				}
			}
		}
	}
}

func TestParseSolanaTxRefuses(t *testing.T) {
	w := newSVMWorld(t)
	o := w.offer(t, "/v1/exec")
	good := w.build(t, w.spec(o))
	msg := 1 + 2*64 // offset of the v0 message: one length byte, two signatures
	tests := []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"no signatures for two signers", func(b []byte) []byte { return append([]byte{0}, b[msg:]...) }},
		{"three signatures for two signers", func(b []byte) []byte {
			return append(append([]byte{3}, b[1:msg]...), append(make([]byte, 64), b[msg:]...)...)
		}},
		{"version 1", func(b []byte) []byte { b[msg] = 0x81; return b }},
		{"no signer in the header", func(b []byte) []byte { b[msg+1] = 0; return b }},
		{"fee payer read-only", func(b []byte) []byte { b[msg+2] = 2; return b }},
		{"all accounts read-only", func(b []byte) []byte { b[msg+3] = 200; return b }},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-3] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.edit(append([]byte{}, good...))
			if tx, err := parseSolanaTx(b); err == nil {
				t.Fatalf("parsed: %+v", tx)
			}
		})
	}
}

// TestAssociatedTokenAccount: the derivation agrees with solana-go's for
// both token programs.
func TestAssociatedTokenAccount(t *testing.T) {
	for i := 0; i < 20; i++ {
		k, _ := solana.NewRandomPrivateKey()
		owner := k.PublicKey()
		mint := solana.MustPublicKeyFromBase58(DefaultSolanaAsset)
		want, _, err := solana.FindAssociatedTokenAddress(owner, mint)
		if err != nil {
			t.Fatal(err)
		}
		got, err := associatedTokenAccount(PublicKey(owner), PublicKey(mint), programToken)
		if err != nil || got != PublicKey(want) {
			t.Fatalf("owner %s: %s, solana-go %s (%v)", owner, got, want, err)
		}
		want22 := ata(owner, mint, solana.Token2022ProgramID)
		got22, err := associatedTokenAccount(PublicKey(owner), PublicKey(mint), programToken2022)
		if err != nil || got22 != PublicKey(want22) {
			t.Fatalf("owner %s (Token-2022): %s, solana-go %s (%v)", owner, got22, want22, err)
		}
	}
}

func TestParsePublicKey(t *testing.T) {
	for _, s := range []string{"", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4w", "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1vv", "1111", "l1111111111111111111111111111111"} {
		if k, err := ParsePublicKey(s); err == nil {
			t.Errorf("%q parsed as %s", s, k)
		}
	}
	k, err := ParsePublicKey(DefaultSolanaAsset)
	if err != nil || k.String() != DefaultSolanaAsset {
		t.Fatalf("%s: %v %v", DefaultSolanaAsset, k, err)
	}
}

func FuzzParseSolanaTx(f *testing.F) {
	w := newSVMWorld(f)
	cfg := w.config()
	fee := &svmFeePayer{key: w.feePayer.PublicKey().String()}
	o, err := newSVMOffer(&cfg, cfg.Routes[0], fee)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{})
	for _, legacy := range []bool{false, true} {
		s := w.spec(o)
		s.legacy = legacy
		f.Add(w.build(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tx, err := parseSolanaTx(b)
		if err != nil {
			return
		}
		if len(tx.Signatures) != tx.NumRequiredSignatures || len(tx.Accounts) < tx.NumRequiredSignatures {
			t.Fatalf("inconsistent: %+v", tx)
		}
		for _, ix := range tx.Instructions {
			if len(ix.Accounts) != len(ix.AccountIndexes) {
				t.Fatal("accounts and indexes differ")
			}
		}
		// A parsed transaction never crashes the checks either.
		_, _ = o.checkLayout(tx, tx.Accounts[0])
	})
}
