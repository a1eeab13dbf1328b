package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// JobState is where a job record is in its life.
type JobState string

const (
	// JobRunning: claimed by a request whose run has not finished.
	JobRunning JobState = "running"
	// JobDone: finished; Response holds what the caller was sent.
	JobDone JobState = "done"
)

// JobRecord is one job_id's row.
type JobRecord struct {
	JobID string
	// RequestHash identifies the request that claimed the job_id. A later
	// request with the same job_id must carry the same hash.
	RequestHash string
	State       JobState
	// Response is the stored response body, nil while running, and Status
	// the HTTP status it is sent with.
	Response   []byte
	Status     int
	CreatedAt  time.Time
	FinishedAt time.Time // zero while running
	Node       string    // the node that claimed it
}

// claimAttempts bounds Claim's retries. A retry is needed only when the row
// Claim collided with was released before it could be read, which takes a
// run failing in that instant; more than a few in a row means a bug.
const claimAttempts = 8

// Claim takes jobID for a request whose canonical form hashes to reqHash.
//
//   - No record: a running record is inserted and claimed is true; the caller
//     must run the job, then Finish or Release it.
//   - A record with the same hash, running or done: it is returned with
//     claimed false; the caller must not run the job.
//   - A record with another hash: it is returned with ErrJobConflict.
//
// The insert is one statement guarded by the primary key, so among any number
// of concurrent Claims of one jobID, in any number of goroutines, exactly one
// is claimed.
func (s *Store) Claim(ctx context.Context, jobID, reqHash string) (rec *JobRecord, claimed bool, err error) {
	for range claimAttempts {
		now := s.now()
		res, err := s.c().exec(ctx, `
INSERT INTO jobs (job_id, request_hash, state, created_at, node) VALUES (?, ?, 'running', ?, ?)
ON CONFLICT (job_id) DO NOTHING`, jobID, reqHash, unixMilli(now), s.node)
		if err != nil {
			return nil, false, fmt.Errorf("store: claim job %q: %w", jobID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, false, fmt.Errorf("store: claim job %q: %w", jobID, err)
		}
		if n == 1 {
			return &JobRecord{
				JobID:       jobID,
				RequestHash: reqHash,
				State:       JobRunning,
				CreatedAt:   fromUnixMilli(unixMilli(now)),
				Node:        s.node,
			}, true, nil
		}
		rec, err := s.Get(ctx, jobID)
		if errors.Is(err, ErrNotFound) {
			continue // released between our insert and read: try again
		}
		if err != nil {
			return nil, false, err
		}
		if rec.RequestHash != reqHash {
			return rec, false, ErrJobConflict
		}
		return rec, false, nil
	}
	return nil, false, fmt.Errorf("store: claim job %q: still contended after %d attempts", jobID, claimAttempts)
}

// Finish stores the response of a claimed job, to be sent with status, and
// marks it done. It fails with ErrNotRunning when jobID is not running
// (never claimed, released, or already finished): a done record is never
// overwritten.
//
// Stored responses together are kept within the store's result budget
// (WithResultBudget): when this one would pass it, the oldest done records
// are deleted until it fits, as the retention deletes them by age. A
// deleted job_id is unknown again: GET answers 404 and a POST runs it anew.
func (s *Store) Finish(ctx context.Context, jobID string, status int, response []byte) (retErr error) {
	if response == nil {
		response = []byte{} // the schema tells done rows by a non-NULL response
	}
	tx, err := s.begin(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: finish job %q: %w", jobID, err)
	}
	defer func() {
		if retErr != nil {
			_ = tx.Rollback()
		}
	}()
	// The update comes first: it takes the write lock, so that no other
	// writer commits between the budget's reads and its deletes.
	res, err := tx.exec(ctx, `
UPDATE jobs SET state = 'done', response = ?, status = ?, finished_at = ?
WHERE job_id = ? AND state = 'running'`, response, status, unixMilli(s.now()), jobID)
	if err != nil {
		return fmt.Errorf("store: finish job %q: %w", jobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: finish job %q: %w", jobID, err)
	}
	if n == 0 {
		return fmt.Errorf("store: finish job %q: %w", jobID, ErrNotRunning)
	}
	if err := s.keepBudget(ctx, tx, jobID); err != nil {
		return fmt.Errorf("store: finish job %q: %w", jobID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: finish job %q: %w", jobID, err)
	}
	return nil
}

// keepBudget deletes the oldest done records but keep until the stored
// responses fit the result budget.
func (s *Store) keepBudget(ctx context.Context, tx *txn, keep string) error {
	var total int64
	if err := tx.queryRow(ctx, `SELECT COALESCE(SUM(length(response)), 0) FROM jobs WHERE state = 'done'`).Scan(&total); err != nil {
		return err
	}
	if total <= s.resultBudget {
		return nil
	}
	rows, err := tx.query(ctx, `
SELECT job_id, length(response) FROM jobs WHERE state = 'done' AND job_id != ? ORDER BY finished_at, job_id`, keep)
	if err != nil {
		return err
	}
	var drop []string
	for total > s.resultBudget && rows.Next() {
		var id string
		var size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return err
		}
		drop, total = append(drop, id), total-size
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range drop {
		if _, err := tx.exec(ctx, `DELETE FROM jobs WHERE job_id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// Release drops a running claim so that a retry can run the job: for runs
// that failed for a reason of boxer's own, or that the client cancelled. A
// done record is left alone, and releasing an unknown job is not an error.
func (s *Store) Release(ctx context.Context, jobID string) error {
	if _, err := s.c().exec(ctx, `DELETE FROM jobs WHERE job_id = ? AND state = 'running'`, jobID); err != nil {
		return fmt.Errorf("store: release job %q: %w", jobID, err)
	}
	return nil
}

// Get returns jobID's record, or ErrNotFound.
func (s *Store) Get(ctx context.Context, jobID string) (*JobRecord, error) {
	var (
		rec      JobRecord
		state    string
		created  int64
		finished sql.NullInt64
	)
	err := s.c().queryRow(ctx, `
SELECT job_id, request_hash, state, response, status, created_at, finished_at, node FROM jobs WHERE job_id = ?`, jobID).
		Scan(&rec.JobID, &rec.RequestHash, &state, &rec.Response, &rec.Status, &created, &finished, &rec.Node)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: job %q: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get job %q: %w", jobID, err)
	}
	rec.State = JobState(state)
	rec.CreatedAt = fromUnixMilli(created)
	if finished.Valid {
		rec.FinishedAt = fromUnixMilli(finished.Int64)
	}
	return &rec, nil
}

// PruneJobs deletes done records finished before olderThan and reports how
// many. Running records are never pruned: their run may still finish.
func (s *Store) PruneJobs(ctx context.Context, olderThan time.Time) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM jobs WHERE state = 'done' AND finished_at < ?`, unixMilli(olderThan))
	if err != nil {
		return 0, fmt.Errorf("store: prune jobs: %w", err)
	}
	return res.RowsAffected()
}

// releaseAllRunning drops every running claim. Open calls it on a SQLite
// file: a record still running when the process starts belongs to a run
// that died with the previous process, and a retry must be able to run
// it. (On a shared database a node ends its own with EndOwn instead.)
func (s *Store) releaseAllRunning(ctx context.Context) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM jobs WHERE state = 'running'`)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
