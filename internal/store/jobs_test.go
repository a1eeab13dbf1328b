package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestClaimFinishGet(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, _ := db.openTemp(t, c)
		ctx := context.Background()

		rec, claimed, err := s.Claim(ctx, "job-1", "hash-a")
		if err != nil || !claimed {
			t.Fatalf("first Claim = %v, %v; want claimed", claimed, err)
		}
		if rec.State != JobRunning || rec.RequestHash != "hash-a" || !rec.CreatedAt.Equal(c.Now()) {
			t.Fatalf("claimed record = %+v", rec)
		}

		tests := []struct {
			name        string
			hash        string
			wantClaimed bool
			wantErr     error
			wantState   JobState
		}{
			{"same request while running", "hash-a", false, nil, JobRunning},
			{"other request while running", "hash-b", false, ErrJobConflict, JobRunning},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				rec, claimed, err := s.Claim(ctx, "job-1", tt.hash)
				if claimed != tt.wantClaimed || !errors.Is(err, tt.wantErr) {
					t.Fatalf("Claim = %v, %v; want %v, %v", claimed, err, tt.wantClaimed, tt.wantErr)
				}
				if rec == nil || rec.State != tt.wantState {
					t.Fatalf("record = %+v, want state %s", rec, tt.wantState)
				}
			})
		}

		c.Advance(1500 * time.Millisecond)
		response := []byte(`{"job_id":"job-1","exit_code":0}`)
		if err := s.Finish(ctx, "job-1", 200, response); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, "job-1", 200, []byte(`{}`)); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("second Finish = %v, want ErrNotRunning", err)
		}

		got, err := s.Get(ctx, "job-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != JobDone || string(got.Response) != string(response) || !got.FinishedAt.Equal(c.Now()) {
			t.Fatalf("Get after Finish = %+v", got)
		}

		rec, claimed, err = s.Claim(ctx, "job-1", "hash-a")
		if err != nil || claimed || rec.State != JobDone || string(rec.Response) != string(response) {
			t.Fatalf("Claim of a done job = %+v, %v, %v; want the stored record", rec, claimed, err)
		}
		if _, _, err := s.Claim(ctx, "job-1", "hash-b"); !errors.Is(err, ErrJobConflict) {
			t.Fatalf("Claim of a done job with another hash = %v, want ErrJobConflict", err)
		}

		if err := s.Release(ctx, "job-1"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "job-1"); err != nil || got.State != JobDone {
			t.Fatalf("Release removed a done job: %+v, %v", got, err)
		}
	})
}

func TestGetUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		s, _ := db.openTemp(t, newClock())
		if _, err := s.Get(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(unknown) = %v, want ErrNotFound", err)
		}
		if err := s.Finish(context.Background(), "nope", 200, []byte(`{}`)); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("Finish(unknown) = %v, want ErrNotRunning", err)
		}
		if err := s.Release(context.Background(), "nope"); err != nil {
			t.Fatalf("Release(unknown) = %v, want nil", err)
		}
	})
}

func TestReleaseLetsARetryRun(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		s, _ := db.openTemp(t, newClock())
		ctx := context.Background()
		if _, claimed, err := s.Claim(ctx, "j", "h"); err != nil || !claimed {
			t.Fatalf("Claim = %v, %v", claimed, err)
		}
		if err := s.Release(ctx, "j"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "j"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Release = %v, want ErrNotFound", err)
		}
		// After a release, even a different request may take the id.
		if _, claimed, err := s.Claim(ctx, "j", "other"); err != nil || !claimed {
			t.Fatalf("Claim after Release = %v, %v; want claimed", claimed, err)
		}
	})
}

func TestConcurrentClaimOneWinner(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		s, _ := db.openTemp(t, newClock())
		ctx := context.Background()
		const goroutines = 32
		for round := range 5 {
			jobID := fmt.Sprintf("job-%d", round)
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners int
				errs    []error
			)
			start := make(chan struct{})
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, claimed, err := s.Claim(ctx, jobID, "h")
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs = append(errs, err)
					}
					if claimed {
						winners++
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("round %d: Claim errors: %v", round, errs)
			}
			if winners != 1 {
				t.Fatalf("round %d: %d goroutines claimed %s, want exactly 1", round, winners, jobID)
			}
		}
	})
}

