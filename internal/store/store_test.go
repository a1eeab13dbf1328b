package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
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

// openTemp opens a store in a fresh temporary directory and closes it when
// the test ends. It returns the path so a test can reopen the same file.
func openTemp(t *testing.T, c *clock) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boxer.db")
	return reopen(t, path, c), path
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
	c := newClock()
	s, path := openTemp(t, c)
	ctx := context.Background()
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != len(migrations) {
		t.Fatalf("schema version = %d, want %d", v, len(migrations))
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
		if err := s2.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_version`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != len(migrations) {
			t.Fatalf("reopen %d: %d schema_version rows, want %d (a migration ran twice)", i, rows, len(migrations))
		}
		s2.Close()
	}
}

func TestOpenSettings(t *testing.T) {
	s, _ := openTemp(t, newClock())
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
	c := newClock()
	s, path := openTemp(t, c)
	if _, err := s.db.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (?, 0)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(path)
	if err == nil {
		s2.Close()
		t.Fatal("Open of a database from a newer boxer succeeded, want an error")
	}
}

func TestOpenLocksOutOthers(t *testing.T) {
	c := newClock()
	s, path := openTemp(t, c)
	if s2, err := Open(path); err == nil {
		s2.Close()
		t.Fatal("a second Open of an open database succeeded")
	}
	s.Close()
	s.Close()          // harmless
	reopen(t, path, c) // the lock went with Close
}
