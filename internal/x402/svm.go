package x402

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Solana (scheme "exact" on SVM) is offered beside the EVM payment when
// Config.Solana.PayTo is set: a second entry in each 402's accepts. The
// client sends a partially signed transaction (its own signature, the fee
// payer's slot empty) that moves exactly the price of a token to the
// associated token account of payTo; the facilitator co-signs as fee payer
// and submits it. The fee payer is the facilitator's, learned from its
// GET /supported (extra.feePayer), so the SVM entry is offered once the
// facilitator has answered.
//
// The local checks are the rules of the specification's
// schemes/exact/scheme_exact_svm.md that can be checked without a Solana
// node: instruction layout, compute budget bounds, the transfer's program,
// mint, destination, amount and decimals, the fee payer's isolation, and the
// client's signatures. What needs the chain (that the source account exists
// and holds the amount, that the blockhash is recent) is the facilitator's
// simulation in /verify; an expired blockhash is refused there.

// Solana defaults: USDC on Solana mainnet.
const (
	DefaultSolanaNetwork       = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
	DefaultSolanaAsset         = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
	DefaultSolanaAssetDecimals = 6
)

// Programs the exact scheme on SVM names.
var (
	programComputeBudget = mustKey("ComputeBudget111111111111111111111111111111")
	programToken         = mustKey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
	programToken2022     = mustKey("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")
	programATA           = mustKey("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")
	programMemo          = mustKey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr")
	programLighthouse    = mustKey("L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95")
)

// maxComputeUnitPrice bounds the priority fee the fee payer is made to pay:
// 5 lamports per compute unit, in micro-lamports, as the specification's
// reference implementation does.
const maxComputeUnitPrice = 5_000_000

// The spec lets a resource server be stricter than its bounds, and boxer
// is, for the fee payer's sake: at the price cap a 1.4M-unit limit and six
// more signers would make it pay about 0.007 SOL for a $0.02 payment.
const (
	// maxComputeUnitLimit is ten times what the official client asks
	// (20,000 units); a TransferChecked uses about 6,000.
	maxComputeUnitLimit = 200_000
	// maxPriorityFee bounds limit x price, in micro-lamports: 100,000
	// lamports (0.0001 SOL), what the official client's 20,000 units cost
	// at the price cap. By default it pays 0.02 lamports.
	maxPriorityFee = 100_000 * 1_000_000
	// maxSigners: the fee payer and the transfer's authority.
	maxSigners = 2
)

// Instruction discriminators.
const (
	ixSetComputeUnitLimit = 2  // ComputeBudget: u8 2, u32 units
	ixSetComputeUnitPrice = 3  // ComputeBudget: u8 3, u64 micro-lamports
	ixTransferChecked     = 12 // Token: u8 12, u64 amount, u8 decimals
)

// Reasons for a refused SVM payment, in the official facilitator's
// spelling where it has one.
const (
	ReasonSVMNetwork      = "invalid_exact_svm_network_mismatch"
	ReasonSVMFeePayer     = "invalid_exact_svm_fee_payer_mismatch"
	ReasonSVMTransaction  = "invalid_exact_svm_payload_transaction_could_not_be_decoded"
	ReasonSVMSignature    = "invalid_exact_svm_payload_signature_invalid"
	ReasonSVMLayout       = "invalid_exact_svm_payload_transaction_instructions_length"
	ReasonSVMComputeLimit = "invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction"
	ReasonSVMComputePrice = "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction"
	ReasonSVMPriceTooHigh = "invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high"
	ReasonSVMNoTransfer   = "invalid_exact_svm_payload_no_transfer_instruction"
	ReasonSVMMint         = "invalid_exact_svm_payload_mint_mismatch"
	ReasonSVMRecipient    = "invalid_exact_svm_payload_recipient_mismatch"
	ReasonSVMAmount       = "invalid_exact_svm_payload_amount_mismatch"
	ReasonSVMFeePayerUsed = "invalid_exact_svm_payload_transaction_fee_payer_transferring_funds"
	ReasonSVMOptional     = "invalid_exact_svm_payload_unknown_optional_instruction"
	ReasonSVMLookups      = "invalid_exact_svm_payload_address_lookup_tables"
)

