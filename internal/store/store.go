package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Errors a caller may switch on with errors.Is.
var (
	// ErrNotFound: no such job.
	ErrNotFound = errors.New("store: not found")
	// ErrJobConflict: the job_id is taken by a request with another hash.
	ErrJobConflict = errors.New("store: job_id already used by a different request")
	// ErrNotRunning: Finish on a job that is not in the running state.
	ErrNotRunning = errors.New("store: job is not running")
	// ErrNoKey: no API key with that id.
	ErrNoKey = errors.New("store: no such key")
)

// busyTimeout is how long a statement waits for another connection's write
// lock before failing with SQLITE_BUSY. Writes here are single short
// statements, so waiting this long means something is badly wrong.
const busyTimeout = 10 * time.Second

// maxOpenConns bounds the pool. SQLite serialises writers anyway; a few
// connections let health queries read (WAL) while a write is in progress.
const maxOpenConns = 4

// cacheKiB is each connection's SQLite page cache; see dsnParams.
const cacheKiB = 256

// Store is the embedded database. Create it with Open; Close it when done.
type Store struct {
	db   *sql.DB
	lock *os.File // held from Open to Close; see lockFile
	now  func() time.Time
	// resultBudget bounds the done records' responses together (Finish).
	resultBudget int64
	calls        callBuffer // calls not yet written (RecordCall)
	admin        bool       // opened by ForAdmin
}

// Option changes how Open builds a Store.
type Option func(*Store)

// WithClock makes the store read the time from now instead of time.Now. Tests
// use it to get exact, repeatable timestamps.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// ForAdmin opens the database beside the process that owns it, for the
// commands that manage keys while boxer serves: no lock is taken and no
// job is touched. SQLite's own locking keeps the two writers apart.
func ForAdmin() Option {
	return func(s *Store) { s.admin = true }
}

// DefaultResultBudget bounds the bytes of every job's stored response
// together, unless WithResultBudget says otherwise.
const DefaultResultBudget = 1 << 30

// WithResultBudget bounds the stored responses together to bytes (see
// Finish).
func WithResultBudget(bytes int64) Option {
	return func(s *Store) { s.resultBudget = bytes }
}

// Open opens (creating if needed) the database file at path, applies the
// migrations it has not seen yet and releases jobs a previous process left
// running. The directory holding path must exist.
func Open(path string, opts ...Option) (_ *Store, retErr error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	// The driver splits the DSN at the first '?': a path holding one would
	// be cut short and open the wrong file.
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("store: database path %q contains '?'", path)
	}
	s := &Store{now: time.Now, resultBudget: DefaultResultBudget}
	for _, o := range opts {
		o(s)
	}

	if !s.admin {
		lock, err := lockFile(path)
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
		s.lock = lock
		defer func() {
			if retErr != nil {
				lock.Close()
			}
		}()
	}
	db, err := sql.Open("sqlite", path+"?"+dsnParams().Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	defer func() {
		if retErr != nil {
			db.Close()
		}
	}()
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	// Connections a burst opened close once idle: an idle server holds one
	// or two descriptors on the database, not the burst's four pairs.
	db.SetConnMaxIdleTime(10 * time.Second)
	s.db = db

	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := migrate(ctx, db, s.now()); err != nil {
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	if s.admin {
		return s, nil
	}
	if _, err := s.releaseAllRunning(ctx); err != nil {
		return nil, fmt.Errorf("store: release unfinished jobs: %w", err)
	}
	return s, nil
}

// dsnParams are applied by the driver to every new connection, which matters
// because busy_timeout and foreign_keys are per-connection settings.
func dsnParams() url.Values {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// FULL, not NORMAL: a finished job's response must survive a power
	// loss, since a client that got it may rely on a replay returning it.
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	// SQLite's own page cache defaults to 2 MiB per connection, allocated
	// outside the Go heap and never given back: a server's RSS grew by
	// that much times the pool as the database did (10,000 calls in the
	// soak: +3 MiB, never returned). The hot pages are the B-trees' right
	// edges and the kernel's page cache holds the rest, so 256 KiB each
	// bounds the growth at 1 MiB for the pool without a slower request.
	q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cacheKiB))
	// Transactions take the write lock at BEGIN. A deferred transaction that
	// reads and then writes can fail with SQLITE_BUSY without waiting when
	// another connection wrote in between; IMMEDIATE waits instead.
	q.Set("_txlock", "immediate")
	return q
}

// Close closes the database and gives up its lock. The Store must not be
// used afterwards; a second Close is harmless.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(s.FlushCalls(ctx), s.db.Close())
	if s.lock != nil {
		s.lock.Close() // closing the descriptor releases the flock
	}
	return err
}

// unixMilli is how every time is stored: an INTEGER of milliseconds since the
// epoch, which sorts, compares and indexes without parsing.
func unixMilli(t time.Time) int64 { return t.UnixMilli() }

func fromUnixMilli(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
