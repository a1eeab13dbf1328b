package store

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"boxer/internal/testenv"
)

// clock is a settable time source for WithClock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 9, 2, 21, 46, 45, 571_000_000, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testDB makes the databases a test's stores open: SQLite files, or
// databases on the test process's Postgres server.
type testDB struct {
	name string
	dsn  func(t *testing.T) string
}

var (
	sqliteDB   = testDB{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "boxer.db") }}
	postgresDB = testDB{"postgres", func(t *testing.T) string { return testenv.Postgres(t) }}
)

// eachStore runs f on each database a Store runs on: every behaviour the
// store promises holds on both.
func eachStore(t *testing.T, f func(t *testing.T, db testDB)) {
	for _, db := range []testDB{sqliteDB, postgresDB} {
		t.Run(db.name, func(t *testing.T) { f(t, db) })
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

// openTemp opens a store on a new database, closed when the test ends,
// and returns its DSN so that a test can open it again.
func (db testDB) openTemp(t *testing.T, c *clock) (*Store, string) {
	t.Helper()
	dsn := db.dsn(t)
	return reopen(t, dsn, c), dsn
}

func reopen(t *testing.T, path string, c *clock) *Store {
	t.Helper()
	s, err := Open(path, WithClock(c.Now))
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		v, err := s.SchemaVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v != len(migrationsOf(s.dialect)) {
			t.Fatalf("schema version = %d, want %d", v, len(migrationsOf(s.dialect)))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			s2 := reopen(t, path, c)
			v2, err := s2.SchemaVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v2 != v {
				t.Fatalf("reopen %d: schema version = %d, want %d", i, v2, v)
			}
			var rows int
			if err := s2.c().queryRow(ctx, `SELECT COUNT(*) FROM schema_version`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != len(migrationsOf(s.dialect)) {
				t.Fatalf("reopen %d: %d schema_version rows, want %d (a migration ran twice)", i, rows, len(migrationsOf(s.dialect)))
			}
			s2.Close()
		}
	})
}

func TestOpenSettings(t *testing.T) {
	s, _ := sqliteDB.openTemp(t, newClock())
	ctx := context.Background()
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "10000"},
		{"synchronous", "2"},
		{"cache_size", "-256"},
	}
	for _, tt := range tests {
		t.Run(tt.pragma, func(t *testing.T) {
			var got string
			if err := s.db.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("PRAGMA %s = %q, want %q", tt.pragma, got, tt.want)
			}
		})
	}
}

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"empty path", ""},
		{"question mark", filepath.Join(t.TempDir(), "a?b.db")},
		{"missing directory", filepath.Join(t.TempDir(), "no", "such", "dir", "boxer.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.path)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tt.path)
			}
		})
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		if _, err := s.c().exec(context.Background(), `INSERT INTO schema_version (version, applied_at) VALUES (?, 0)`, len(migrationsOf(s.dialect))+1); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2, err := Open(path)
		if err == nil {
			s2.Close()
			t.Fatal("Open of a database from a newer boxer succeeded, want an error")
		}
	})
}

func TestOpenLocksOutOthers(t *testing.T) {
	c := newClock()
	s, path := sqliteDB.openTemp(t, c)
	if s2, err := Open(path); err == nil {
		s2.Close()
		t.Fatal("a second Open of an open database succeeded")
	}
	s.Close()
	s.Close()          // harmless
	reopen(t, path, c) // the lock went with Close
}