// SolanaConfig is the Solana part of Config. With PayTo empty, Solana is
// not offered and nothing else here is checked.
type SolanaConfig struct {
	// PayTo is the wallet that receives payments; its associated token
	// account for Asset must exist. --x402-solana-pay-to (BOXER_X402_SOLANA_PAY_TO)
	PayTo string
	// Network is the CAIP-2 id, solana:<genesis hash prefix>.
	// --x402-solana-network (BOXER_X402_SOLANA_NETWORK)
	Network string
	// Asset is the token's mint. --x402-solana-asset (BOXER_X402_SOLANA_ASSET)
	Asset string
	// AssetDecimals converts USD prices to atomic units and must equal the
	// mint's decimals, which the transfer states.
	// --x402-solana-asset-decimals (BOXER_X402_SOLANA_ASSET_DECIMALS)
	AssetDecimals int
}

// DefaultSolanaConfig is USDC on Solana mainnet, not offered (no PayTo).
func DefaultSolanaConfig() SolanaConfig {
	return SolanaConfig{Network: DefaultSolanaNetwork, Asset: DefaultSolanaAsset, AssetDecimals: DefaultSolanaAssetDecimals}
}

// Enabled reports whether Solana is offered.
func (c *SolanaConfig) Enabled() bool { return c.PayTo != "" }

// validate returns one error per problem, naming the flag.
func (c *SolanaConfig) validate() []error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("payments: "+format, args...)) }
	if _, err := ParsePublicKey(c.PayTo); err != nil {
		bad("solana pay-to: %v (--x402-solana-pay-to)", err)
	}
	if err := validSolanaNetwork(c.Network); err != nil {
		bad("%v (--x402-solana-network)", err)
	}
	if _, err := ParsePublicKey(c.Asset); err != nil {
		bad("solana asset: %v (--x402-solana-asset)", err)
	}
	if c.AssetDecimals < 0 || c.AssetDecimals > 19 {
		bad("solana asset decimals %d out of range (--x402-solana-asset-decimals)", c.AssetDecimals)
	}
	return errs
}

// validSolanaNetwork accepts solana:<reference>, the reference being the
// base58 genesis hash cut to at most 32 characters, as CAIP-30 has it.
func validSolanaNetwork(n string) error {
	ref, ok := strings.CutPrefix(n, "solana:")
	if !ok || ref == "" || len(ref) > 32 {
		return fmt.Errorf("network %q is not a CAIP-2 Solana id (solana:<genesis hash>)", n)
	}
	for _, r := range ref {
		if !strings.ContainsRune("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", r) {
			return fmt.Errorf("network %q is not a CAIP-2 Solana id (its reference is not base58)", n)
		}
	}
	return nil
}

// svmFeePayer is the facilitator's fee payer for the Solana network, as its
// GET /supported last named it; "" until it has answered. All offers share
// one.
type svmFeePayer struct {
	mu  sync.Mutex
	key string
}

func (f *svmFeePayer) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.key
}

// learn records the fee payers a /supported answer names for network. The
// one offered stays while the answer still names it, so that a challenge
// a client is paying stays valid across checks.
func (f *svmFeePayer) learn(named []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range named {
		if k == f.key {
			return
		}
	}
	f.key = ""
	if len(named) > 0 {
		f.key = named[0]
	}
}

// svmOffer is the Solana entry of one route's offer.
type svmOffer struct {
	req      PaymentRequirements // Extra.FeePayer is filled per challenge
	payTo    PublicKey
	mint     PublicKey
	decimals int
	// dest is payTo's associated token account for mint, under each token
	// program the transfer may name.
	dest map[PublicKey]PublicKey
	fee  *svmFeePayer
}

