package store

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A sign-in nonce is accepted once: not again, not after a restart, not
// once expired, not if never issued; and of many concurrent uses exactly
// one wins.
func TestSignInNonces(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		use := func(nonce, want string) {
			t.Helper()
			got, err := s.UseSignInNonce(ctx, nonce, c.Now())
			if err != nil || got != want {
				t.Fatalf("UseSignInNonce(%s) = %q, %v; want %q", nonce, got, err, want)
			}
		}
		for _, n := range []string{"a1", "a2", "a3"} {
			if err := s.IssueSignInNonce(ctx, n, c.Now(), c.Now().Add(5*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.IssueSignInNonce(ctx, "a1", c.Now(), c.Now().Add(time.Minute)); err == nil {
			t.Fatal("a nonce issued twice was accepted")
		}
		use("never-issued", SignInNonceUnknown)
		use("a1", SignInNonceFresh)
		use("a1", SignInNonceUsed)

		s.Close()
		s = reopen(t, path, c)
		use("a1", SignInNonceUsed)
		use("a2", SignInNonceFresh)

		c.Advance(5 * time.Minute) // a3 expires at exactly this instant
		use("a3", SignInNonceExpired)
		use("a2", SignInNonceUsed)

		c.Advance(time.Millisecond)
		if err := s.IssueSignInNonce(ctx, "b1", c.Now(), c.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		n, err := s.PruneSignInNonces(ctx, c.Now())
		if err != nil || n != 3 {
			t.Fatalf("PruneSignInNonces = %d, %v; want 3 (a1 a2 a3, not b1)", n, err)
		}
		use("a1", SignInNonceUnknown)
		use("a3", SignInNonceUnknown)

		// Many at once, as from many nodes: one wins.
		if err := s.IssueSignInNonce(ctx, "race", c.Now(), c.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		const tries = 16
		var wg sync.WaitGroup
		got := make([]string, tries)
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, err := s.UseSignInNonce(ctx, "race", c.Now())
				if err != nil {
					o = err.Error()
				}
				got[i] = o
			}()
		}
		wg.Wait()
		fresh := 0
		for _, o := range got {
			switch o {
			case SignInNonceFresh:
				fresh++
			case SignInNonceUsed:
			default:
				t.Fatalf("concurrent use: %q", o)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d of %d concurrent uses were fresh, want 1", fresh, tries)
		}
	})
}
