package x402

import (
	"os"
	"strings"
	"testing"

	"boxer/internal/store"
	"boxer/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

// twoNodes are two payment layers, as two nodes have, whose used payments
// are kept in one Postgres database; both ask one facilitator.
func twoNodes(t *testing.T, fac *fakeFacilitator) (a, b *rig) {
	t.Helper()
	dsn := testenv.Postgres(t)
	open := func(name string) *store.Store {
		s, err := store.Open(dsn, store.WithNode(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return newRigOn(t, fac, 200, open("a")), newRigOn(t, fac, 200, open("b"))
}

// A payment used on one node is refused on the other, which runs nothing;
// it is verified and settled once.
func TestPaymentUsedOnceAcrossNodes(t *testing.T) {
	fac := newFakeFacilitator()
	a, b := twoNodes(t, fac)
	h := paidHeader(t, newWallet(t), a.offer)
	if w := a.do(h); w.Code != 200 {
		t.Fatalf("paid on a: %d %s", w.Code, w.Body)
	}
	if pr := challengeOf(t, b.do(h)); !strings.HasPrefix(pr.Error, ReasonReplay) {
		t.Fatalf("the same payment on b: %q, want a replay", pr.Error)
	}
	if a.handler.count() != 1 || b.handler.count() != 0 {
		t.Fatalf("runs: a %d, b %d", a.handler.count(), b.handler.count())
	}
	if nv, ns := fac.counts(); nv != 1 || ns != 1 {
		t.Fatalf("verify %d, settle %d, want 1 and 1", nv, ns)
	}
}

// The same payment sent to both nodes at once runs on one of them.
func TestPaymentRacedAcrossNodes(t *testing.T) {
	fac := newFakeFacilitator()
	a, b := twoNodes(t, fac)
	h := paidHeader(t, newWallet(t), a.offer)
	codes := make(chan int, 2)
	for _, n := range []*rig{a, b} {
		go func() { codes <- n.do(h).Code }()
	}
	ok := 0
	for range 2 {
		if <-codes == 200 {
			ok++
		}
	}
	if runs := a.handler.count() + b.handler.count(); ok != 1 || runs != 1 {
		t.Fatalf("%d answers 200, %d runs; want 1 and 1", ok, runs)
	}
	if _, ns := fac.counts(); ns != 1 {
		t.Fatalf("settled %d times", ns)
	}
}
