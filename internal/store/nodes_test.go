package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
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

// A node that starts again ends its own unfinished jobs (done, with the
// failure given) and loses its own open sessions, and nothing of another
// node's; a node not seen for long enough has its own ended by another,
// and is forgotten.
func TestNodesEndTheirOwnAndTheDead(t *testing.T) {
	dsn, c, ctx := postgresDB.dsn(t), newClock(), context.Background()
	a, b, d := openNode(t, dsn, "a", c), openNode(t, dsn, "b", c), openNode(t, dsn, "d", c)
	for _, n := range []struct {
		s  *Store
		id string
	}{{a, "a"}, {b, "b"}, {d, "d"}} {
		if err := n.s.Heartbeat(ctx, n.id+":8080"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, err := n.s.Claim(ctx, "job-"+n.id, "h"); err != nil || !claimed {
			t.Fatalf("claim on %s: %v %v", n.id, claimed, err)
		}
		if err := n.s.AddSession(ctx, "ses-"+n.id, "", "anon:127.0.0.1", c.Now()); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	a = openNode(t, dsn, "a", c)
	if e, err := a.EndOwn(ctx, 500, []byte(`{"lost":"a"}`)); err != nil || e.Jobs != 1 || e.Sessions != 1 {
		t.Fatalf("EndOwn on a: %+v %v, want a job and a session", e, err)
	}
	if rec, err := b.Get(ctx, "job-a"); err != nil || rec.State != JobDone || rec.Status != 500 || string(rec.Response) != `{"lost":"a"}` {
		t.Errorf("a's running job after a restarted: %+v %v, want done with the failure", rec, err)
	}
	if r, found, err := b.Session(ctx, "ses-a"); err != nil || !found || r.EndReason != SessionLost {
		t.Errorf("a's session: %+v %v %v, want lost", r, found, err)
	}

	// d stops; b and a go on being seen; past the cutoff, a ends d's.
	c.Advance(time.Minute)
	for _, s := range []*Store{a, b} {
		if err := s.Heartbeat(ctx, s.Node()+":8080"); err != nil {
			t.Fatal(err)
		}
	}
	e, err := a.EndDeadNodes(ctx, c.Now().Add(-30*time.Second), 500, []byte(`{"lost":"d"}`))
	if err != nil || fmt.Sprint(e.Nodes) != "[d]" || e.Jobs != 1 || e.Sessions != 1 {
		t.Fatalf("EndDeadNodes: %+v %v, want d's job and session", e, err)
	}
	if rec, err := b.Get(ctx, "job-d"); err != nil || rec.State != JobDone || string(rec.Response) != `{"lost":"d"}` {
		t.Errorf("d's job: %+v %v", rec, err)
	}
	if rec, err := a.Get(ctx, "job-b"); err != nil || rec.State != JobRunning || rec.Node != "b" {
		t.Errorf("b's running job: %+v %v, want running on b", rec, err)
	}
	if r, _, err := a.Session(ctx, "ses-b"); err != nil || !r.EndedAt.IsZero() {
		t.Errorf("b's session: %+v %v, want open", r, err)
	}
	// d is forgotten: its session's place has no address; b's has.
	for id, want := range map[string]string{"ses-b": "b b:8080 true true", "ses-d": "d  false true", "ses-x": "  false false"} {
		node, addr, open, found, err := a.SessionPlace(ctx, id)
		if got := fmt.Sprint(node, " ", addr, " ", open, " ", found); err != nil || got != want {
			t.Errorf("SessionPlace(%s) = %q %v, want %q", id, got, err, want)
		}
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

// A key's calls are counted a minute at a time across the nodes: its rate
// holds whichever node each call reaches.
func TestNodesShareKeyRate(t *testing.T) {
	dsn, c, ctx := postgresDB.dsn(t), newClock(), context.Background()
	a, b := openNode(t, dsn, "a", c), openNode(t, dsn, "b", c)
	at := time.Date(2026, 12, 3, 9, 0, 10, 0, time.UTC)
	for i, n := range []*Store{a, b, a} {
		if _, ok, err := n.TakeKeyCall(ctx, "k1", 3, at); err != nil || !ok {
			t.Fatalf("call %d: %v %v", i, ok, err)
		}
	}
	wait, ok, err := b.TakeKeyCall(ctx, "k1", 3, at)
	if err != nil || ok || wait != 50*time.Second {
		t.Fatalf("the fourth call in a minute: wait %s, ok %v, %v; want refused for 50s", wait, ok, err)
	}
	if _, ok, err := b.TakeKeyCall(ctx, "k2", 3, at); err != nil || !ok {
		t.Fatalf("another key: %v %v", ok, err)
	}
	if _, ok, err := a.TakeKeyCall(ctx, "k1", 3, at.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("the next minute: %v %v", ok, err)
	}
	if n, err := a.PruneKeyMinutes(ctx, at.Add(time.Minute)); err != nil || n != 2 {
		t.Fatalf("prune: %d %v, want the first minute's 2 rows", n, err)
	}
}
