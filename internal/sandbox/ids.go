package sandbox

import (
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
