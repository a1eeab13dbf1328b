package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestUseNonce(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		steps := []struct {
			name, payer, nonce string
			want               bool
		}{
			{"first use", "0xaaa", "n1", true},
			{"second use", "0xaaa", "n1", false},
			{"same nonce, other payer", "0xbbb", "n1", true},
			{"other nonce", "0xaaa", "n2", true},
		}
		for _, st := range steps {
			fresh, err := s.UseNonce(ctx, st.payer, st.nonce)
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if fresh != st.want {
				t.Fatalf("%s: UseNonce(%s, %s) = %v, want %v", st.name, st.payer, st.nonce, fresh, st.want)
			}
		}

		s.Close()
		s = reopen(t, path, c)
		if fresh, err := s.UseNonce(ctx, "0xaaa", "n1"); err != nil || fresh {
			t.Fatalf("after reopen, UseNonce of a used nonce = %v, %v; want false", fresh, err)
		}

		if err := s.ReleaseNonce(ctx, "0xaaa", "n1"); err != nil {
			t.Fatal(err)
		}
		if fresh, err := s.UseNonce(ctx, "0xaaa", "n1"); err != nil || !fresh {
			t.Fatalf("after ReleaseNonce, UseNonce = %v, %v; want true", fresh, err)
		}

		c.Advance(time.Hour)
		if fresh, err := s.UseNonce(ctx, "0xaaa", "n3"); err != nil || !fresh {
			t.Fatalf("UseNonce(n3) = %v, %v", fresh, err)
		}
		n, err := s.PruneNonces(ctx, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		if n != 3 { // (0xaaa,n1) (0xbbb,n1) (0xaaa,n2); n3 is at the cutoff
			t.Fatalf("PruneNonces removed %d, want 3", n)
		}
		if fresh, _ := s.UseNonce(ctx, "0xaaa", "n3"); fresh {
			t.Fatal("prune removed a nonce used at the cutoff")
		}
	})
}

func TestUseNonceConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		s, _ := db.openTemp(t, newClock())
		ctx := context.Background()
		const goroutines = 32
		var (
			wg    sync.WaitGroup
			fresh atomic.Int32
			fails atomic.Int32
		)
		start := make(chan struct{})
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := s.UseNonce(ctx, "0xaaa", "same")
				if err != nil {
					fails.Add(1)
				}
				if ok {
					fresh.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if fails.Load() != 0 || fresh.Load() != 1 {
			t.Fatalf("%d of %d concurrent UseNonce saw fresh (%d errors), want exactly 1", fresh.Load(), goroutines, fails.Load())
		}
	})
}