func TestRecordsSurviveReopen(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		for _, id := range []string{"done-1", "done-2", "running-1"} {
			if _, claimed, err := s.Claim(ctx, id, "h-"+id); err != nil || !claimed {
				t.Fatalf("Claim(%s) = %v, %v", id, claimed, err)
			}
		}
		for _, id := range []string{"done-1", "done-2"} {
			if err := s.Finish(ctx, id, 200, []byte(`{"id":"`+id+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		s.Close() // as if the process died with running-1 in flight

		s2 := reopen(t, path, c)
		for _, id := range []string{"done-1", "done-2"} {
			rec, err := s2.Get(ctx, id)
			if err != nil {
				t.Fatalf("after reopen, Get(%s): %v", id, err)
			}
			if rec.State != JobDone || string(rec.Response) != `{"id":"`+id+`"}` || rec.RequestHash != "h-"+id {
				t.Fatalf("after reopen, %s = %+v", id, rec)
			}
		}
		if s2.Shared() {
			return // a node's unfinished jobs are EndOwn's (TestNodesEndTheirOwnAndTheDead)
		}
		if _, err := s2.Get(ctx, "running-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after reopen, running job = %v, want released (ErrNotFound)", err)
		}
		if _, claimed, err := s2.Claim(ctx, "running-1", "h-running-1"); err != nil || !claimed {
			t.Fatalf("retry of the released job: Claim = %v, %v; want claimed", claimed, err)
		}
	})
}

func TestPruneJobs(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, _ := db.openTemp(t, c)
		ctx := context.Background()
		claimFinish := func(id string) {
			t.Helper()
			if _, _, err := s.Claim(ctx, id, "h"); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(ctx, id, 200, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		claimFinish("old")
		if _, _, err := s.Claim(ctx, "old-running", "h"); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
		cutoff := c.Now()
		claimFinish("at-cutoff")
		c.Advance(time.Hour)
		claimFinish("new")

		n, err := s.PruneJobs(ctx, cutoff)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("PruneJobs removed %d, want 1", n)
		}
		want := map[string]bool{"old": false, "old-running": true, "at-cutoff": true, "new": true}
		for id, kept := range want {
			_, err := s.Get(ctx, id)
			if got := err == nil; got != kept {
				t.Errorf("%s kept = %v, want %v (err %v)", id, got, kept, err)
			}
		}
	})
}

// The stored responses stay within the result budget: a Finish that would
// pass it deletes the oldest done records until it fits, never a running
// one and never its own, and keeps each record's status.
func TestResultBudget(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		path := filepath.Join(t.TempDir(), "boxer.db")
		s, err := Open(path, WithClock(c.Now), WithResultBudget(250))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		finish := func(id string, status, size int) {
			t.Helper()
			if _, _, err := s.Claim(ctx, id, "h"); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Second)
			if err := s.Finish(ctx, id, status, make([]byte, size)); err != nil {
				t.Fatal(err)
			}
		}
		finish("a", 200, 100)
		finish("b", 410, 100)
		if _, _, err := s.Claim(ctx, "running", "h"); err != nil {
			t.Fatal(err)
		}
		finish("c", 200, 100)   // 300 > 250: a, the oldest, goes
		finish("big", 200, 400) // alone past the budget: every other done record goes, it stays
		want := map[string]int{"a": 0, "b": 0, "c": 0, "running": -1, "big": 200}
		finish("d", 410, 10) // and now big goes
		want["big"], want["d"] = 0, 410
		for id, status := range want {
			rec, err := s.Get(ctx, id)
			switch {
			case status == 0 && !errors.Is(err, ErrNotFound):
				t.Errorf("%s: %+v, %v; want it deleted", id, rec, err)
			case status == -1 && (err != nil || rec.State != JobRunning):
				t.Errorf("%s: %+v, %v; want it running", id, rec, err)
			case status > 0 && (err != nil || rec.Status != status):
				t.Errorf("%s: %+v, %v; want status %d", id, rec, err, status)
			}
		}
	})
}
