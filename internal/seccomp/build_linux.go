package seccomp

import (
	"cmp"
	"errors"
	"fmt"
	"math"
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
//  3. a binary search over spans of syscall numbers, about log2(spans)
//     comparisons deep, ending in a return, or in a rule's argument
//     checks and returns.
//
// The spans tile every number: a rule with checks has a span of its own;
// otherwise adjacent numbers decided alike (by rules with the same action,
// or by the default between rules) share one. Default's 352 rules make 92
// spans, and its program 224 instructions instead of the 1451 a search
// over each rule took, which the kernel converts and JIT-compiles again
// for every sandbox and warm child that installs it.
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
	prog = append(prog, search(spans(rules, p.Default))...)
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

// span is a run of syscall numbers from lo up to the next span's lo that
// one decision covers: rule's checks and action, or action alone when rule
// is nil.
type span struct {
	lo     uint32
	rule   *Rule
	action Action
}

// spans tiles the syscall numbers, from 0 up, with the decisions of rules
// (sorted by Nr) and def between them, merging neighbours decided alike.
func spans(rules []Rule, def Action) []span {
	var out []span
	add := func(s span) {
		if n := len(out); n > 0 && s.rule == nil && out[n-1].rule == nil && out[n-1].action == s.action {
			return // the last span goes on
		}
		out = append(out, s)
	}
	next := uint64(0) // the first number no span covers yet
	for i := range rules {
		r := &rules[i]
		if uint64(r.Nr) > next {
			add(span{lo: uint32(next), action: def})
		}
		if len(r.Checks) > 0 {
			add(span{lo: r.Nr, rule: r})
		} else {
			add(span{lo: r.Nr, action: r.Action})
		}
		next = uint64(r.Nr) + 1
	}
	if next <= math.MaxUint32 {
		add(span{lo: uint32(next), action: def})
	}
	return out
}

// search returns a binary search over spans (sorted by lo, the first at 0)
// that expects the syscall number in the accumulator. The left half is laid
// out right after the comparison and the right half after the left, so the
// only jump that can be long is the one over the left half; when that
// exceeds a conditional jump's reach it goes through an unconditional jump,
// which reaches anywhere.
func search(spans []span) []bpf.Instruction {
	if len(spans) == 1 {
		return leaf(spans[0])
	}
	mid := len(spans) / 2
	left := search(spans[:mid])
	right := search(spans[mid:])
	pivot := spans[mid].lo

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

// leaf decides the numbers of one span: the search has narrowed the number
// to it, so only a rule's checks remain.
func leaf(s span) []bpf.Instruction {
	if s.rule == nil {
		return []bpf.Instruction{ret(s.action)}
	}
	var out []bpf.Instruction
	loaded := -1 // argument now in the accumulator; checks on one argument share a load
	for _, c := range s.rule.Checks {
		if c.Arg != loaded {
			out = append(out, bpf.LoadAbsolute{Off: argLow(c.Arg), Size: 4})
			loaded = c.Arg
		}
		// Each failed test skips the rest of the check: the second
		// test (with its load, if another argument) and the return.
		var also []bpf.Instruction
		if a := c.Also; a != nil {
			if a.Arg != loaded {
				also = append(also, bpf.LoadAbsolute{Off: argLow(a.Arg), Size: 4})
				// The next check finds either argument loaded, as the
				// first test or the second failed: it loads its own.
				loaded = -1
			}
			also = append(also, jumpUnless(*a, 1))
		}
		out = append(out, jumpUnless(Cond{c.Arg, c.Op, c.Value}, uint8(len(also)+1)))
		out = append(out, also...)
		out = append(out, ret(c.Action))
	}
	return append(out, ret(s.rule.Action))
}

// jumpUnless tests c on the accumulator and skips skip instructions when
// it does not hold.
func jumpUnless(c Cond, skip uint8) bpf.Instruction {
	cond := bpf.JumpEqual
	if c.Op == AnyBits {
		cond = bpf.JumpBitsSet
	}
	return bpf.JumpIf{Cond: cond, Val: c.Value, SkipFalse: skip}
}

func ret(a Action) bpf.Instruction { return bpf.RetConstant{Val: uint32(a)} }
