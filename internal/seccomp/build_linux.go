package seccomp

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// ErrUnsupportedArch is returned by Build for a policy without an
// architecture, which is what Default gives on architectures this package
// has no syscall table for.
var ErrUnsupportedArch = errors.New("seccomp: no syscall policy for this architecture")

// Offsets into struct seccomp_data, the input of a seccomp program:
//
//	struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; };
//
// A seccomp program loads 32-bit words in the machine's byte order.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// maxSkip is the farthest a conditional jump reaches: its offsets are 8 bits.
const maxSkip = 255

// argLow is the offset of the low 32 bits of argument i. lowWordOffset is 0 on
// little-endian machines and 4 on big-endian ones.
func argLow(i int) uint32 {
	return offArgs + 8*uint32(i) + lowWordOffset
}

// Build compiles p to a seccomp program.
//
// The program's shape, in order:
//  1. the architecture check: any other AUDIT_ARCH kills the process;
//  2. the syscall number check: a number with KillNrBits (x32) kills it;
//  3. a binary search over the rules' syscall numbers, about log2(rules)
//     comparisons deep, ending in the rule's argument checks and returns.
//
// Every path ends in a return, so the program never falls off its end and a
// rule may overwrite the accumulator that held the syscall number.
func Build(p Policy) (Filter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rules := slices.Clone(p.Rules)
	slices.SortFunc(rules, func(a, b Rule) int { return cmp.Compare(a.Nr, b.Nr) })

	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: p.Arch, SkipTrue: 1},
		ret(KillProcess),
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if p.KillNrBits != 0 {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: p.KillNrBits, SkipFalse: 1},
			ret(KillProcess))
	}
	if len(rules) == 0 {
		prog = append(prog, ret(p.Default))
	} else {
		prog = append(prog, search(rules, p.Default)...)
	}
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program has %d instructions, the kernel takes at most %d", len(prog), unix.BPF_MAXINSNS)
	}

	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	f := make(Filter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f, nil
}

// search returns a binary search over rules (sorted by Nr, not empty) that
// expects the syscall number in the accumulator. The left half is laid out
// right after the comparison and the right half after the left, so the only
// jump that can be long is the one over the left half; when that exceeds a
// conditional jump's reach it goes through an unconditional jump, which
// reaches anywhere.
func search(rules []Rule, def Action) []bpf.Instruction {
	if len(rules) == 1 {
		return leaf(rules[0], def)
	}
	mid := len(rules) / 2
	left := search(rules[:mid], def)
	right := search(rules[mid:], def)
	pivot := rules[mid].Nr

	var out []bpf.Instruction
	if len(left) <= maxSkip {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: pivot, SkipTrue: uint8(len(left))})
	} else {
		out = append(out,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: pivot, SkipFalse: 1},
			bpf.Jump{Skip: uint32(len(left))})
	}
	out = append(out, left...)
	return append(out, right...)
}

// leaf decides one rule. The search only narrows the number to a range, so
// the leaf still compares it: a number between two rules gets the default.
func leaf(r Rule, def Action) []bpf.Instruction {
	out := []bpf.Instruction{
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.Nr, SkipTrue: 1},
		ret(def),
	}
	loaded := -1 // argument now in the accumulator; checks on one argument share a load
	for _, c := range r.Checks {
		if c.Arg != loaded {
			out = append(out, bpf.LoadAbsolute{Off: argLow(c.Arg), Size: 4})
			loaded = c.Arg
		}
		cond := bpf.JumpEqual
		if c.Op == AnyBits {
			cond = bpf.JumpBitsSet
		}
		out = append(out,
			bpf.JumpIf{Cond: cond, Val: c.Value, SkipFalse: 1},
			ret(c.Action))
	}
	return append(out, ret(r.Action))
}

func ret(a Action) bpf.Instruction { return bpf.RetConstant{Val: uint32(a)} }
