package x402

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SupportedKind is one (version, scheme, network) a facilitator settles,
// from its GET /supported.
type SupportedKind struct {
	X402Version int    `json:"x402Version"`
	Scheme      string `json:"scheme"`
	Network     string `json:"network"`
	// Extra is what a payment of this kind needs from the facilitator:
	// on Solana, the fee payer.
	Extra struct {
		FeePayer string `json:"feePayer,omitempty"`
	} `json:"extra"`
}

// is reports whether k is the kind (version, scheme, network) of want.
func (k SupportedKind) is(want SupportedKind) bool {
	return k.X402Version == want.X402Version && k.Scheme == want.Scheme && k.Network == want.Network
}

func (k SupportedKind) String() string {
	return fmt.Sprintf("v%d %s on %s", k.X402Version, k.Scheme, k.Network)
}

// Supported asks the facilitator which kinds of payment it settles.
func (c *FacilitatorClient) Supported(ctx context.Context) ([]SupportedKind, error) {
	status, data, err := c.exchange(ctx, http.MethodGet, "supported", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("facilitator supported: HTTP %d: %s", status, excerpt(data))
	}
	var out struct {
		Kinds []SupportedKind `json:"kinds"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Kinds == nil {
		return nil, fmt.Errorf("facilitator supported: HTTP 200, answer has no kinds: %s", excerpt(data))
	}
	return out.Kinds, nil
}

// supporter is a Facilitator that can say what it supports; a Facilitator
// that cannot (a test's) is taken to support what boxer asks.
type supporter interface {
	Supported(ctx context.Context) ([]SupportedKind, error)
}

// ErrUnsupported is a facilitator's answer that it settles none of the
// payments boxer asks for: a configuration error, not an outage.
var ErrUnsupported = errors.New("the facilitator does not support this payment")

// facilitatorHealth is what boxer last learned from the facilitator's GET
// /supported: nil once it listed the kind boxer asks for.
type facilitatorHealth struct {
	mu  sync.Mutex
	err error
}

func (h *facilitatorHealth) set(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

func (h *facilitatorHealth) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// checkTimeout bounds one CheckFacilitator: a question that a facilitator
// answers at once, not the settlement the client's timeout allows for.
const checkTimeout = 10 * time.Second

// CheckFacilitator asks the facilitator once, within checkTimeout, whether
// it settles boxer's kind of payment (x402 v2, exact, on the configured
// network), and records the answer for Ready. It returns an error wrapping
// ErrUnsupported when the facilitator answered that it does not, and
// another error when it could not be asked. Payments off: nil.
func (p *Payments) CheckFacilitator(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	s, ok := p.fac.(supporter)
	if !ok {
		p.health.set(nil)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	kinds, err := s.Supported(ctx)
	if err != nil {
		err = fmt.Errorf("facilitator %s unreachable: %w", p.cfg.FacilitatorURL, err)
	} else {
		err = p.supports(kinds)
	}
	if errors.Is(err, errSolanaUnsupported) {
		p.health.set(nil) // EVM serves on; Solana is withdrawn (supportsSVM)
	} else {
		p.health.set(err)
	}
	return err
}

// supports reports whether kinds include the payment boxer asks for.
func (p *Payments) supports(kinds []SupportedKind) error {
	want := SupportedKind{X402Version: 2, Scheme: "exact", Network: p.cfg.Network}
	var listed []string
	for _, k := range kinds {
		if k.is(want) {
			return p.supportsSVM(kinds)
		}
		listed = append(listed, k.String())
	}
	return fmt.Errorf("%w: %s lists %s, not %s (--x402-network, --x402-facilitator-url)",
		ErrUnsupported, p.cfg.FacilitatorURL, orNone(strings.Join(listed, ", ")), want)
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// Ready is nil while payments are off or the facilitator's last answer
// listed boxer's payment; else why runs cannot be paid for now.
func (p *Payments) Ready() error {
	if !p.Enabled() {
		return nil
	}
	return p.health.get()
}

// WatchFacilitator asks the facilitator again until ctx ends: after a
// failure at growing intervals (from 1 s up to every 30 s), and every
// 5 minutes while it answers, so that readiness follows an outage and
// its end. A change of answer is logged once.
func (p *Payments) WatchFacilitator(ctx context.Context) {
	p.watch(ctx, time.Second, 30*time.Second, 5*time.Minute, nil)
}

// watch is WatchFacilitator with its intervals: first and most bound the
// waits after a failure, healthy is the wait after an answer. checked, if
// not nil, gets each check's result (for tests).
func (p *Payments) watch(ctx context.Context, first, most, healthy time.Duration, checked func(error)) {
	if !p.Enabled() {
		return
	}
	if _, ok := p.fac.(supporter); !ok {
		return
	}
	backoff := first
	last := p.health.get()
	for {
		wait := healthy
		if last != nil {
			wait, backoff = backoff, min(2*backoff, most)
		} else {
			backoff = first
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := p.CheckFacilitator(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && last != nil:
			p.log.Info("x402 facilitator answers: runs can be paid for again", "facilitator", p.cfg.FacilitatorURL)
		case err != nil && (last == nil || err.Error() != last.Error()):
			p.log.Warn("x402 facilitator: runs cannot be paid for", "err", err)
		}
		last = err
		if checked != nil {
			checked(err)
		}
	}
}