// newSVMOffer builds the Solana entry of route r. cfg must have passed
// Validate with Solana enabled.
func newSVMOffer(cfg *Config, r Route, fee *svmFeePayer) (*svmOffer, error) {
	c := &cfg.Solana
	amount, err := AtomicAmount(r.Price, c.AssetDecimals)
	if err != nil {
		return nil, fmt.Errorf("route %s: solana: %w", r.Path, err)
	}
	if amount.BitLen() > 64 {
		return nil, fmt.Errorf("route %s: solana: price is more than a u64 of atomic units", r.Path)
	}
	payTo, err := ParsePublicKey(c.PayTo)
	if err != nil {
		return nil, err
	}
	mint, err := ParsePublicKey(c.Asset)
	if err != nil {
		return nil, err
	}
	o := &svmOffer{
		req: PaymentRequirements{
			Scheme:            SchemeExact,
			Network:           c.Network,
			Amount:            amount.String(),
			Asset:             mint.String(),
			PayTo:             payTo.String(),
			MaxTimeoutSeconds: min(cfg.MaxTimeoutSeconds, svmMaxTimeoutSeconds),
		},
		payTo: payTo, mint: mint, decimals: c.AssetDecimals,
		dest: map[PublicKey]PublicKey{},
		fee:  fee,
	}
	for _, prog := range []PublicKey{programToken, programToken2022} {
		a, err := associatedTokenAccount(payTo, mint, prog)
		if err != nil {
			return nil, err
		}
		o.dest[prog] = a
	}
	return o, nil
}

// requirements are the offer with the current fee payer; ok is false while
// the facilitator has not named one (Solana is then not offered).
func (o *svmOffer) requirements() (PaymentRequirements, bool) {
	fp := o.fee.get()
	if fp == "" {
		return PaymentRequirements{}, false
	}
	req := o.req
	req.Extra = &AssetExtra{FeePayer: fp}
	return req, true
}

// ExactSVMPayload is PaymentPayload.Payload for the exact scheme on SVM.
type ExactSVMPayload struct {
	// Transaction is the partially signed transaction, standard base64.
	Transaction string `json:"transaction"`
}

// check runs the local checks of a Solana payment against this offer, in
// the order of the specification's verification rules.
func (o *svmOffer) check(p *PaymentPayload) (*checkedPayment, *Rejection) {
	req, ok := o.requirements()
	if !ok {
		return nil, reject(ReasonSVMNetwork, "network %q is not offered until the facilitator names its fee payer", p.Accepted.Network)
	}
	if rej := o.matchAccepted(&p.Accepted, req); rej != nil {
		return nil, rej
	}
	var sp ExactSVMPayload
	if err := json.Unmarshal(p.Payload, &sp); err != nil || sp.Transaction == "" {
		return nil, reject(ReasonInvalidPayload, "payload is not an exact SVM payload {\"transaction\": base64}")
	}
	if len(sp.Transaction) > base64.StdEncoding.EncodedLen(MaxSolanaTransactionSize) {
		return nil, reject(ReasonSVMTransaction, "transaction is longer than Solana's %d bytes", MaxSolanaTransactionSize)
	}
	raw, err := base64.StdEncoding.DecodeString(sp.Transaction)
	if err != nil {
		return nil, reject(ReasonSVMTransaction, "transaction is not standard base64")
	}
	tx, err := parseSolanaTx(raw)
	if errors.Is(err, errAddressLookups) {
		return nil, reject(ReasonSVMLookups, "%v", err)
	}
	if err != nil {
		return nil, reject(ReasonSVMTransaction, "%v", err)
	}
	feePayer, _ := ParsePublicKey(req.Extra.FeePayer)
	if tx.Accounts[0] != feePayer {
		return nil, reject(ReasonSVMFeePayer, "transaction's fee payer is %s, not %s", tx.Accounts[0], feePayer)
	}
	if tx.NumRequiredSignatures > maxSigners {
		return nil, reject(ReasonSVMSignature, "transaction asks for %d signatures; at most %d (the fee payer and the transfer's authority)", tx.NumRequiredSignatures, maxSigners)
	}
	// Every signer but the fee payer (who signs at settlement) must have
	// signed this message.
	for i := 1; i < tx.NumRequiredSignatures; i++ {
		if !ed25519.Verify(ed25519.PublicKey(tx.Accounts[i][:]), tx.Message, tx.Signatures[i][:]) {
			return nil, reject(ReasonSVMSignature, "signature %d (by %s) does not verify", i, tx.Accounts[i])
		}
	}
	transfer, rej := o.checkLayout(tx, feePayer)
	if rej != nil {
		return nil, rej
	}
	h := tx.MessageHash()
	payer := transfer.authority.String()
	return &checkedPayment{
		payer:    payer,
		payerKey: payer, // base58 is case-sensitive: kept as is
		nonce:    "sha256:" + hex.EncodeToString(h[:]),
		req:      req,
	}, nil
}

