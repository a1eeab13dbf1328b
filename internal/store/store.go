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

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver
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
// A Postgres server takes more, from every node: pgMaxOpenConns each.
const (
	maxOpenConns   = 4
	pgMaxOpenConns = 8
)

// cacheKiB is each connection's SQLite page cache; see dsnParams.
const cacheKiB = 256

// Store is boxer's database: the embedded SQLite file, or a Postgres
// server that many nodes share. Create it with Open; Close it when done.
type Store struct {
	db      *sql.DB
	dialect dialect
	node    string   // this process's name among the nodes sharing a Postgres store
	lock    *os.File // a SQLite file's, held from Open to Close; see lockFile
	now     func() time.Time
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

// WithNode names this process among the nodes sharing a Postgres store:
// the jobs it runs and the sessions it holds are recorded as its, and
// what it left unfinished is its own to clean up when it starts again.
// A SQLite file has one process, whose name does not matter.
func WithNode(name string) Option {
	return func(s *Store) { s.node = name }
}

// IsPostgres reports whether dsn names a Postgres database (a postgres://
// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// DefaultResultBudget bounds the bytes of every job's stored response
// together, unless WithResultBudget says otherwise.
const DefaultResultBudget = 1 << 30

// WithResultBudget bounds the stored responses together to bytes (see
// Finish).
func WithResultBudget(bytes int64) Option {
	return func(s *Store) { s.resultBudget = bytes }
}

// Open opens the database dsn names, applies the migrations it has not
// seen yet and releases jobs a previous process (on a shared database,
// one of the same node) left running. dsn is a Postgres URL
// (postgres://user:password@host/db?sslmode=...), or else the path of a
// SQLite file, created if needed in a directory that must exist.
func Open(dsn string, opts ...Option) (*Store, error) {
	s := &Store{now: time.Now, resultBudget: DefaultResultBudget}
	for _, o := range opts {
		o(s)
	}
	var err error
	if IsPostgres(dsn) {
		err = s.openPostgres(dsn)
	} else {
		err = s.openSQLite(dsn)
	}
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err = s.db.PingContext(ctx); err == nil {
		err = migrate(ctx, s.db, s.dialect, s.now())
	}
	if err == nil && !s.admin && !s.Shared() {
		_, err = s.releaseAllRunning(ctx) // a shared database's node calls EndOwn
	}
	if err != nil {
		s.db.Close()
		if s.lock != nil {
			s.lock.Close()
		}
		return nil, fmt.Errorf("store: open %s: %w", redact(dsn), err)
	}
	return s, nil
}

// mine keeps query q, whose WHERE clause ends it, to this node's rows,
// with its arguments: on a shared database; a SQLite file has one
// process, every row its own.
func (s *Store) mine(q string, args ...any) (string, []any) {
	if s.dialect.name == "sqlite" {
		return q, args
	}
	return q + " AND node = ?", append(args, s.node)
}

// redact is dsn without the password a URL may hold, for messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && IsPostgres(dsn) {
		return u.Redacted()
	}
	return dsn
}

// openPostgres connects to the Postgres server dsn names.
func (s *Store) openPostgres(dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", redact(dsn), err)
	}
	db.SetMaxOpenConns(pgMaxOpenConns)
	db.SetMaxIdleConns(pgMaxOpenConns)
	db.SetConnMaxIdleTime(time.Minute)
	s.db, s.dialect = db, postgresDialect
	return nil
}

// openSQLite opens the SQLite file at path, taking its lock unless the
// Store is an admin's.
func (s *Store) openSQLite(path string) (retErr error) {
	if path == "" {
		return errors.New("store: empty database path")
	}
	// The driver splits the DSN at the first '?': a path holding one would
	// be cut short and open the wrong file.
	if strings.ContainsRune(path, '?') {
		return fmt.Errorf("store: database path %q contains '?'", path)
	}
	if !s.admin {
		lock, err := lockFile(path)
		if err != nil {
			return fmt.Errorf("store: open %s: %w", path, err)
		}
		s.lock = lock
		defer func() {
			if retErr != nil {
				lock.Close()
				s.lock = nil
			}
		}()
	}
	db, err := sql.Open("sqlite", path+"?"+dsnParams().Encode())
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	// Connections a burst opened close once idle: an idle server holds one
	// or two descriptors on the database, not the burst's four pairs.
	db.SetConnMaxIdleTime(10 * time.Second)
	s.db, s.dialect = db, sqliteDialect
	return nil
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
