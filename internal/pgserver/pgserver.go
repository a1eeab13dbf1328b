// Package pgserver starts a throwaway Postgres server for boxer's tests
// and its cluster proof: a fresh cluster in a temporary directory, on a
// loopback port, trusting every local connection, without fsync (its data
// dies with it). It runs Debian's postgresql package's binaries as the
// postgres user, so the caller must be root.
package pgserver

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
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Server is a running Postgres server.
type Server struct {
	dir  string
	addr string // host:port
	cmd  *exec.Cmd

	mu sync.Mutex
	n  int // databases made
}

// Start starts a server, waiting up to wait for it to accept connections.
// It dies with the calling process (or Stop).
func Start(wait time.Duration) (_ *Server, retErr error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return nil, fmt.Errorf("no /usr/lib/postgresql/*/bin/postgres: install Debian's postgresql package (scripts/setup.sh --test)")
	}
	sort.Slice(bins, func(i, j int) bool { return major(bins[i]) < major(bins[j]) })
	bin := filepath.Dir(bins[len(bins)-1])
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}

	s := &Server{}
	if s.dir, err = os.MkdirTemp("", "boxer-pg-"); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.Stop()
		}
	}()
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return nil, err
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = s.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", s.dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300")
	// The server dies with this process: Pdeathsig is sent when the thread
	// that started it ends, so that thread never does.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		started <- s.cmd.Start()
		select {}
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()

	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(logf.Name())
			s.cmd = nil
			return nil, fmt.Errorf("postgres exited (%v):\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres did not accept connections within %s: %w", wait, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the server to accept connections
	}
}

// URL is the URL of database name on s.
func (s *Server) URL(name string) string {
	return "postgres://postgres@" + s.addr + "/" + name + "?sslmode=disable"
}

// CreateDB makes a new, empty database and returns its URL and a func
// that drops it.
func (s *Server) CreateDB() (url string, drop func() error, err error) {
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("boxer_%d", s.n)
	s.mu.Unlock()
	if err := s.admin(`CREATE DATABASE ` + name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), func() error { return s.admin(`DROP DATABASE ` + name + ` WITH (FORCE)`) }, nil
}

func (s *Server) admin(stmt string) error {
	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(stmt)
	return err
}

// Stop stops the server (a fast shutdown) and removes its files.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		_, _ = s.cmd.Process.Wait()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// major is the major version in a /usr/lib/postgresql/N/bin path.
func major(bin string) int {
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
