package x402

import (
	"errors"
	"math/big"
	"strings"
)

// base58 is Bitcoin's alphabet, which Solana writes keys and signatures in.
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// maxBase58Len bounds what decodeBase58 reads: a 64-byte signature is at
// most 88 characters.
const maxBase58Len = 128

func isBase58(s string) bool {
	return s != "" && strings.Trim(s, base58Alphabet) == ""
}

// decodeBase58 decodes s: each leading '1' is a zero byte, the rest a
// big-endian number. The encoding is one-to-one, so a key has one spelling.
func decodeBase58(s string) ([]byte, error) {
	if !isBase58(s) || len(s) > maxBase58Len {
		return nil, errors.New("not base58")
	}
	zeros := len(s) - len(strings.TrimLeft(s, "1"))
	n := new(big.Int)
	radix := big.NewInt(58)
	for i := zeros; i < len(s); i++ {
		n.Mul(n, radix)
		n.Add(n, big.NewInt(int64(strings.IndexByte(base58Alphabet, s[i]))))
	}
	return append(make([]byte, zeros), n.Bytes()...), nil
}

// encodeBase58 is decodeBase58's inverse.
func encodeBase58(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	n := new(big.Int).SetBytes(b[zeros:])
	radix := big.NewInt(58)
	var out []byte
	mod := new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, radix, mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for range zeros {
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}
