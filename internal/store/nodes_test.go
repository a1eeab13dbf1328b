package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// openNode opens the Postgres database dsn as node name.
func openNode(t *testing.T, dsn, name string, c *clock) *Store {
	t.Helper()
	s, err := Open(dsn, WithClock(c.Now), WithNode(name))
	if err != nil {
		t.Fatalf("Open as %s: %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Nodes starting at once on an empty database apply each migration once.
func TestNodesMigrateOnce(t *testing.T) {
	dsn, c := postgresDB.dsn(t), newClock()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dsn, WithClock(c.Now), WithNode(fmt.Sprint("node-", i)))
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := openNode(t, dsn, "check", c)
	var rows int
	if err := s.c().queryRow(context.Background(), `SELECT COUNT(*) FROM schema_version`).Scan(&rows); err != nil || rows != len(pgMigrations) {
		t.Fatalf("%d schema_version rows (%v), want %d", rows, err, len(pgMigrations))
	}
}

// A node that starts again releases its own unfinished jobs and loses
// its own open sessions, and nothing of another node's.
func TestNodesCleanUpTheirOwn(t *testing.T) {
	dsn, c, ctx := postgresDB.dsn(t), newClock(), context.Background()
	a, b := openNode(t, dsn, "a", c), openNode(t, dsn, "b", c)
	for _, n := range []struct {
		s  *Store
		id string
	}{{a, "a"}, {b, "b"}} {
		if _, claimed, err := n.s.Claim(ctx, "job-"+n.id, "h"); err != nil || !claimed {
			t.Fatalf("claim on %s: %v %v", n.id, claimed, err)
		}
		if err := n.s.AddSession(ctx, "ses-"+n.id, "", c.Now()); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	a = openNode(t, dsn, "a", c)
	if n, err := a.LoseOpenSessions(ctx, c.Now()); err != nil || n != 1 {
		t.Fatalf("LoseOpenSessions on a: %d %v, want 1", n, err)
	}
	if _, err := b.Get(ctx, "job-a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a's running job after a restarted: %v, want released", err)
	}
	if rec, err := a.Get(ctx, "job-b"); err != nil || rec.State != JobRunning {
		t.Errorf("b's running job after a restarted: %+v %v, want running", rec, err)
	}
	if r, found, err := b.Session(ctx, "ses-a"); err != nil || !found || r.EndReason != SessionLost {
		t.Errorf("a's session: %+v %v %v, want lost", r, found, err)
	}
	if r, found, err := a.Session(ctx, "ses-b"); err != nil || !found || !r.EndedAt.IsZero() {
		t.Errorf("b's session: %+v %v %v, want open", r, found, err)
	}
}

// One job_id sent to many nodes at once is claimed by one of them.
func TestNodesClaimOnce(t *testing.T) {
	dsn, c, ctx := postgresDB.dsn(t), newClock(), context.Background()
	nodes := []*Store{openNode(t, dsn, "a", c), openNode(t, dsn, "b", c), openNode(t, dsn, "c", c)}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners int
	)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, claimed, err := nodes[i%len(nodes)].Claim(ctx, "shared", "h")
			if err != nil {
				t.Error(err)
			}
			if claimed {
				mu.Lock()
				winners++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if winners != 1 {
		t.Fatalf("%d claims won, want 1", winners)
	}
}
