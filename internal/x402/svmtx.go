package x402

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"filippo.io/edwards25519"
	"github.com/mr-tron/base58"
)

// This file reads a Solana transaction in its wire format, the part of
// Solana that the exact scheme's payload carries, and derives associated
// token accounts. It is our own small reader rather than a Solana SDK: it
// runs on untrusted input before anything else, and it needs only the
// compiled message (no RPC, no instruction decoders). The tests build their
// transactions with github.com/gagliardetto/solana-go, so the reader is
// checked against an encoder it shares nothing with.
//
// Wire format (all lengths are "compact-u16", 1 to 3 bytes, 7 bits each):
//
//	transaction := len(signatures) signature[64]... message
//	message     := [0x80|version]? header accounts[32]... blockhash[32] instructions [lookups if v0]
//	header      := numRequiredSignatures numReadonlySigned numReadonlyUnsigned   (u8 each)
//	instruction := programIndex(u8) len(accountIndexes) u8... len(data) data...
//	lookup      := table[32] len(writable) u8... len(readonly) u8...

// MaxSolanaTransactionSize is the largest transaction Solana accepts (the
// IPv6 minimum MTU less headers); anything longer cannot be settled.
const MaxSolanaTransactionSize = 1232

// PublicKey is a Solana address: an ed25519 public key or a program-derived
// address, 32 bytes, written in base58.
type PublicKey [32]byte

// ParsePublicKey reads a base58 address. It must decode to exactly 32 bytes.
func ParsePublicKey(s string) (PublicKey, error) {
	var k PublicKey
	if s == "" || len(s) > 44 {
		return k, fmt.Errorf("%q is not a Solana address", s)
	}
	b, err := base58.Decode(s)
	if err != nil || len(b) != 32 {
		return k, fmt.Errorf("%q is not a Solana address (base58 of 32 bytes)", s)
	}
	copy(k[:], b)
	return k, nil
}

func (k PublicKey) String() string { return base58.Encode(k[:]) }

// mustKey is ParsePublicKey for the program ids written in this package.
func mustKey(s string) PublicKey {
	k, err := ParsePublicKey(s)
	if err != nil {
		panic(err)
	}
	return k
}

// solanaTx is a decoded transaction. Message is the signed bytes.
type solanaTx struct {
	Signatures [][64]byte
	Message    []byte
	Versioned  bool // v0; false for a legacy message

	NumRequiredSignatures int
	NumReadonlySigned     int
	NumReadonlyUnsigned   int
	Accounts              []PublicKey
	Blockhash             [32]byte
	Instructions          []solanaInstruction
	NumLookups            int // address table lookups (v0 only); parseSolanaTx refuses them
}

// solanaInstruction is a compiled instruction with its indexes resolved
// against the static account list.
type solanaInstruction struct {
	Program  PublicKey
	Accounts []PublicKey
	// AccountIndexes are the raw indexes, for signer checks.
	AccountIndexes []int
	Data           []byte
}

// MessageHash is SHA-256 of the signed message: one payment, however its
// signature slots are filled (the fee payer's is empty until settlement).
func (tx *solanaTx) MessageHash() [32]byte { return sha256.Sum256(tx.Message) }

// isSigner reports whether account index i must sign.
func (tx *solanaTx) isSigner(i int) bool { return i < tx.NumRequiredSignatures }

// txReader walks the bytes; the first error sticks.
type txReader struct {
	b   []byte
	off int
	err error
}

func (r *txReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format+" (at byte %d)", append(args, r.off)...)
	}
}

func (r *txReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail("transaction is truncated")
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *txReader) u8() int {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return int(b[0])
}

// compactU16 reads Solana's short_vec length: little-endian 7-bit groups,
// at most 3 bytes, value at most 0xffff, and no longer than needed (Solana
// refuses an alias encoding, and so does this).
func (r *txReader) compactU16() int {
	v := 0
	for i := 0; i < 3; i++ {
		b := r.u8()
		if r.err != nil {
			return 0
		}
		v |= int(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			if i > 0 && b == 0 {
				r.fail("length is not minimally encoded")
				return 0
			}
			if v > 0xffff {
				r.fail("length overflows u16")
				return 0
			}
			return v
		}
	}
	r.fail("length is longer than 3 bytes")
	return 0
}

// errAddressLookups is a v0 transaction that names accounts through
// address lookup tables. Those accounts cannot be known without a node, so
// nothing about them (the fee payer's isolation first) could be checked.
var errAddressLookups = errors.New("transaction uses address lookup tables; list every account in the message")

