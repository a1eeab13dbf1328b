package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Call is one API call, recorded for GET /v1/health.
type Call struct {
	At    time.Time
	Route string
	// Status is the HTTP status the caller got. The success rate counts
	// below 400 as success and 500 and above as failure; 4xx are the
	// caller's mistakes and count as neither.
	Status int
	// Ran reports that a sandbox ran the program for this call (not a
	// rejected request, not a replay of a stored result).
	Ran bool
	// Duration is the whole call's latency, queueing included.
	Duration time.Duration
	// Payer is the address that paid for the call; empty when free.
	Payer string
	// Key is the id of the API key the call came with, whose use it
	// counts (Key.Calls, Key.LastUsedAt); empty without one.
	Key string
}

// Calls are written in batches: one transaction per batch instead of one
// per call, whose commit (and its fsync) cost the request path about a
// tenth of the server's CPU per call under load. A call waits in memory
// at most callFlushDelay, or until callBatch are waiting; Stats and Close
// write what waits first, so the figures count every call made before
// them. A crash loses at most the calls of the last callFlushDelay: the
// figures of GET /v1/health, not anyone's result.
const (
	callFlushDelay = 100 * time.Millisecond
	callBatch      = 256
)

// callBuffer holds the calls not yet written.
type callBuffer struct {
	mu      sync.Mutex
	pending []Call
	timer   *time.Timer
	err     error // the last background write's failure, for the next RecordCall
}

// RecordCall appends c to the call log (see callBuffer). Its error is a
// write's: this call's batch when it filled one, or the last background
// write's, which nobody else could be told of.
func (s *Store) RecordCall(ctx context.Context, c Call) error {
	b := &s.calls
	b.mu.Lock()
	b.pending = append(b.pending, c)
	n, err := len(b.pending), b.err
	b.err = nil
	if n == 1 {
		b.timer = time.AfterFunc(callFlushDelay, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.FlushCalls(ctx); err != nil {
				b.mu.Lock()
				b.err = err
				b.mu.Unlock()
			}
		})
	}
	b.mu.Unlock()
	if n >= callBatch {
		err = errors.Join(err, s.FlushCalls(ctx))
	}
	return err
}

// FlushCalls writes the calls RecordCall holds, in one transaction.
func (s *Store) FlushCalls(ctx context.Context) error {
	b := &s.calls
	b.mu.Lock()
	calls := b.pending
	b.pending = nil
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	if len(calls) == 0 {
		return nil
	}
	if err := s.writeCalls(ctx, calls); err != nil {
		return fmt.Errorf("store: record %d calls: %w", len(calls), err)
	}
	return nil
}