// matchAccepted compares the client's echo to the Solana offer.
func (o *svmOffer) matchAccepted(a *PaymentRequirements, req PaymentRequirements) *Rejection {
	if a.Scheme != req.Scheme {
		return reject(ReasonScheme, "scheme %q is not offered; use %q", a.Scheme, req.Scheme)
	}
	if a.Amount != req.Amount {
		return reject(ReasonRequirements, "accepted amount %q differs from the price %s", a.Amount, req.Amount)
	}
	if a.Asset != req.Asset {
		return reject(ReasonRequirements, "accepted asset %q is not %s", a.Asset, req.Asset)
	}
	if a.PayTo != req.PayTo {
		return reject(ReasonSVMRecipient, "accepted payTo %q is not %s", a.PayTo, req.PayTo)
	}
	if a.MaxTimeoutSeconds != req.MaxTimeoutSeconds {
		return reject(ReasonRequirements, "accepted maxTimeoutSeconds %d is not %d", a.MaxTimeoutSeconds, req.MaxTimeoutSeconds)
	}
	if a.Extra == nil || a.Extra.FeePayer != req.Extra.FeePayer {
		return reject(ReasonSVMFeePayer, "accepted extra.feePayer is not %s", req.Extra.FeePayer)
	}
	return nil
}

// svmTransfer is the TransferChecked a payment makes.
type svmTransfer struct {
	source, destination, authority PublicKey
}

// checkLayout enforces the instruction rules: 3 to 6 instructions, compute
// limit, compute price (bounded), TransferChecked of exactly the price of
// the mint to payTo's token account, then only Lighthouse or Memo; and the
// fee payer in no instruction's accounts.
func (o *svmOffer) checkLayout(tx *solanaTx, feePayer PublicKey) (*svmTransfer, *Rejection) {
	ixs := tx.Instructions
	if len(ixs) < 3 || len(ixs) > 6 {
		return nil, reject(ReasonSVMLayout, "transaction has %d instructions; the exact scheme allows 3 to 6", len(ixs))
	}
	for i, ix := range ixs {
		for _, a := range ix.Accounts {
			if a == feePayer {
				return nil, reject(ReasonSVMFeePayerUsed, "instruction %d names the fee payer %s among its accounts", i, feePayer)
			}
		}
	}
	limit, price := ixs[0], ixs[1]
	if limit.Program != programComputeBudget || len(limit.Data) != 5 || limit.Data[0] != ixSetComputeUnitLimit || len(limit.Accounts) != 0 {
		return nil, reject(ReasonSVMComputeLimit, "instruction 0 is not ComputeBudget SetComputeUnitLimit")
	}
	if price.Program != programComputeBudget || len(price.Data) != 9 || price.Data[0] != ixSetComputeUnitPrice || len(price.Accounts) != 0 {
		return nil, reject(ReasonSVMComputePrice, "instruction 1 is not ComputeBudget SetComputeUnitPrice")
	}
	units := uint64(binary.LittleEndian.Uint32(limit.Data[1:]))
	if units > maxComputeUnitLimit {
		return nil, reject(ReasonSVMComputeLimit, "compute unit limit %d is over %d", units, maxComputeUnitLimit)
	}
	p := binary.LittleEndian.Uint64(price.Data[1:])
	if p > maxComputeUnitPrice {
		return nil, reject(ReasonSVMPriceTooHigh, "compute unit price %d micro-lamports is over %d", p, maxComputeUnitPrice)
	}
	if units*p > maxPriorityFee { // both bounded above: no overflow
		return nil, reject(ReasonSVMPriceTooHigh, "priority fee %d units x %d micro-lamports is over %d micro-lamports", units, p, uint64(maxPriorityFee))
	}

	t := ixs[2]
	dest, known := o.dest[t.Program]
	if !known || len(t.Data) != 10 || t.Data[0] != ixTransferChecked || len(t.Accounts) != 4 {
		return nil, reject(ReasonSVMNoTransfer, "instruction 2 is not a Token or Token-2022 TransferChecked (source, mint, destination, authority)")
	}
	tr := &svmTransfer{source: t.Accounts[0], destination: t.Accounts[2], authority: t.Accounts[3]}
	if t.Accounts[1] != o.mint {
		return nil, reject(ReasonSVMMint, "transfer is of mint %s, not %s", t.Accounts[1], o.mint)
	}
	if tr.destination != dest {
		return nil, reject(ReasonSVMRecipient, "transfer goes to %s, not %s (the token account of %s)", tr.destination, dest, o.payTo)
	}
	amount := binary.LittleEndian.Uint64(t.Data[1:9])
	if fmt.Sprint(amount) != o.req.Amount {
		return nil, reject(ReasonSVMAmount, "transfer amount is %d, the exact scheme needs %s", amount, o.req.Amount)
	}
	if src, err := associatedTokenAccount(feePayer, o.mint, t.Program); err == nil && tr.source == src {
		return nil, reject(ReasonSVMFeePayerUsed, "transfer is from the fee payer's token account %s", src)
	}
	if int(t.Data[9]) != o.decimals {
		return nil, reject(ReasonSVMMint, "transfer states %d decimals, the mint has %d", t.Data[9], o.decimals)
	}
	if !tx.isSigner(t.AccountIndexes[3]) {
		return nil, reject(ReasonSVMSignature, "the transfer's authority %s does not sign the transaction", tr.authority)
	}
	for i, ix := range ixs[3:] {
		if ix.Program != programMemo && ix.Program != programLighthouse {
			return nil, reject(ReasonSVMOptional, "instruction %d runs program %s; only Memo or Lighthouse may follow the transfer", i+3, ix.Program)
		}
	}
	return tr, nil
}

