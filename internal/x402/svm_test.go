package x402

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	solana "github.com/gagliardetto/solana-go"
)

// TestSVMCheck tries each local rule of a Solana payment with a
// transaction that breaks it, and the official client's layouts that pass.
func TestSVMCheck(t *testing.T) {
	w := newSVMWorld(t)
	o := w.offer(t, "/v1/exec") // 20000 atomic units
	stranger, _ := solana.NewRandomPrivateKey()
	lighthouse := solana.MustPublicKeyFromBase58("L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95")
	fp := w.feePayer.PublicKey()

	tests := []struct {
		name string
		edit func(s *svmTxSpec)
		raw  func(raw []byte) []byte      // edits the signed bytes
		acc  func(a *PaymentRequirements) // edits the accepted echo
		pay  func(p *PaymentPayload)      // edits the payload
		want string                       // "" accepts
	}{
		{name: "official client layout (v0)"},
		{name: "legacy message", edit: func(s *svmTxSpec) { s.legacy = true }},
		{name: "Token-2022 to payTo's Token-2022 account", edit: func(s *svmTxSpec) {
			s.tokenProgram = solana.Token2022ProgramID
			s.source = ata(w.client.PublicKey(), w.mint, solana.Token2022ProgramID)
			s.destination = ata(w.payTo, w.mint, solana.Token2022ProgramID)
		}},
		{name: "wallet-injected Lighthouse x2 then Memo (6 instructions)", edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				l := solana.NewInstruction(lighthouse, nil, []byte{1, 2, 3})
				return append(d[:3:3], l, l, d[3])
			}
		}},
		{name: "no memo (3 instructions)", edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction { return d[:3] }
		}},
		{name: "compute price at the bound", edit: func(s *svmTxSpec) { s.microLamport = maxComputeUnitPrice }},
		{name: "compute limit at boxer's bound", edit: func(s *svmTxSpec) { s.units = maxComputeUnitLimit }},
		{name: "compute limit over boxer's bound", want: ReasonSVMComputeLimit, edit: func(s *svmTxSpec) { s.units = maxComputeUnitLimit + 1 }},
		{name: "limit x price over boxer's priority fee bound", want: ReasonSVMPriceTooHigh, edit: func(s *svmTxSpec) {
			s.units, s.microLamport = maxComputeUnitLimit, maxPriorityFee/maxComputeUnitLimit+1
		}},
		{name: "a third signer (the fee payer pays for each signature)", want: ReasonSVMSignature, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				return append(d, memoIx("x", solana.Meta(stranger.PublicKey()).SIGNER()))
			}
			s.signers = []solana.PrivateKey{w.client, stranger}
		}},

		// Layout.
		{name: "two instructions", want: ReasonSVMLayout, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction { return d[1:3] }
		}},
		{name: "seven instructions", want: ReasonSVMLayout, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				return append(d, memoIx("a"), memoIx("b"), memoIx("c"))
			}
		}},
		{name: "compute limit and price swapped", want: ReasonSVMComputeLimit, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				return append([]solana.Instruction{d[1], d[0]}, d[2:]...)
			}
		}},
		{name: "second instruction is not the price", want: ReasonSVMComputePrice, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				return append([]solana.Instruction{d[0], d[0]}, d[2:]...)
			}
		}},
		{name: "compute price over 5 lamports per unit", want: ReasonSVMPriceTooHigh, edit: func(s *svmTxSpec) { s.microLamport = maxComputeUnitPrice + 1 }},
		{name: "compute price with an account", want: ReasonSVMComputePrice, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				d[1] = solana.NewInstruction(solana.ComputeBudget, solana.AccountMetaSlice{solana.Meta(stranger.PublicKey())}, computePrice(1))
				return d
			}
		}},
		{name: "transfer by the system program", want: ReasonSVMNoTransfer, edit: func(s *svmTxSpec) { s.tokenProgram = solana.SystemProgramID }},
		{name: "Transfer (unchecked) instead of TransferChecked", want: ReasonSVMNoTransfer, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				data, _ := d[2].Data()
				data = append([]byte{3}, data[1:9]...)
				d[2] = solana.NewInstruction(solana.TokenProgramID, d[2].Accounts(), data)
				return d
			}
		}},
		{name: "unknown program after the transfer", want: ReasonSVMOptional, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				return append(d, solana.NewInstruction(solana.SystemProgramID, nil, []byte{2, 0, 0, 0}))
			}
		}},

		// Transfer intent.
		{name: "underpaid by one unit", want: ReasonSVMAmount, edit: func(s *svmTxSpec) { s.amount-- }},
		{name: "overpaid by one unit", want: ReasonSVMAmount, edit: func(s *svmTxSpec) { s.amount++ }},
		{name: "another mint", want: ReasonSVMMint, edit: func(s *svmTxSpec) {
			s.mint = stranger.PublicKey()
			s.destination = ata(w.payTo, s.mint, solana.TokenProgramID)
		}},
		{name: "decimals not the mint's", want: ReasonSVMMint, edit: func(s *svmTxSpec) { s.decimals = 9 }},
		{name: "to payTo's wallet, not its token account", want: ReasonSVMRecipient, edit: func(s *svmTxSpec) { s.destination = w.payTo }},
		{name: "to someone else's token account", want: ReasonSVMRecipient, edit: func(s *svmTxSpec) {
			s.destination = ata(stranger.PublicKey(), w.mint, solana.TokenProgramID)
		}},
		{name: "Token program with the Token-2022 account", want: ReasonSVMRecipient, edit: func(s *svmTxSpec) {
			s.destination = ata(w.payTo, w.mint, solana.Token2022ProgramID)
		}},

		// Fee payer isolation.
		{name: "fee payer is the transfer's authority", want: ReasonSVMFeePayerUsed, edit: func(s *svmTxSpec) {
			s.authority = fp
			s.source = ata(fp, w.mint, solana.TokenProgramID)
			s.signers = []solana.PrivateKey{}
		}},
		{name: "fee payer among a memo's accounts", want: ReasonSVMFeePayerUsed, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				return append(d, memoIx("x", solana.Meta(fp)))
			}
		}},
		{name: "fee payer's token account is the source (client as delegate)", want: ReasonSVMFeePayerUsed, edit: func(s *svmTxSpec) {
			s.source = ata(fp, w.mint, solana.TokenProgramID)
		}},
		{name: "transaction's fee payer is the client", want: ReasonSVMFeePayer, edit: func(s *svmTxSpec) { s.feePayer = w.client.PublicKey() }},

		// Signatures.
		{name: "tampered after signing (amount byte)", want: ReasonSVMSignature, raw: func(raw []byte) []byte {
			// The amount 20000 = 0x4e20 is little-endian 20 4e in the
			// transfer's data; make it 20 4f.
			i := strings.Index(string(raw), "\x0c\x20\x4e\x00\x00\x00\x00\x00\x00\x06")
			if i < 0 {
				panic("no transfer data")
			}
			raw[i+2]++
			return raw
		}},
		{name: "client did not sign", want: ReasonSVMSignature, edit: func(s *svmTxSpec) { s.signers = []solana.PrivateKey{} }},
		{name: "signed by another key", want: ReasonSVMSignature, raw: func(raw []byte) []byte {
			// The client's slot is signature 1; put a stranger's there.
			sig, _ := stranger.Sign(raw[1+2*64:])
			copy(raw[1+64:], sig[:])
			return raw
		}},
		{name: "authority does not sign", want: ReasonSVMSignature, edit: func(s *svmTxSpec) {
			s.instructions = func(d []solana.Instruction) []solana.Instruction {
				data, _ := d[2].Data()
				acc := d[2].Accounts()
				acc[3] = solana.Meta(acc[3].PublicKey)
				d[2] = solana.NewInstruction(d[2].ProgramID(), acc, data)
				return d
			}
			s.signers = []solana.PrivateKey{}
		}},

		// Encoding.
		{name: "address lookup table", want: ReasonSVMLookups, edit: func(s *svmTxSpec) {
			s.tables = map[solana.PublicKey]solana.PublicKeySlice{stranger.PublicKey(): {s.destination}}
		}},
		{name: "bytes after the message", want: ReasonSVMTransaction, raw: func(raw []byte) []byte { return append(raw, 0) }},
		{name: "truncated", want: ReasonSVMTransaction, raw: func(raw []byte) []byte { return raw[:len(raw)-1] }},
		{name: "longer than Solana takes", want: ReasonSVMTransaction, raw: func(raw []byte) []byte {
			return append(raw, make([]byte, MaxSolanaTransactionSize)...)
		}},
		{name: "not base64", want: ReasonSVMTransaction, pay: func(p *PaymentPayload) { p.Payload = json.RawMessage(`{"transaction":"*not base64*"}`) }},
		{name: "no transaction", want: ReasonInvalidPayload, pay: func(p *PaymentPayload) { p.Payload = json.RawMessage(`{"signature":"0x00"}`) }},

		// The echo.
		{name: "echo with a lower amount", want: ReasonRequirements, acc: func(a *PaymentRequirements) { a.Amount = "1" }},
		{name: "echo with another payTo", want: ReasonSVMRecipient, acc: func(a *PaymentRequirements) { a.PayTo = stranger.PublicKey().String() }},
		{name: "echo with another asset", want: ReasonRequirements, acc: func(a *PaymentRequirements) { a.Asset = stranger.PublicKey().String() }},
		{name: "echo with another fee payer", want: ReasonSVMFeePayer, acc: func(a *PaymentRequirements) {
			a.Extra = &AssetExtra{FeePayer: stranger.PublicKey().String()}
		}},
		{name: "echo without extra", want: ReasonSVMFeePayer, acc: func(a *PaymentRequirements) { a.Extra = nil }},
		{name: "echo with another scheme", want: ReasonScheme, acc: func(a *PaymentRequirements) { a.Scheme = "upto" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := w.spec(o)
			if tt.edit != nil {
				tt.edit(&s)
			}
			raw := w.build(t, s)
			if tt.raw != nil {
				raw = tt.raw(raw)
			}
			p := svmPayload(t, o, raw)
			if tt.acc != nil {
				tt.acc(&p.Accepted)
			}
			if tt.pay != nil {
				tt.pay(p)
			}
			got, rej := o.check(p)
			if tt.want == "" {
				if rej != nil {
					t.Fatalf("refused: %v", rej)
				}
				tx, err := solana.TransactionFromBytes(raw)
				if err != nil {
					t.Fatal(err)
				}
				msg, _ := tx.Message.MarshalBinary()
				h := sha256.Sum256(msg)
				if got.payer != w.client.PublicKey().String() || got.payerKey != got.payer || got.nonce != "sha256:"+hex.EncodeToString(h[:]) {
					t.Fatalf("payer %s key %s nonce %s; want %s and the message's hash", got.payer, got.payerKey, got.nonce, w.client.PublicKey())
				}
				if got.req.Network != DefaultSolanaNetwork || got.req.Extra.FeePayer != fp.String() || got.req.Amount != "20000" {
					t.Fatalf("requirements for the facilitator: %+v", got.req)
				}
				return
			}
			if rej == nil {
				t.Fatalf("accepted, want %s", tt.want)
			}
			if rej.Reason != tt.want {
				t.Fatalf("reason %s (%s), want %s", rej.Reason, rej.Message, tt.want)
			}
		})
	}
}

