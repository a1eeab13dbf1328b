package store

import (
	"context"
	"testing"
	"time"
)

func TestStatsExact(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		t0 := c.Now()
		ms := time.Millisecond
		calls := []Call{
			// 40 days ago: outside the 30-day window, still in the totals.
			{At: t0.Add(-40 * 24 * time.Hour), Route: "/v1/exec", Status: 200, Ran: true, Duration: 900 * ms, Payer: "0xold"},
			{At: t0.Add(-3 * time.Hour), Route: "/v1/exec", Status: 200, Ran: true, Duration: 100 * ms, Payer: "0xaaa"},
			{At: t0.Add(-2 * time.Hour), Route: "/v1/exec", Status: 200, Ran: true, Duration: 300 * ms, Payer: "0xbbb"},
			{At: t0.Add(-time.Hour), Route: "/v1/run-python", Status: 200, Ran: true, Duration: 200 * ms, Payer: "0xaaa"},
			{At: t0.Add(-50 * time.Minute), Route: "/v1/run-python", Status: 200, Ran: false, Duration: 2 * ms}, // replay
			{At: t0.Add(-40 * time.Minute), Route: "/v1/exec", Status: 400, Ran: false, Duration: 1 * ms},       // caller's mistake
			{At: t0.Add(-30 * time.Minute), Route: "/v1/exec", Status: 503, Ran: false, Duration: 1 * ms},       // busy
			{At: t0.Add(-20 * time.Minute), Route: "/v1/exec", Status: 500, Ran: true, Duration: 400 * ms},      // engine failed
			{At: t0.Add(-10 * time.Minute), Route: "/v1/exec", Status: 200, Ran: true, Duration: 50 * ms, Payer: ""},
		}
		for _, call := range calls {
			if err := s.RecordCall(ctx, call); err != nil {
				t.Fatal(err)
			}
		}
		since := t0.Add(-30 * 24 * time.Hour)
		check := func(t *testing.T, s *Store, recent int, want Stats) {
			t.Helper()
			got, err := s.Stats(ctx, since, recent)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("Stats(recent=%d) =\n %+v\nwant\n %+v", recent, got, want)
			}
		}
		last := t0.Add(-10 * time.Minute)

		// All calls but the 400: 200 (old), 200, 200, 200, 200 (replay), 503,
		// 500, 200: 6 successes of 8. Ran durations: 900,100,300,200,400,50 ms,
		// sorted 50,100,200,300,400,900: nearest-rank median is the 3rd = 200.
		all := Stats{
			RunsTotal: 6, SuccessRate: 6.0 / 8, RateSample: 8,
			P50: 200 * ms, P50Sample: 6,
			Calls: 8, UniquePayers: 2, LastCalledAt: last,
		}
		t.Run("all recent", func(t *testing.T) { check(t, s, 1000, all) })

		// The last 3 rate-relevant calls are 503, 500, 200; the last 3 runs are
		// 200 ms, 400 ms, 50 ms: median 200 ms.
		last3 := all
		last3.SuccessRate, last3.RateSample = 1.0/3, 3
		last3.P50, last3.P50Sample = 200*ms, 3
		t.Run("last 3", func(t *testing.T) { check(t, s, 3, last3) })

		// Pruning the 40-day-old call leaves the all-time figures alone.
		n, err := s.PruneCalls(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("PruneCalls removed %d, want 1", n)
		}
		pruned := all
		pruned.SuccessRate, pruned.RateSample = 5.0/7, 7
		pruned.P50, pruned.P50Sample = 200*ms, 5 // 50,100,200,300,400
		t.Run("after prune", func(t *testing.T) { check(t, s, 1000, pruned) })

		// Pruning everything keeps RunsTotal and LastCalledAt.
		if _, err := s.PruneCalls(ctx, t0); err != nil {
			t.Fatal(err)
		}
		empty := Stats{RunsTotal: 6, LastCalledAt: last}
		t.Run("all pruned", func(t *testing.T) { check(t, s, 1000, empty) })

		s.Close()
		s2 := reopen(t, path, c)
		t.Run("after reopen", func(t *testing.T) { check(t, s2, 1000, empty) })
	})
}

func TestStatsEmpty(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		s, _ := db.openTemp(t, newClock())
		got, err := s.Stats(context.Background(), time.Time{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got != (Stats{}) {
			t.Fatalf("Stats of an empty store = %+v, want zero", got)
		}
		if _, err := s.Stats(context.Background(), time.Time{}, 0); err == nil {
			t.Fatal("Stats(recent=0) succeeded, want an error")
		}
	})
}

// Calls are written in batches, and none is lost to the batching: Stats
// counts the calls recorded just before it, and Close writes what waits,
// so a reopened store has every call.
func TestCallsBatched(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		for i := range callBatch + 10 { // one full batch, written at once, and ten waiting
			if err := s.RecordCall(ctx, Call{At: c.Now(), Route: "/v1/exec", Status: 200, Ran: i%2 == 0, Duration: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := s.Stats(ctx, c.Now().Add(-time.Hour), 10000)
		if err != nil {
			t.Fatal(err)
		}
		if st.Calls != callBatch+10 {
			t.Fatalf("Stats counted %d calls, want %d", st.Calls, callBatch+10)
		}
		if err := s.RecordCall(ctx, Call{At: c.Now(), Route: "/v1/exec", Status: 500}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		st, err = reopen(t, path, c).Stats(ctx, c.Now().Add(-time.Hour), 10000)
		if err != nil {
			t.Fatal(err)
		}
		if st.Calls != callBatch+11 {
			t.Fatalf("after Close and Open: %d calls, want %d", st.Calls, callBatch+11)
		}
	})
}