func (s *Store) writeCalls(ctx context.Context, calls []Call) (retErr error) {
	tx, err := s.begin(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			_ = tx.Rollback()
		}
	}()
	stmt, err := tx.PrepareContext(ctx, tx.d.rebind(`
INSERT INTO calls (at, route, status, ran, duration_us, payer) VALUES (?, ?, ?, ?, ?, ?)`))
	if err != nil {
		return err
	}
	defer stmt.Close()
	type use struct {
		n    int64
		last time.Time
	}
	uses := map[string]*use{}
	for _, c := range calls {
		if _, err := stmt.ExecContext(ctx, unixMilli(c.At), c.Route, c.Status, boolInt(c.Ran), c.Duration.Microseconds(),
			nullIfEmpty(c.Payer)); err != nil {
			return err
		}
		if c.Key != "" {
			u := uses[c.Key]
			if u == nil {
				u = &use{}
				uses[c.Key] = u
			}
			u.n++
			if c.At.After(u.last) {
				u.last = c.At
			}
		}
	}
	for id, u := range uses {
		if _, err := tx.exec(ctx, `UPDATE api_keys SET calls = calls + ?, last_used_at = `+tx.d.greatest+`(COALESCE(last_used_at, 0), ?) WHERE id = ?`,
			u.n, unixMilli(u.last), id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Stats are the figures of GET /v1/health.
type Stats struct {
	// RunsTotal counts calls that ran a program, over the store's life.
	RunsTotal int64
	// SuccessRate is the share of successes among the last Recent calls
	// that were a success or a failure (see Call.Status). It is
	// meaningless when RateSample is 0.
	SuccessRate float64
	RateSample  int
	// P50 is the median duration of the last Recent calls that ran a
	// program: the smallest duration at least half of them do not exceed.
	// It is meaningless when P50Sample is 0.
	P50       time.Duration
	P50Sample int
	// Calls and UniquePayers count calls, and distinct non-empty payers,
	// at or after Since.
	Calls        int64
	UniquePayers int64
	// LastCalledAt is the time of the newest call ever recorded; zero if
	// there was none.
	LastCalledAt time.Time
}

// Stats computes the health figures: counts over calls at or after since,
// rates and median over the last recent calls.
func (s *Store) Stats(ctx context.Context, since time.Time, recent int) (Stats, error) {
	var st Stats
	if recent <= 0 {
		return st, fmt.Errorf("store: stats over %d recent calls", recent)
	}
	if err := s.FlushCalls(ctx); err != nil {
		return st, err
	}
	// One read transaction, so the figures describe one moment.
	tx, err := s.begin(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("store: stats: %w", err)
	}
	defer tx.Rollback()

	var (
		prunedRuns int64
		prunedLast sql.NullInt64
		liveLast   sql.NullInt64
		liveRuns   int64
	)
	if err := tx.queryRow(ctx, `SELECT runs, last_called_at FROM call_totals WHERE id = 1`).Scan(&prunedRuns, &prunedLast); err != nil {
		return st, fmt.Errorf("store: stats totals: %w", err)
	}
	if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM calls WHERE ran = 1`).Scan(&liveRuns); err != nil {
		return st, fmt.Errorf("store: stats runs: %w", err)
	}
	st.RunsTotal = prunedRuns + liveRuns
	if err := tx.queryRow(ctx, `SELECT MAX(at) FROM calls`).Scan(&liveLast); err != nil {
		return st, fmt.Errorf("store: stats last call: %w", err)
	}
	if last := max(prunedLast.Int64, liveLast.Int64); prunedLast.Valid || liveLast.Valid {
		st.LastCalledAt = fromUnixMilli(last)
	}
	if err := tx.queryRow(ctx, `SELECT COUNT(*), COUNT(DISTINCT payer) FROM calls WHERE at >= ?`,
		unixMilli(since)).Scan(&st.Calls, &st.UniquePayers); err != nil {
		return st, fmt.Errorf("store: stats window: %w", err)
	}

	var ok int
	err = eachInt64(ctx, tx, func(status int64) {
		st.RateSample++
		if status < 400 {
			ok++
		}
	}, `SELECT status FROM calls WHERE status < 400 OR status >= 500 ORDER BY id DESC LIMIT ?`, recent)
	if err != nil {
		return st, fmt.Errorf("store: stats success rate: %w", err)
	}
	if st.RateSample > 0 {
		st.SuccessRate = float64(ok) / float64(st.RateSample)
	}

	durations := make([]int64, 0, recent)
	err = eachInt64(ctx, tx, func(us int64) { durations = append(durations, us) },
		`SELECT duration_us FROM calls WHERE ran = 1 ORDER BY id DESC LIMIT ?`, recent)
	if err != nil {
		return st, fmt.Errorf("store: stats durations: %w", err)
	}
	if n := len(durations); n > 0 {
		slices.Sort(durations)
		// Nearest rank: the ceil(n/2)-th smallest, an observed value.
		st.P50 = time.Duration(durations[(n+1)/2-1]) * time.Microsecond
		st.P50Sample = n
	}
	return st, nil
}

// eachInt64 runs a query returning one integer column and calls fn per row.
func eachInt64(ctx context.Context, tx *txn, fn func(int64), query string, args ...any) error {
	rows, err := tx.query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return err
		}
		fn(v)
	}
	return rows.Err()
}

// PruneCalls deletes calls made before olderThan and reports how many. What
// the all-time figures need of them (runs, the last call's time) is folded
// into call_totals in the same transaction, so pruning never changes
// RunsTotal or LastCalledAt.
func (s *Store) PruneCalls(ctx context.Context, olderThan time.Time) (n int64, retErr error) {
	tx, err := s.begin(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: prune calls: %w", err)
	}
	defer func() {
		if retErr != nil {
			tx.Rollback()
		}
	}()
	cutoff := unixMilli(olderThan)
	if _, err := tx.exec(ctx, `
UPDATE call_totals SET
	runs = runs + (SELECT COUNT(*) FROM calls WHERE at < ?1 AND ran = 1),
	last_called_at = `+tx.d.greatest+`(COALESCE(last_called_at, 0), COALESCE((SELECT MAX(at) FROM calls WHERE at < ?1), 0))
WHERE id = 1 AND EXISTS (SELECT 1 FROM calls WHERE at < ?1)`, cutoff); err != nil {
		return 0, fmt.Errorf("store: prune calls: fold totals: %w", err)
	}
	res, err := tx.exec(ctx, `DELETE FROM calls WHERE at < ?`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("store: prune calls: %w", err)
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("store: prune calls: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: prune calls: commit: %w", err)
	}
	return n, nil
}

func nullIfEmpty(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}
