package x402

import (
	"crypto/ed25519"
	"encoding/hex"
	"strconv"
	"strings"

	"filippo.io/edwards25519"
	"github.com/mr-tron/base58"

	"boxer"
)

// The text a sign-in proof signs: EIP-4361 (SIWE) for an EVM address, its
// Solana twin (SIWS) for a Solana one, built from the proof's fields. Both
// are byte for byte what the official client signs, whose two formatters
// differ in when an optional line is printed: SIWE prints statement,
// requestId and resources whenever present, even empty; SIWS only when
// not empty.

// siweMessage is the EIP-4361 text for p, signed by the EIP-55 address.
func siweMessage(p *SignInProof, address string, chainID uint64) string {
	var b strings.Builder
	b.WriteString(p.Domain + " wants you to sign in with your Ethereum account:\n")
	b.WriteString(address)
	if p.Statement == nil {
		b.WriteString("\n\n\n")
	} else {
		b.WriteString("\n\n" + *p.Statement + "\n\n")
	}
	b.WriteString("URI: " + p.URI)
	b.WriteString("\nVersion: " + p.Version)
	b.WriteString("\nChain ID: " + strconv.FormatUint(chainID, 10))
	b.WriteString("\nNonce: " + p.Nonce)
	b.WriteString("\nIssued At: " + p.IssuedAt)
	if p.ExpirationTime != nil && *p.ExpirationTime != "" {
		b.WriteString("\nExpiration Time: " + *p.ExpirationTime)
	}
	if p.NotBefore != nil && *p.NotBefore != "" {
		b.WriteString("\nNot Before: " + *p.NotBefore)
	}
	if p.RequestID != nil {
		b.WriteString("\nRequest ID: " + *p.RequestID)
	}
	if p.Resources != nil {
		b.WriteString("\nResources:")
		for _, r := range *p.Resources {
			b.WriteString("\n- " + r)
		}
	}
	return b.String()
}

// siwsMessage is the Sign-In With Solana text for p.
func siwsMessage(p *SignInProof) string {
	lines := []string{p.Domain + " wants you to sign in with your Solana account:", p.Address, ""}
	if p.Statement != nil && *p.Statement != "" {
		lines = append(lines, *p.Statement, "")
	}
	lines = append(lines,
		"URI: "+p.URI,
		"Version: "+p.Version,
		"Chain ID: "+strings.TrimPrefix(p.ChainID, "solana:"),
		"Nonce: "+p.Nonce,
		"Issued At: "+p.IssuedAt)
	if p.ExpirationTime != nil && *p.ExpirationTime != "" {
		lines = append(lines, "Expiration Time: "+*p.ExpirationTime)
	}
	if p.NotBefore != nil && *p.NotBefore != "" {
		lines = append(lines, "Not Before: "+*p.NotBefore)
	}
	if p.RequestID != nil && *p.RequestID != "" {
		lines = append(lines, "Request ID: "+*p.RequestID)
	}
	if p.Resources != nil && len(*p.Resources) > 0 {
		lines = append(lines, "Resources:")
		for _, r := range *p.Resources {
			lines = append(lines, "- "+r)
		}
	}
	return strings.Join(lines, "\n")
}

// personalDigest is the EIP-191 (version 0x45, personal_sign) hash of msg.
func personalDigest(msg string) []byte {
	return keccak256([]byte("\x19Ethereum Signed Message:\n"+strconv.Itoa(len(msg))), []byte(msg))
}

// verifyEVMProof checks an EIP-191 signature of the SIWE text by the
// proof's address and returns that address in lowercase 0x hex.
func verifyEVMProof(p *SignInProof) (string, *boxer.Error) {
	addr, err := ParseAddress(p.Address)
	if err != nil {
		return "", rejectSignIn(SignInReasonMalformed, "%v", err)
	}
	// EIP-55 or one case throughout (which the official client prints in
	// EIP-55); a mixed case that is not the checksum is a typo.
	if digits := p.Address[2:]; p.Address[:2] != "0x" ||
		(digits != strings.ToLower(digits) && digits != strings.ToUpper(digits) && p.Address != addr.String()) {
		return "", rejectSignIn(SignInReasonMalformed, "address %q fails its EIP-55 checksum", p.Address)
	}
	id, err := ChainID(p.ChainID)
	if err != nil {
		return "", rejectSignIn(SignInReasonChain, "%v", err)
	}
	signer, err := RecoverSigner(personalDigest(siweMessage(p, addr.String(), id.Uint64())), p.Signature)
	if err != nil {
		// An EIP-1271 or EIP-6492 signature is not 65 bytes: say so.
		return "", rejectSignIn(SignInReasonSignature, "%v (only EOA signatures are supported, not smart-contract wallets)", err)
	}
	if signer != addr {
		return "", rejectSignIn(SignInReasonSignature, "the signature is not by %s", addr)
	}
	return "0x" + hex.EncodeToString(addr[:]), nil
}

// verifySolanaProof checks an ed25519 signature of the SIWS text by the
// proof's address, a base58 public key, and returns the address as sent
// (base58 has one spelling per key).
func verifySolanaProof(p *SignInProof) (string, *boxer.Error) {
	key, err := ParsePublicKey(p.Address)
	if err != nil {
		return "", rejectSignIn(SignInReasonMalformed, "address %q is not a base58 ed25519 public key", p.Address)
	}
	pub := key[:]
	var sig []byte
	if len(p.Signature) <= 88 { // 64 bytes are at most 88 characters
		sig, err = base58.Decode(p.Signature)
	}
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", rejectSignIn(SignInReasonSignature, "the signature is not 64 bytes of base58")
	}
	// A key of small order (a torsion point) "signs" many messages at
	// once; it is no one's address, and the official verifier refuses it.
	if pt, err := new(edwards25519.Point).SetBytes(pub); err != nil ||
		new(edwards25519.Point).MultByCofactor(pt).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return "", rejectSignIn(SignInReasonMalformed, "address %q is not a usable ed25519 public key", p.Address)
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), []byte(siwsMessage(p)), sig) {
		return "", rejectSignIn(SignInReasonSignature, "the signature is not by %s", p.Address)
	}
	return p.Address, nil
}