// TestSVMCheckBeforeFeePayer: until the facilitator names its fee payer,
// Solana is not offered, and a Solana payment is refused.
func TestSVMCheckBeforeFeePayer(t *testing.T) {
	w := newSVMWorld(t)
	o := w.offer(t, "/v1/exec")
	p := svmPayload(t, o, w.build(t, w.spec(o)))
	o.fee = &svmFeePayer{}
	if _, rej := o.check(p); rej == nil || rej.Reason != ReasonSVMNetwork {
		t.Fatalf("got %v, want %s", rej, ReasonSVMNetwork)
	}
	if _, ok := o.requirements(); ok {
		t.Fatal("Solana offered without a fee payer")
	}
}

// TestSVMReplayKey: the same transaction is the same payment whatever is in
// the fee payer's signature slot; two payments of the official client's
// shape differ by their memo.
func TestSVMReplayKey(t *testing.T) {
	w := newSVMWorld(t)
	o := w.offer(t, "/v1/exec")
	raw := w.build(t, w.spec(o))
	a, rej := o.check(svmPayload(t, o, raw))
	if rej != nil {
		t.Fatal(rej)
	}
	filled := append([]byte{}, raw...)
	sig, _ := w.feePayer.Sign(raw[1+2*64:])
	copy(filled[1:], sig[:])
	b, rej := o.check(svmPayload(t, o, filled))
	if rej != nil {
		t.Fatal(rej)
	}
	c, rej := o.check(svmPayload(t, o, w.build(t, w.spec(o))))
	if rej != nil {
		t.Fatal(rej)
	}
	if a.nonce != b.nonce || a.nonce == c.nonce {
		t.Fatalf("nonces %s %s %s: want the first two equal, the third different", a.nonce, b.nonce, c.nonce)
	}
}

// TestSVMPayloadLimit: a transaction string far over Solana's size is
// refused before it is decoded.
func TestSVMPayloadLimit(t *testing.T) {
	w := newSVMWorld(t)
	o := w.offer(t, "/v1/exec")
	p := svmPayload(t, o, w.build(t, w.spec(o)))
	big, _ := json.Marshal(ExactSVMPayload{Transaction: base64.StdEncoding.EncodeToString(make([]byte, 1<<16))})
	p.Payload = big
	if _, rej := o.check(p); rej == nil || rej.Reason != ReasonSVMTransaction || !strings.Contains(rej.Message, "longer") {
		t.Fatalf("got %v", rej)
	}
}
