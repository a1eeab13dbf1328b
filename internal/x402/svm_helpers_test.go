package x402

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"testing"

	solana "github.com/gagliardetto/solana-go"
	computebudget "github.com/gagliardetto/solana-go/programs/compute-budget"
)

// The Solana tests build their transactions with solana-go, an encoder
// that shares nothing with svmtx.go's reader, the way the official client
// (@x402/svm's ExactSvmScheme) lays them out: compute limit, compute price,
// TransferChecked, Memo with a random nonce; fee payer the facilitator's,
// signed by the client only.

// svmWorld is the keys of one Solana payment.
type svmWorld struct {
	feePayer solana.PrivateKey // the facilitator's
	client   solana.PrivateKey // the payer
	payTo    solana.PublicKey
	mint     solana.PublicKey
}

func newSVMWorld(t testing.TB) svmWorld {
	t.Helper()
	key := func() solana.PrivateKey {
		k, err := solana.NewRandomPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return svmWorld{feePayer: key(), client: key(), payTo: key().PublicKey(), mint: solana.MustPublicKeyFromBase58(DefaultSolanaAsset)}
}

// config is testConfig with Solana offered to w.payTo.
func (w svmWorld) config() Config {
	c := testConfig()
	c.Solana.PayTo = w.payTo.String()
	return c
}

// offer is route's Solana offer with the facilitator's fee payer known.
func (w svmWorld) offer(t *testing.T, route string) *svmOffer {
	t.Helper()
	cfg := w.config()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	fee := &svmFeePayer{}
	fee.learn([]string{w.feePayer.PublicKey().String()})
	for _, r := range cfg.Routes {
		if r.Path == route {
			o, err := newSVMOffer(&cfg, r, fee)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
	}
	t.Fatalf("no route %s", route)
	return nil
}

// ata is owner's associated token account as solana-go derives it.
func ata(owner, mint, tokenProgram solana.PublicKey) solana.PublicKey {
	a, _, err := solana.FindProgramAddress([][]byte{owner[:], tokenProgram[:], mint[:]}, solana.SPLAssociatedTokenAccountProgramID)
	if err != nil {
		panic(err)
	}
	return a
}

// svmTxSpec is one payment transaction; the zero values of the knobs give
// the official client's transaction.
type svmTxSpec struct {
	amount       uint64
	decimals     uint8
	source       solana.PublicKey
	mint         solana.PublicKey
	destination  solana.PublicKey
	authority    solana.PublicKey
	tokenProgram solana.PublicKey
	feePayer     solana.PublicKey
	units        uint32
	microLamport uint64
	legacy       bool
	// instructions, when set, replace the list built from the fields:
	// it gets the default list and returns the one to send.
	instructions func(def []solana.Instruction) []solana.Instruction
	tables       map[solana.PublicKey]solana.PublicKeySlice
	// signers sign; nil means the client alone.
	signers []solana.PrivateKey
}

// spec is the official client's transaction paying o from w.client.
func (w svmWorld) spec(o *svmOffer) svmTxSpec {
	var amount uint64
	for _, c := range o.req.Amount {
		amount = amount*10 + uint64(c-'0')
	}
	prog := solana.TokenProgramID
	return svmTxSpec{
		amount: amount, decimals: 6,
		source:       ata(w.client.PublicKey(), w.mint, prog),
		mint:         w.mint,
		destination:  ata(w.payTo, w.mint, prog),
		authority:    w.client.PublicKey(),
		tokenProgram: prog,
		feePayer:     w.feePayer.PublicKey(),
		units:        20000, microLamport: 1,
	}
}

func memoIx(text string, accounts ...*solana.AccountMeta) solana.Instruction {
	return solana.NewInstruction(solana.MemoProgramID, accounts, []byte(text))
}

func randomMemo() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// transferChecked is the instruction under s's token program. It is
// written out here: solana-go's token package drags in its RPC client.
func transferChecked(s svmTxSpec) solana.Instruction {
	data := make([]byte, 10)
	data[0] = 12
	binary.LittleEndian.PutUint64(data[1:], s.amount)
	data[9] = s.decimals
	return solana.NewInstruction(s.tokenProgram, solana.AccountMetaSlice{
		solana.Meta(s.source).WRITE(),
		solana.Meta(s.mint),
		solana.Meta(s.destination).WRITE(),
		solana.Meta(s.authority).SIGNER(),
	}, data)
}

// build returns the wire transaction of s, signed by its signers.
func (w svmWorld) build(t testing.TB, s svmTxSpec) []byte {
	t.Helper()
	ixs := []solana.Instruction{
		computebudget.NewSetComputeUnitLimitInstruction(s.units).Build(),
		computebudget.NewSetComputeUnitPriceInstruction(s.microLamport).Build(),
		transferChecked(s),
		memoIx(randomMemo()),
	}
	if s.instructions != nil {
		ixs = s.instructions(ixs)
	}
	var bh solana.Hash
	_, _ = rand.Read(bh[:])
	opts := []solana.TransactionOption{solana.TransactionPayer(s.feePayer)}
	if s.tables != nil {
		opts = append(opts, solana.TransactionAddressTables(s.tables))
	}
	tx, err := solana.NewTransaction(ixs, bh, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !s.legacy && s.tables == nil {
		tx.Message.SetVersion(solana.MessageVersionV0)
	}
	signers := s.signers
	if signers == nil {
		signers = []solana.PrivateKey{w.client}
	}
	if _, err := tx.PartialSign(func(k solana.PublicKey) *solana.PrivateKey {
		for i := range signers {
			if signers[i].PublicKey() == k {
				return &signers[i]
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// svmPayload is the PaymentPayload the official client sends for raw.
func svmPayload(t *testing.T, o *svmOffer, raw []byte) *PaymentPayload {
	t.Helper()
	req, ok := o.requirements()
	if !ok {
		t.Fatal("no fee payer")
	}
	inner, err := json.Marshal(ExactSVMPayload{Transaction: base64.StdEncoding.EncodeToString(raw)})
	if err != nil {
		t.Fatal(err)
	}
	return &PaymentPayload{X402Version: Version, Accepted: req, Payload: inner}
}

// computePrice is SetComputeUnitPrice's data, for hand-made variants.
func computePrice(microLamports uint64) []byte {
	d := make([]byte, 9)
	d[0] = 3
	binary.LittleEndian.PutUint64(d[1:], microLamports)
	return d
}