// parseSolanaTx decodes a wire transaction. It checks the structure only:
// lengths, indexes in range, one signature per required signer, nothing
// left over. Signatures and meaning are the caller's.
func parseSolanaTx(wire []byte) (*solanaTx, error) {
	if len(wire) > MaxSolanaTransactionSize {
		return nil, fmt.Errorf("transaction is %d bytes, more than Solana's %d", len(wire), MaxSolanaTransactionSize)
	}
	r := &txReader{b: wire}
	tx := &solanaTx{}
	nsig := r.compactU16()
	for i := 0; i < nsig && r.err == nil; i++ {
		var s [64]byte
		copy(s[:], r.bytes(64))
		tx.Signatures = append(tx.Signatures, s)
	}
	if r.err != nil {
		return nil, r.err
	}
	tx.Message = wire[r.off:]

	first := r.u8()
	if r.err == nil && first&0x80 != 0 {
		if v := first & 0x7f; v != 0 {
			return nil, fmt.Errorf("transaction version %d is not supported (legacy or v0)", v)
		}
		tx.Versioned = true
		first = r.u8()
	}
	tx.NumRequiredSignatures = first
	tx.NumReadonlySigned = r.u8()
	tx.NumReadonlyUnsigned = r.u8()
	nacc := r.compactU16()
	for i := 0; i < nacc && r.err == nil; i++ {
		var k PublicKey
		copy(k[:], r.bytes(32))
		tx.Accounts = append(tx.Accounts, k)
	}
	copy(tx.Blockhash[:], r.bytes(32))
	type rawIx struct {
		prog int
		idx  []int
		data []byte
	}
	var raw []rawIx
	nix := r.compactU16()
	for i := 0; i < nix && r.err == nil; i++ {
		prog := r.u8()
		n := r.compactU16()
		idx := make([]int, 0, n)
		for j := 0; j < n && r.err == nil; j++ {
			idx = append(idx, r.u8())
		}
		data := r.bytes(r.compactU16())
		if r.err != nil {
			break
		}
		raw = append(raw, rawIx{prog, idx, data})
	}
	if tx.Versioned {
		tx.NumLookups = r.compactU16()
		for i := 0; i < tx.NumLookups && r.err == nil; i++ {
			r.bytes(32)
			r.bytes(r.compactU16())
			r.bytes(r.compactU16())
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.off != len(wire) {
		return nil, fmt.Errorf("%d bytes after the message", len(wire)-r.off)
	}
	switch {
	case tx.NumRequiredSignatures == 0:
		return nil, errors.New("transaction has no signer (no fee payer)")
	case len(tx.Signatures) != tx.NumRequiredSignatures:
		return nil, fmt.Errorf("transaction carries %d signatures for %d required signers", len(tx.Signatures), tx.NumRequiredSignatures)
	case tx.NumRequiredSignatures > nacc:
		return nil, fmt.Errorf("%d required signers among %d accounts", tx.NumRequiredSignatures, nacc)
	case tx.NumReadonlySigned >= tx.NumRequiredSignatures:
		// The fee payer must be a writable signer.
		return nil, errors.New("transaction has no writable signer to pay its fee")
	case tx.NumReadonlyUnsigned > nacc-tx.NumRequiredSignatures:
		return nil, errors.New("header counts more read-only accounts than there are")
	case tx.NumLookups > 0:
		return nil, errAddressLookups
	}
	for i, ix := range raw {
		if ix.prog >= nacc {
			return nil, fmt.Errorf("instruction %d: program index %d out of %d accounts", i, ix.prog, nacc)
		}
		in := solanaInstruction{Program: tx.Accounts[ix.prog], AccountIndexes: ix.idx, Data: ix.data}
		for _, a := range ix.idx {
			if a >= nacc {
				return nil, fmt.Errorf("instruction %d: account index %d out of %d accounts", i, a, nacc)
			}
			in.Accounts = append(in.Accounts, tx.Accounts[a])
		}
		tx.Instructions = append(tx.Instructions, in)
	}
	return tx, nil
}

// associatedTokenAccount is the address of owner's account for mint under
// tokenProgram: the program-derived address of the Associated Token
// Account program with seeds (owner, tokenProgram, mint).
func associatedTokenAccount(owner, mint, tokenProgram PublicKey) (PublicKey, error) {
	return findProgramAddress([][]byte{owner[:], tokenProgram[:], mint[:]}, programATA)
}

// findProgramAddress returns the first address, trying bump seeds from 255
// down, that is SHA-256(seeds || bump || program || "ProgramDerivedAddress")
// and not a point on the ed25519 curve (so no private key can sign for it).
func findProgramAddress(seeds [][]byte, program PublicKey) (PublicKey, error) {
	for bump := 255; bump >= 0; bump-- {
		h := sha256.New()
		for _, s := range seeds {
			h.Write(s)
		}
		h.Write([]byte{byte(bump)})
		h.Write(program[:])
		h.Write([]byte("ProgramDerivedAddress"))
		var k PublicKey
		copy(k[:], h.Sum(nil))
		if _, err := new(edwards25519.Point).SetBytes(k[:]); err != nil {
			return k, nil // off the curve
		}
	}
	return PublicKey{}, errors.New("no program address found for these seeds")
}

// isBase58 reports whether s is written in base58 (a CAIP-2 reference of a
// Solana network is a genesis hash's first 32 characters).
func isBase58(s string) bool {
	_, err := base58.Decode(s)
	return s != "" && err == nil
}
