package testenv

import (
	"sync"
	"testing"
	"time"

	"boxer/internal/pgserver"
)

// The test process's own Postgres server, started on first use.
var pg struct {
	once sync.Once
	srv  *pgserver.Server
	err  error
}

// Postgres returns the URL of a new, empty database on the test process's
// Postgres server (internal/pgserver), dropped when t ends. The server
// needs Debian's postgresql package (scripts/setup.sh --test installs it)
// and root; without them the test fails, since CI must run it. A package
// whose tests call it stops the server in TestMain with StopPostgres.
func Postgres(t testing.TB) string {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.err = pgserver.Start(Slow(30 * time.Second)) })
	if pg.err != nil {
		t.Fatalf("the tests' Postgres server: %v", pg.err)
	}
	url, drop, err := pg.srv.CreateDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("drop the test's database: %v", err)
		}
	})
	return url
}

// StopPostgres stops the server Postgres started, if it did.
func StopPostgres() {
	if pg.srv != nil {
		pg.srv.Stop()
	}
}
