package x402

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"golang.org/x/crypto/sha3"
)

// This file is the small part of EIP-712 that EIP-3009 needs: the domain
// separator of a token, the struct hash of TransferWithAuthorization, and
// recovery of the signer. Every value in both structs is static (address,
// uint256, bytes32) or a string hashed to bytes32, so each encodes to one
// 32-byte word and no general typed-data encoder is needed.

var (
	// keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
	domainTypeHash = keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"))
	// keccak256 of the EIP-3009 type, as the token contract computes it.
	transferTypeHash = keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"))

	maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
)

// keccak256 is Ethereum's hash: the original Keccak padding, not SHA3-256.
func keccak256(parts ...[]byte) []byte {
	h := sha3.NewLegacyKeccak256()
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// Address is a 20-byte Ethereum address.
type Address [20]byte

// ParseAddress parses 0x followed by 40 hex digits, in any case. It does not
// enforce the EIP-55 checksum: clients and configs mix cases freely, and an
// address is compared by its bytes.
func ParseAddress(s string) (Address, error) {
	var a Address
	if len(s) != 42 || (s[:2] != "0x" && s[:2] != "0X") {
		return a, fmt.Errorf("address %q is not 0x and 40 hex digits", s)
	}
	if _, err := hex.Decode(a[:], []byte(s[2:])); err != nil {
		return a, fmt.Errorf("address %q is not hex", s)
	}
	return a, nil
}

// String returns the EIP-55 mixed-case checksum form, the form the official
// client signs with.
func (a Address) String() string {
	lower := hex.EncodeToString(a[:])
	h := keccak256([]byte(lower))
	out := []byte("0x" + lower)
	for i := 0; i < 40; i++ {
		c := out[2+i]
		nibble := h[i/2]
		if i%2 == 0 {
			nibble >>= 4
		}
		if c >= 'a' && nibble&0xf >= 8 {
			out[2+i] = c - 'a' + 'A'
		}
	}
	return string(out)
}

// word left-pads an address to a 32-byte ABI word.
func (a Address) word() []byte {
	w := make([]byte, 32)
	copy(w[12:], a[:])
	return w
}

// ParseUint256 parses a uint256 the way the exact EVM scheme writes numbers:
// hex after a 0x prefix, decimal otherwise. Signs, spaces and other bases are
// refused.
func ParseUint256(s string) (*big.Int, error) {
	digits, base := s, 10
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		digits, base = s[2:], 16
	}
	if digits == "" {
		return nil, fmt.Errorf("number %q is empty", s)
	}
	for _, c := range digits {
		ok := c >= '0' && c <= '9'
		if base == 16 {
			ok = ok || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
		}
		if !ok {
			return nil, fmt.Errorf("number %q is not a base-%d integer", s, base)
		}
	}
	n, ok := new(big.Int).SetString(digits, base)
	if !ok || n.Cmp(maxUint256) > 0 {
		return nil, fmt.Errorf("number %q does not fit in uint256", s)
	}
	return n, nil
}

// uintWord encodes n (0 <= n < 2^256) as a 32-byte big-endian ABI word.
func uintWord(n *big.Int) []byte {
	return n.FillBytes(make([]byte, 32))
}

// ChainID returns the chain id of a CAIP-2 eip155 network ("eip155:8453").
func ChainID(network string) (*big.Int, error) {
	ref, ok := strings.CutPrefix(network, "eip155:")
	if !ok {
		return nil, fmt.Errorf("network %q is not an eip155 (EVM) network", network)
	}
	id, err := strconv.ParseUint(ref, 10, 63)
	if err != nil || id == 0 {
		return nil, fmt.Errorf("network %q has no valid chain id", network)
	}
	return new(big.Int).SetUint64(id), nil
}

// Domain is the EIP-712 domain of an EIP-3009 token.
type Domain struct {
	Name              string
	Version           string
	ChainID           *big.Int
	VerifyingContract Address
}

// Separator is the EIP-712 domain separator.
func (d Domain) Separator() []byte {
	return keccak256(
		domainTypeHash,
		keccak256([]byte(d.Name)),
		keccak256([]byte(d.Version)),
		uintWord(d.ChainID),
		d.VerifyingContract.word(),
	)
}