// supportsSVM checks, when Solana is offered, that the facilitator's kinds
// include v2 exact on the Solana network with a fee payer, and learns the
// fee payer.
func (p *Payments) supportsSVM(kinds []SupportedKind) error {
	if p.svmFee == nil {
		return nil
	}
	want := SupportedKind{X402Version: 2, Scheme: SchemeExact, Network: p.cfg.Solana.Network}
	var named []string
	for _, k := range kinds {
		if !k.is(want) {
			continue
		}
		if _, err := ParsePublicKey(k.Extra.FeePayer); err == nil {
			named = append(named, k.Extra.FeePayer)
		}
	}
	if len(named) == 0 {
		// Not offered until the facilitator names a fee payer again.
		p.svmFee.learn(nil)
		var listed []string
		for _, k := range kinds {
			listed = append(listed, k.String())
		}
		return fmt.Errorf("%w: %s lists %s, not %s with a fee payer (--x402-solana-network, --x402-facilitator-url)",
			errSolanaUnsupported, p.cfg.FacilitatorURL, orNone(strings.Join(listed, ", ")), want)
	}
	p.svmFee.learn(named)
	return nil
}

// errSolanaUnsupported is ErrUnsupported for Solana alone. At start it
// refuses the configuration as any ErrUnsupported does; later (the
// facilitator stopped listing it) it withdraws Solana from the offers and
// leaves the node ready, since the EVM payment still works.
var errSolanaUnsupported = fmt.Errorf("%w (Solana)", ErrUnsupported)

// SolanaFeePayer is the fee payer Solana payments are offered with, as the
// facilitator last named it; "" while Solana is not offered.
func (p *Payments) SolanaFeePayer() string {
	if p.svmFee == nil {
		return ""
	}
	return p.svmFee.get()
}

// svmMaxTimeoutSeconds is the most a Solana payment is offered for: its
// transaction names a recent blockhash, which lands only for about 60 to
// 90 s (the scheme's specification offers 60), so a longer promise could
// not be kept. A run and its queueing fit well within it.
const svmMaxTimeoutSeconds = 60
