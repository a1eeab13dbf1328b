package store

import (
	"context"
	"testing"
	"time"
)

// A session's record: open, ended once (the first end stands), lost with
// the rest at a restart, pruned once old.
func TestSessionRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, _ := db.openTemp(t, c)
		ctx := context.Background()
		for _, id := range []string{"ses_a", "ses_b", "ses_c"} {
			if err := s.AddSession(ctx, id, "key:k1", "key:k1", c.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if r, found, err := s.Session(ctx, "ses_a"); err != nil || !found || r.Owner != "key:k1" || !r.EndedAt.IsZero() {
			t.Fatalf("open session: %+v %v %v", r, found, err)
		}
		if _, found, err := s.Session(ctx, "ses_none"); err != nil || found {
			t.Fatalf("unknown session: found %v, %v", found, err)
		}
		c.Advance(time.Minute)
		if err := s.EndSession(ctx, "ses_a", "idle for 10m0s", c.Now()); err != nil {
			t.Fatal(err)
		}
		ended := c.Now()
		c.Advance(time.Minute)
		if err := s.EndSession(ctx, "ses_a", "deleted", c.Now()); err != nil {
			t.Fatal(err)
		}
		if r, _, _ := s.Session(ctx, "ses_a"); r.EndReason != "idle for 10m0s" || !r.EndedAt.Equal(ended.UTC().Truncate(time.Millisecond)) {
			t.Fatalf("ended twice: %+v", r)
		}
		if n, err := s.LoseOpenSessions(ctx, c.Now()); err != nil || n != 2 {
			t.Fatalf("LoseOpenSessions = %d, %v; want the two open", n, err)
		}
		if r, _, _ := s.Session(ctx, "ses_b"); r.EndReason != SessionLost {
			t.Fatalf("lost session: %+v", r)
		}
		if n, err := s.PruneSessions(ctx, ended.Add(time.Second)); err != nil || n != 1 {
			t.Fatalf("PruneSessions = %d, %v; want ses_a alone", n, err)
		}
	})
}
