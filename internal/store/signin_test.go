package store

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// openSecond opens another Store on db's database while the first is
// open, as another node: on Postgres a plain Open; a SQLite file takes
// one serving process, so the second is the admin kind, which SQLite's
// own locking keeps apart from the first.
func openSecond(t *testing.T, dsn string, c *clock) *Store {
	t.Helper()
	opts := []Option{WithClock(c.Now)}
	if !IsPostgres(dsn) {
		opts = append(opts, ForAdmin())
	}
	s, err := Open(dsn, opts...)
	if err != nil {
		t.Fatalf("Open(%s) beside another: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// countSignInRows is how many rows the sign-in tables hold.
func countSignInRows(t *testing.T, s *Store) (used, secrets int) {
	t.Helper()
	ctx := context.Background()
	if err := s.c().queryRow(ctx, `SELECT COUNT(*) FROM used_signin_nonces`).Scan(&used); err != nil {
		t.Fatal(err)
	}
	if err := s.c().queryRow(ctx, `SELECT COUNT(*) FROM secrets`).Scan(&secrets); err != nil {
		t.Fatal(err)
	}
	return used, secrets
}

// A spent sign-in nonce is refused again: on another store sharing the
// database, after a restart, until it is pruned after its expiry; and of
// many concurrent uses from two stores exactly one wins.
func TestSignInNonces(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		a, dsn := db.openTemp(t, c)
		b := openSecond(t, dsn, c)
		ctx := context.Background()
		exp := c.Now().Add(5 * time.Minute)
		use := func(s *Store, nonce string, expires time.Time, want bool) {
			t.Helper()
			got, err := s.UseSignInNonce(ctx, nonce, expires, c.Now())
			if err != nil || got != want {
				t.Fatalf("UseSignInNonce(%s) = %v, %v; want %v", nonce, got, err, want)
			}
		}
		use(a, "n1", exp, true)
		use(a, "n1", exp, false)
		use(b, "n1", exp, false) // another node
		use(b, "n2", exp, true)
		use(a, "n2", exp, false)
		if used, _ := countSignInRows(t, a); used != 2 {
			t.Fatalf("%d used nonces kept, want 2", used)
		}

		b.Close()
		a.Close()
		a = reopen(t, dsn, c) // a restart
		use(a, "n1", exp, false)
		use(a, "n3", c.Now().Add(time.Minute), true)

		// Kept while unexpired at the cutoff, forgotten after.
		c.Advance(5 * time.Minute)
		n, err := a.PruneSignInNonces(ctx, c.Now())
		if err != nil || n != 1 {
			t.Fatalf("PruneSignInNonces = %d, %v; want 1 (n3 only; n1 and n2 expire at the cutoff)", n, err)
		}
		use(a, "n1", exp, false)
		n, err = a.PruneSignInNonces(ctx, c.Now().Add(time.Millisecond))
		if err != nil || n != 2 {
			t.Fatalf("PruneSignInNonces = %d, %v; want 2", n, err)
		}
		if used, _ := countSignInRows(t, a); used != 0 {
			t.Fatalf("%d used nonces kept after pruning, want 0", used)
		}

		// Many at once, from two nodes: one wins.
		b = openSecond(t, dsn, c)
		const tries = 16
		var wg sync.WaitGroup
		got := make([]bool, tries)
		errs := make([]error, tries)
		for i := range tries {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = s.UseSignInNonce(ctx, "race", c.Now().Add(time.Minute), c.Now())
			}()
		}
		wg.Wait()
		fresh := 0
		for i := range tries {
			if errs[i] != nil {
				t.Fatalf("concurrent use: %v", errs[i])
			}
			if got[i] {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("%d of %d concurrent uses were fresh, want 1", fresh, tries)
		}
	})
}

// The sign-in key is made once per database: two stores asking at once on
// a new database get the same key, and so does a store opened later.
func TestSignInKeyShared(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		a, dsn := db.openTemp(t, c)
		b := openSecond(t, dsn, c)
		ctx := context.Background()
		keys := make([][]byte, 8)
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		for i := range keys {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				keys[i], errs[i] = s.SignInKey(ctx)
			}()
		}
		wg.Wait()
		for i := range keys {
			if errs[i] != nil {
				t.Fatalf("SignInKey: %v", errs[i])
			}
			if len(keys[i]) != SignInKeyLen || !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("key %d = %x, want key 0's %x (%d bytes)", i, keys[i], keys[0], SignInKeyLen)
			}
		}
		if bytes.Equal(keys[0], make([]byte, SignInKeyLen)) {
			t.Fatal("the key is all zeros")
		}
		if _, secrets := countSignInRows(t, a); secrets != 1 {
			t.Fatalf("%d secrets rows, want 1", secrets)
		}
		b.Close()
		a.Close()
		later, err := reopen(t, dsn, c).SignInKey(ctx)
		if err != nil || !bytes.Equal(later, keys[0]) {
			t.Fatalf("after a restart: %x, %v; want %x", later, err, keys[0])
		}

		// Another database has another key.
		other, _ := db.openTemp(t, c)
		k, err := other.SignInKey(ctx)
		if err != nil || bytes.Equal(k, keys[0]) {
			t.Fatalf("another database's key: %x, %v (the same as the first's?)", k, err)
		}
	})
}

// A stored key of the wrong length (a hand edit gone wrong) is an error,
// not a weak key.
func TestSignInKeyRefusesShortKey(t *testing.T) {
	s, _ := sqliteDB.openTemp(t, newClock())
	ctx := context.Background()
	if _, err := s.c().exec(ctx, `INSERT INTO secrets (name, value, created_at) VALUES (?, ?, 0)`, signInKeyName, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if k, err := s.SignInKey(ctx); err == nil {
		t.Fatalf("SignInKey = %x, want an error for a 5-byte key", k)
	}
}
