package seccomp

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Filter is a compiled seccomp program: the instructions the kernel runs on
// every system call of the confined thread and its descendants.
type Filter []unix.SockFilter

// insnSize is the size of one encoded instruction, as in struct sock_filter.
const insnSize = 8

// Marshal encodes f for a child process: each instruction as struct
// sock_filter (u16 code, u8 jt, u8 jf, u32 k), little-endian whatever the
// machine, so the encoding does not depend on who reads it.
func (f Filter) Marshal() []byte {
	b := make([]byte, 0, len(f)*insnSize)
	for _, in := range f {
		b = binary.LittleEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.LittleEndian.AppendUint32(b, in.K)
	}
	return b
}

// Unmarshal decodes what Marshal encoded. It checks only the framing; the
// kernel validates the program itself when Install loads it.
func Unmarshal(b []byte) (Filter, error) {
	if len(b) == 0 || len(b)%insnSize != 0 {
		return nil, fmt.Errorf("seccomp: filter of %d bytes is not a whole number of %d-byte instructions", len(b), insnSize)
	}
	n := len(b) / insnSize
	if n > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, the kernel takes at most %d", n, unix.BPF_MAXINSNS)
	}
	f := make(Filter, n)
	for i := range f {
		in := b[i*insnSize:]
		f[i] = unix.SockFilter{
			Code: binary.LittleEndian.Uint16(in),
			Jt:   in[2],
			Jf:   in[3],
			K:    binary.LittleEndian.Uint32(in[4:]),
		}
	}
	return f, nil
}
