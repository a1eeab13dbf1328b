package sandbox

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"boxer"
)

// idPool hands out host uid/gid pairs, one pair per live sandbox. Distinct
// ids keep concurrent sandboxes apart even where the kernel counts per uid
// (RLIMIT_NPROC, signal permission, file ownership in the state dir).
type idPool struct {
	base uint32

	mu   sync.Mutex
	free []int // slots not in use, used as a stack
}

func newIDPool(base uint32, n int) *idPool {
	p := &idPool{base: base, free: make([]int, n)}
	for i := range p.free {
		p.free[i] = n - 1 - i
	}
	return p
}

// get returns a free slot; its ids are root() and user().
func (p *idPool) get() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return 0, boxer.Errorf(boxer.ECodeBusy, "every sandbox slot is in use")
	}
	s := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return s, nil
}

func (p *idPool) put(slot int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, slot)
}

// root is the host id that a sandbox's uid 0 maps to.
func (p *idPool) root(slot int) uint32 { return p.base + 2*uint32(slot) }

// user is the host id that a sandbox's program (uid 1000) maps to.
func (p *idPool) user(slot int) uint32 { return p.base + 2*uint32(slot) + 1 }

// checkIDsMapped reports whether boxer's own user namespace maps every
// host id the engine gives sandboxes, [base, base+span), as both uid and
// gid. Outside the initial namespace (a container or pod with user
// namespaces) only the ids its runtime mapped exist: a sandbox's id
// mapping that names another fails with a bare EPERM, so the engine
// refuses to start with the fix instead.
func checkIDsMapped(base, span uint32) error {
	for _, f := range []string{"/proc/self/uid_map", "/proc/self/gid_map"} {
		m, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("ids: %w", err)
		}
		if !idsMapped(string(m), uint64(base), uint64(base)+uint64(span)) {
			return fmt.Errorf("ids %d-%d are not all mapped in boxer's user namespace (%s: %s); "+
				"give sandboxes ids it maps with --id-base and --id-span (a pod with hostUsers: false maps 0-65535: --id-base 32768 --id-span 16384)",
				base, uint64(base)+uint64(span)-1, f, strings.Join(strings.Fields(string(m)), " "))
		}
	}
	return nil
}

// idsMapped reports whether the ids [lo, hi) lie within the inside ranges
// of an id map (/proc/PID/uid_map's "inside outside count" lines).
func idsMapped(idMap string, lo, hi uint64) bool {
	type extent struct{ lo, hi uint64 }
	var ext []extent
	for _, line := range strings.Split(idMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil {
			continue
		}
		ext = append(ext, extent{in, in + n})
	}
	slices.SortFunc(ext, func(a, b extent) int { return cmp.Compare(a.lo, b.lo) })
	for _, e := range ext {
		if e.lo <= lo && lo < e.hi {
			lo = e.hi
		}
		if lo >= hi {
			return true
		}
	}
	return lo >= hi
}
