package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// A Postgres server of the test process's own, started on first use: a
// fresh cluster in a temporary directory, on a loopback port, trusting
// every local connection, without fsync (its data dies with the tests).
var pg struct {
	once sync.Once
	err  error
	dir  string
	addr string // host:port
	url  string // of its postgres database; a test's has another name
	cmd  *exec.Cmd
	n    int
	mu   sync.Mutex
}

// Postgres returns the URL of a new, empty database on the test process's
// Postgres server, dropped when t ends. The server needs Debian's
// postgresql package (scripts/setup.sh --test installs it) and root, to
// run it as the postgres user; without them the test fails, since CI must
// run it. A package whose tests call it stops the server in TestMain
// with StopPostgres.
func Postgres(t testing.TB) string {
	t.Helper()
	pg.once.Do(func() { pg.err = startPostgres() })
	if pg.err != nil {
		t.Fatalf("the tests' Postgres server: %v", pg.err)
	}
	pg.mu.Lock()
	pg.n++
	name := fmt.Sprintf("boxer_test_%d", pg.n)
	pg.mu.Unlock()
	admin, err := sql.Open("pgx", pg.url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", pg.url)
		if err == nil {
			_, err = db.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`)
			db.Close()
		}
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", pg.addr, name)
}

// StopPostgres stops the server Postgres started, if it did, and removes
// its files.
func StopPostgres() {
	if pg.cmd != nil && pg.cmd.Process != nil {
		_ = pg.cmd.Process.Signal(syscall.SIGINT) // a fast shutdown
		_ = pg.cmd.Wait()
	}
	if pg.dir != "" {
		os.RemoveAll(pg.dir)
	}
}

func startPostgres() error {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return fmt.Errorf("no /usr/lib/postgresql/*/bin/postgres: install Debian's postgresql package (scripts/setup.sh --test)")
	}
	sort.Slice(bins, func(i, j int) bool { return version(bins[i]) < version(bins[j]) })
	bin := filepath.Dir(bins[len(bins)-1])
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}

	if pg.dir, err = os.MkdirTemp("", "boxer-test-pg-"); err != nil {
		return err
	}
	if err := os.Chown(pg.dir, uid, gid); err != nil {
		return err
	}
	data := filepath.Join(pg.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = pg.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(pg.dir, "postgres.log"))
	if err != nil {
		return err
	}
	pg.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", pg.dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300")
	// The server dies with the test process: Pdeathsig is sent when the
	// thread that started it ends, so that thread never does.
	pg.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	pg.cmd.Stdout, pg.cmd.Stderr = logf, logf
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		started <- pg.cmd.Start()
		select {}
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- pg.cmd.Wait() }()

	pg.addr = fmt.Sprintf("127.0.0.1:%d", port)
	pg.url = "postgres://postgres@" + pg.addr + "/postgres?sslmode=disable"
	db, err := sql.Open("pgx", pg.url)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(Slow(30 * time.Second))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("postgres exited (%v):\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 30 s: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the server to accept connections
	}
}

// version is the major version in a /usr/lib/postgresql/N/bin path.
func version(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return n
}

// freePort is a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