// Transfer is a parsed EIP-3009 TransferWithAuthorization message.
type Transfer struct {
	From, To    Address
	Value       *big.Int
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       [32]byte
}

// ParseAuthorization parses the string fields of an authorization.
func ParseAuthorization(a Authorization) (*Transfer, error) {
	var t Transfer
	var err error
	if t.From, err = ParseAddress(a.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if t.To, err = ParseAddress(a.To); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	if t.Value, err = ParseUint256(a.Value); err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	if t.ValidAfter, err = ParseUint256(a.ValidAfter); err != nil {
		return nil, fmt.Errorf("validAfter: %w", err)
	}
	if t.ValidBefore, err = ParseUint256(a.ValidBefore); err != nil {
		return nil, fmt.Errorf("validBefore: %w", err)
	}
	// The nonce is a bytes32: exactly 32 bytes of hex, as every EIP-3009
	// client writes it. The official facilitator cannot handle another form.
	n := a.Nonce
	if len(n) != 66 || (n[:2] != "0x" && n[:2] != "0X") {
		return nil, fmt.Errorf("nonce %q is not 0x and 64 hex digits", n)
	}
	if _, err := hex.Decode(t.Nonce[:], []byte(n[2:])); err != nil {
		return nil, fmt.Errorf("nonce %q is not hex", n)
	}
	return &t, nil
}

// NonceHex is the nonce in canonical lowercase 0x form, the replay key.
func (t *Transfer) NonceHex() string { return "0x" + hex.EncodeToString(t.Nonce[:]) }

// StructHash is the EIP-712 hashStruct of the message.
func (t *Transfer) StructHash() []byte {
	return keccak256(
		transferTypeHash,
		t.From.word(),
		t.To.word(),
		uintWord(t.Value),
		uintWord(t.ValidAfter),
		uintWord(t.ValidBefore),
		t.Nonce[:],
	)
}

// Digest is the hash the payer signs: keccak256(0x1901 || domain || struct).
func (t *Transfer) Digest(d Domain) []byte {
	return keccak256([]byte{0x19, 0x01}, d.Separator(), t.StructHash())
}

// Errors of signature recovery, distinct so tests and logs can tell them apart.
var (
	ErrSignatureFormat = errors.New("signature is not 65 bytes of hex")
	ErrSignatureV      = errors.New("signature v is not 27 or 28")
	ErrSignatureHighS  = errors.New("signature s is in the upper half of the curve order (malleable)")
	ErrSignatureBad    = errors.New("signature does not recover to a public key")
)

// RecoverSigner returns the address whose key made sig over digest. sig is
// Ethereum's r || s || v in hex, with v 27 or 28. A high-s signature is
// refused: it is the malleable twin of a valid one, which the token contract
// rejects on chain but the official facilitator does not reject off chain.
func RecoverSigner(digest []byte, sig string) (Address, error) {
	var a Address
	h, ok := strings.CutPrefix(sig, "0x")
	if !ok {
		h, ok = strings.CutPrefix(sig, "0X")
	}
	raw, err := hex.DecodeString(h)
	if !ok || err != nil || len(raw) != 65 {
		return a, ErrSignatureFormat
	}
	v := raw[64]
	if v != 27 && v != 28 {
		return a, ErrSignatureV
	}
	var s secp256k1.ModNScalar
	if overflow := s.SetByteSlice(raw[32:64]); overflow || s.IsOverHalfOrder() {
		return a, ErrSignatureHighS
	}
	// decred's compact form is [27 + recovery id] || r || s, the recovery id
	// being v - 27; a code of 27 or 28 also says "uncompressed key", which
	// does not matter for the address.
	compact := make([]byte, 65)
	compact[0] = v
	copy(compact[1:], raw[:64])
	pub, _, err := ecdsa.RecoverCompact(compact, digest)
	if err != nil {
		return a, fmt.Errorf("%w: %v", ErrSignatureBad, err)
	}
	return PubkeyAddress(pub), nil
}

// PubkeyAddress is the Ethereum address of a public key: the last 20 bytes
// of keccak256 of its uncompressed X || Y.
func PubkeyAddress(pub *secp256k1.PublicKey) Address {
	var a Address
	copy(a[:], keccak256(pub.SerializeUncompressed()[1:])[12:])
	return a
}
