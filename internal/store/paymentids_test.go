package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A payment id's life: claimed once, answered, returned to every later
// claim (with its fingerprint for the caller to compare) until it expires,
// per payer; an unanswered claim can be released and claimed again.
func TestPaymentIDLife(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, dsn := db.openTemp(t, c)
		ctx := context.Background()
		lease := c.Now().Add(10 * time.Minute)

		rec, claimed, err := s.ClaimPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1", lease)
		if err != nil || !claimed || rec.State != PaymentIDPending || !rec.Mine {
			t.Fatalf("first claim = %+v, %v, %v; want a pending claim", rec, claimed, err)
		}
		// A second claim, same or other fingerprint, gets the pending record.
		for _, fp := range []string{"fp1", "fp2"} {
			rec, claimed, err = s.ClaimPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", fp, lease)
			if err != nil || claimed || rec.State != PaymentIDPending || rec.Fingerprint != "fp1" {
				t.Fatalf("claim (%s) while pending = %+v, %v, %v", fp, rec, claimed, err)
			}
		}
		// The same id of another payer is another record.
		if _, claimed, err := s.ClaimPaymentID(ctx, "0xbbb", "pay_0123456789abcdef", "fp9", lease); err != nil || !claimed {
			t.Fatalf("other payer's claim = %v, %v; want claimed", claimed, err)
		}
		// Released, it can be claimed again; release needs the fingerprint.
		if err := s.ReleasePaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp2"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, _ := s.ClaimPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1", lease); claimed {
			t.Fatal("a release with another fingerprint dropped the claim")
		}
		if err := s.ReleasePaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, err := s.ClaimPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1", lease); err != nil || !claimed {
			t.Fatalf("claim after release = %v, %v; want claimed", claimed, err)
		}

		if err := s.FinishPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp2", 200, nil, []byte("x"), lease); !errors.Is(err, ErrNotPending) {
			t.Fatalf("finish with another fingerprint: %v, want ErrNotPending", err)
		}
		keep := c.Now().Add(24 * time.Hour)
		hdr, body := []byte(`{"Payment-Response":["abc"]}`), []byte(`{"ok":true}`)
		if err := s.FinishPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1", 200, hdr, body, keep); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1", 500, nil, nil, keep); !errors.Is(err, ErrNotPending) {
			t.Fatalf("second finish: %v, want ErrNotPending (a done record is never overwritten)", err)
		}
		if err := s.ReleasePaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1"); err != nil {
			t.Fatal(err)
		}

		// It survives a restart, and is returned, not claimed, until it expires.
		s.Close()
		s = reopen(t, dsn, c)
		c.Advance(24*time.Hour - time.Millisecond)
		rec, claimed, err = s.ClaimPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp1", c.Now().Add(time.Minute))
		if err != nil || claimed || rec.State != PaymentIDDone || rec.Status != 200 ||
			!bytes.Equal(rec.Header, hdr) || !bytes.Equal(rec.Body, body) {
			t.Fatalf("claim of a done id = %+v, %v, %v; want the kept answer", rec, claimed, err)
		}
		c.Advance(time.Millisecond)
		if _, claimed, err := s.ClaimPaymentID(ctx, "0xaaa", "pay_0123456789abcdef", "fp3", c.Now().Add(time.Minute)); err != nil || !claimed {
			t.Fatalf("claim of an expired id = %v, %v; want claimed", claimed, err)
		}

		// Prune deletes what is expired: 0xbbb's lease has ended.
		n, err := s.PrunePaymentIDs(ctx, c.Now())
		if err != nil || n != 1 {
			t.Fatalf("PrunePaymentIDs = %d, %v; want 1", n, err)
		}
		if _, err := s.GetPaymentID(ctx, "0xbbb", "pay_0123456789abcdef"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("pruned record: %v", err)
		}
	})
}

// Of many concurrent claims of one payment id, exactly one is claimed.
func TestPaymentIDClaimConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, _ := db.openTemp(t, c)
		ctx := context.Background()
		// An expired record first, so that the claims also race to replace it.
		if _, _, err := s.ClaimPaymentID(ctx, "0xaaa", "pay_concurrent_0001", "old", c.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		const goroutines = 32
		var (
			wg              sync.WaitGroup
			claimed, failed atomic.Int32
		)
		start := make(chan struct{})
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, ok, err := s.ClaimPaymentID(ctx, "0xaaa", "pay_concurrent_0001", "fp", c.Now().Add(time.Minute))
				if err != nil {
					t.Log(err)
					failed.Add(1)
				}
				if ok {
					claimed.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if failed.Load() != 0 || claimed.Load() != 1 {
			t.Fatalf("%d of %d concurrent claims won (%d errors), want exactly 1", claimed.Load(), goroutines, failed.Load())
		}
	})
}

// A record claimed by another node is not Mine.
func TestPaymentIDNode(t *testing.T) {
	c := newClock()
	dsn := postgresDB.dsn(t)
	a, err := Open(dsn, WithClock(c.Now), WithNode("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dsn, WithClock(c.Now), WithNode("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, ok, err := a.ClaimPaymentID(ctx, "0xaaa", "pay_node_000000001", "fp", c.Now().Add(time.Minute)); err != nil || !ok {
		t.Fatalf("claim on a: %v %v", ok, err)
	}
	rec, ok, err := b.ClaimPaymentID(ctx, "0xaaa", "pay_node_000000001", "fp", c.Now().Add(time.Minute))
	if err != nil || ok || rec.Mine || rec.Node != "a" {
		t.Fatalf("claim on b = %+v, %v, %v; want a's pending record, not mine", rec, ok, err)
	}
}
