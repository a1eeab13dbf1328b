// Package session keeps boxer's sessions: interpreters that live between
// calls, as a notebook kernel does, each in a sandbox of its own
// (internal/sandbox's Session, a warm child of a zygote kept for the
// sessions).
//
// The Manager owns their lives: it makes them (within a cap in all and
// one per owner, an API key or a payer), hands out one cell at a time to
// each, ends them when idle or too old, and records each in the store, so
// that after a restart a call to a session the new process does not hold
// gets ErrLost rather than a hang or a 404 that reads like a typo.
package session

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"boxer"
	"boxer/internal/sandbox"
	"boxer/internal/sandbox/transplant"
	"boxer/internal/store"
)

// Config shapes the Manager. The zero value of a field means its default.
type Config struct {
	// Max is how many sessions may exist at once; 0 switches sessions off.
	Max int
	// MaxPerOwner is how many of them one owner may hold. Default: Max.
	MaxPerOwner int
	// IdleTimeout and MaxLifetime are a session's when its creator asks
	// for none: it ends after IdleTimeout without a call, or MaxLifetime
	// after it began. Defaults 600 s and 3600 s. A creator may ask for
	// at most MaxIdleTimeout and MaxMaxLifetime (defaults 1 h and 24 h).
	IdleTimeout, MaxLifetime       time.Duration
	MaxIdleTimeout, MaxMaxLifetime time.Duration
	// Limits are a session's when its creator asks for none; MemoryBytes
	// and CPUs may be asked for, within MaxLimits'.
	Limits, MaxLimits boxer.Limits
	// CellTimeout is a cell's when its caller asks for none; it may ask
	// for up to MaxCellTimeout. Defaults 30 s and 300 s.
	CellTimeout, MaxCellTimeout time.Duration
	// PreImports are imported once in the sessions' zygote, as the
	// pool's are in its own.
	PreImports []string
	// ZygoteMemoryBytes caps the sessions' zygote's own cgroup.
	ZygoteMemoryBytes int64
	// MaxFileBytes caps a file read back from a session. Default 16 MiB.
	MaxFileBytes int64
}

// Defaults.
const (
	DefaultIdleTimeout    = 600 * time.Second
	DefaultMaxLifetime    = 3600 * time.Second
	DefaultMaxIdleTimeout = time.Hour
	DefaultMaxMaxLifetime = 24 * time.Hour
	DefaultCellTimeout    = 30 * time.Second
	DefaultMaxCellTimeout = 300 * time.Second
)

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&c.IdleTimeout, DefaultIdleTimeout)
	set(&c.MaxLifetime, DefaultMaxLifetime)
	set(&c.MaxIdleTimeout, DefaultMaxIdleTimeout)
	set(&c.MaxMaxLifetime, DefaultMaxMaxLifetime)
	set(&c.CellTimeout, DefaultCellTimeout)
	set(&c.MaxCellTimeout, DefaultMaxCellTimeout)
	if c.MaxPerOwner == 0 {
		c.MaxPerOwner = c.Max
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 16 << 20
	}
	// A default above the most a session may ask for is cut to it: an
	// operator who lowers the most means the default too.
	if m := c.MaxLimits.MemoryBytes; m > 0 && c.Limits.MemoryBytes > m {
		c.Limits.MemoryBytes = m
	}
	if m := c.MaxLimits.CPUs; m > 0 && c.Limits.CPUs > m {
		c.Limits.CPUs = m
	}
	return c
}

// Errors of the Manager's calls, each a boxer.Error with its stable code.
var (
	// ErrNotFound: no session of the caller's has that id.
	ErrNotFound = boxer.Errorf(boxer.ECodeNotFound, "no such session")
	// ErrOff: sessions are switched off on this server.
	ErrOff = boxer.Errorf(boxer.ECodeNotFound, "sessions are switched off on this server (--max-sessions 0)")
)

// Request is what a session's creator may ask for.
type Request struct {
	Files       []boxer.File
	MemoryBytes int64   // 0: the default
	CPUs        float64 // 0: the default
	IdleTimeout time.Duration
	MaxLifetime time.Duration
}

// Info describes a live session.
type Info struct {
	ID          string
	CreatedAt   time.Time
	LastUsedAt  time.Time
	ExpiresAt   time.Time // the earlier of its idle and lifetime ends
	IdleTimeout time.Duration
	MaxLifetime time.Duration
	MemoryLimit int64
	CPUs        float64
	Execs       int64
	Busy        bool  // a cell is running
	MemoryBytes int64 // what its cgroup holds now
}

// Manager keeps the sessions. Its methods are safe for concurrent use.
type Manager struct {
	eng   *sandbox.Engine
	cfg   Config
	store *store.Store
	log   *slog.Logger
	now   func() time.Time

	zmu sync.Mutex // serialises the zygote's start
	mu  sync.Mutex
	zyg *sandbox.Zygote
	// live are the sessions, by id; pending counts the ones being made
	// (each holds its place in the caps while its sandbox starts).
	live    map[string]*entry
	pending map[string]int // by owner

	wake chan struct{} // the reaper's: a deadline moved closer
	stop chan struct{}
	done chan struct{}

	// ready are started kernels, each past a first cell, waiting for a
	// session to be made (see refill); refilling nudges their keeper.
	ready     chan readyKernel
	refilling chan struct{}
	refilled  chan struct{} // closed when the keeper has stopped
}

// readyKernel is a started kernel of zygote z.
type readyKernel struct {
	s *sandbox.Session
	z *sandbox.Zygote
}

// readyKernels is how many kernels are kept started for the next
// sessions, once the first session is asked for: a session is then made
// in about a millisecond, not the 20 ms of a fork, its namespaces and its
// kernel's first cell (bench/sessions). Each holds a zygote slot and a
// few MiB.
const readyKernels = 2

type entry struct {
	id          string
	owner       string // who may reach it: "" for whoever has its id
	quota       string // whose cap it counts against
	s           *sandbox.Session
	z           *sandbox.Zygote
	created     time.Time
	idle, life  time.Duration
	limits      boxer.Limits
	mu          sync.Mutex // guards lastUsed, execs, running
	lastUsed    time.Time
	execs       int64
	running     int
	endedReason string // set once, under Manager.mu, when it leaves live
}

// New returns a Manager; sessions of an earlier process are recorded as
// lost. The sessions' zygote starts with the first session.
func New(eng *sandbox.Engine, st *store.Store, cfg Config, log *slog.Logger) (*Manager, error) {
	cfg = cfg.WithDefaults()
	if cfg.Max < 0 || cfg.MaxPerOwner < 0 {
		return nil, errors.New("session: want max >= 0 and max per owner >= 0")
	}
	m := &Manager{eng: eng, cfg: cfg, store: st, log: log, now: time.Now,
		live: map[string]*entry{}, pending: map[string]int{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		ready: make(chan readyKernel, readyKernels), refilling: make(chan struct{}, 1), refilled: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := st.LoseOpenSessions(ctx, m.now()); err != nil {
		return nil, err
	} else if n > 0 {
		log.Info("sessions of an earlier process recorded as lost", "sessions", n)
	}
	go m.reap()
	go m.refill()
	return m, nil
}

// Enabled reports whether sessions are on.
func (m *Manager) Enabled() bool { return m.cfg.Max > 0 }

// Config returns the Manager's configuration, defaults applied.
func (m *Manager) Config() Config { return m.cfg }

// Create makes a session that owner may reach ("" for whoever has its
// id), counted against quota's cap.
func (m *Manager) Create(ctx context.Context, owner, quota string, req Request) (*Info, error) {
	if !m.Enabled() {
		return nil, ErrOff
	}
	lim, idle, life, err := m.settle(req)
	if err != nil {
		return nil, err
	}
	defer m.nudgeRefill()
	s, z, err := m.place(ctx, quota, lim)
	if err != nil {
		return nil, err
	}
	if err := s.WriteFiles(req.Files); err != nil {
		m.abandon(quota, s)
		return nil, err
	}
	return m.add(ctx, &entry{owner: owner, quota: quota, s: s, z: z, idle: idle, life: life, limits: lim})
}

// place takes a place within the caps for quota's new session and a
// started kernel for it, on limits lim. The caller hands both to add, or
// gives them up with abandon; on an error it holds neither. Its caller
// nudges the refill of the ready kernels once done.
func (m *Manager) place(ctx context.Context, quota string, lim boxer.Limits) (*sandbox.Session, *sandbox.Zygote, error) {
	if err := m.reserve(ctx, quota); err != nil {
		return nil, nil, err
	}
	s, z, err := m.kernel(ctx)
	if err == nil {
		if err = s.SetLimits(lim); err != nil {
			s.Close()
		}
	}
	if err != nil {
		m.release(quota)
		return nil, nil, err
	}
	return s, z, nil
}

// abandon gives up a place and kernel that place took.
func (m *Manager) abandon(quota string, s *sandbox.Session) {
	s.Close()
	m.release(quota)
}

// add records e, a session made on what place took for e.quota, and
// makes it live; on an error it abandons them.
func (m *Manager) add(ctx context.Context, e *entry) (*Info, error) {
	fail := func(err error) (*Info, error) {
		m.abandon(e.quota, e.s)
		return nil, err
	}
	id, err := newID()
	if err != nil {
		return fail(err)
	}
	now := m.now()
	if err := m.store.AddSession(ctx, id, e.owner, e.quota, now); err != nil {
		return fail(err)
	}
	e.id, e.created, e.lastUsed = id, now, now
	e.s.OnDeath(m.nudge) // the reaper ends a session whose kernel died between cells
	m.mu.Lock()
	if m.pending[e.quota]--; m.pending[e.quota] <= 0 {
		delete(m.pending, e.quota)
	}
	m.live[id] = e
	m.mu.Unlock()
	m.nudge()
	info := e.info()
	return &info, nil
}

// Fork makes a session owner may reach, counted against quota's cap,
// holding a copy of owner's session id: its interpreter's memory, its
// files, its limits and timeouts (sandbox.Session.Fork). The two then
// diverge. A session that cannot be copied (a thread or process of its
// own running, memory shared with another process) answers fork_refused
// and goes on as it was; one running a cell answers session_busy.
func (m *Manager) Fork(ctx context.Context, owner, quota, id string) (*Info, error) {
	parent, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	defer m.nudgeRefill()
	s, z, err := m.place(ctx, quota, parent.limits)
	if err != nil {
		return nil, err
	}
	parent.touch(1) // not idle while it is copied
	err = parent.s.Fork(ctx, s)
	parent.touch(-1)
	if err != nil {
		m.abandon(quota, s)
		var refused *transplant.RefusedError
		switch {
		case errors.As(err, &refused):
			return nil, boxer.Errorf(boxer.ECodeForkRefused, "session %s cannot be forked: %s", id, refused.Reason)
		case errors.Is(err, sandbox.ErrSessionBusy):
			return nil, boxer.Errorf(boxer.ECodeSessionBusy, "a cell is running in session %s; fork it once the cell has answered", id)
		case errors.Is(err, sandbox.ErrSessionGone):
			_, why := parent.s.Alive()
			m.end(parent, why)
			return nil, boxer.Errorf(boxer.ECodeSessionEnded, "session %s ended: %s", id, why)
		}
		return nil, err
	}
	return m.add(ctx, &entry{owner: owner, quota: quota, s: s, z: z, idle: parent.idle, life: parent.life, limits: parent.limits})
}

// kernel returns a started kernel for a new session: a ready one if
// there is one whose zygote lives, else one started now. Its caller
// nudges the refill once its session is made: a kernel started meanwhile
// would take the CPU the new session waits on.
func (m *Manager) kernel(ctx context.Context) (*sandbox.Session, *sandbox.Zygote, error) {
	for {
		select {
		case k := <-m.ready:
			if alive, _ := k.s.Alive(); alive && !isDead(k.z) {
				return k.s, k.z, nil
			}
			k.s.Close()
			continue
		default:
		}
		z, err := m.zygote(ctx)
		if err != nil {
			return nil, nil, err
		}
		s, err := m.start(ctx, z)
		return s, z, err
	}
}

// start starts a kernel on z, on the default limits (Create sets the
// session's), and runs a first, empty cell: a forked interpreter pays for
// its first trip through the kernel's loop (pages first touched), which
// is better paid before a caller waits on it.
func (m *Manager) start(ctx context.Context, z *sandbox.Zygote) (*sandbox.Session, error) {
	lim, err := m.eng.JobLimits(m.cfg.Limits)
	if err != nil {
		return nil, err
	}
	w, err := z.Prepare(ctx)
	if err != nil {
		return nil, fmt.Errorf("session: prepare its sandbox: %w", err)
	}
	s, err := w.StartSession(lim)
	if err != nil {
		w.Destroy()
		return nil, fmt.Errorf("session: start its kernel: %w", err)
	}
	res, err := s.Exec(ctx, "pass", time.Minute, nil)
	if err == nil && (!res.Alive || res.Status != boxer.StatusOK) {
		err = fmt.Errorf("its first cell ended %s (%s): %s", res.Status, res.Ended, res.Stderr.Data)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("session: start its kernel: %w", err)
	}
	return s, nil
}

func isDead(z *sandbox.Zygote) bool {
	select {
	case <-z.Dead():
		return true
	default:
		return false
	}
}

func (m *Manager) nudgeRefill() { poke(m.refilling) }

// refill keeps readyKernels kernels started on the live zygote, from the
// first session on; it starts none before (the zygote starts with the
// first session), nor on a dead zygote (the next session restarts it).
func (m *Manager) refill() {
	defer close(m.refilled)
	for {
		select {
		case <-m.stop:
			return
		case <-m.refilling:
		}
		for len(m.ready) < readyKernels {
			m.mu.Lock()
			z := m.zyg
			m.mu.Unlock()
			if z == nil || isDead(z) {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			s, err := m.start(ctx, z)
			cancel()
			if err != nil {
				m.log.Warn("start a ready session kernel", "err", err)
				break // tried again with the next session
			}
			select {
			case m.ready <- readyKernel{s, z}:
			default:
				s.Close()
			}
		}
	}
}

// settle turns a request into the session's limits and timeouts, or the
// error its caller gets.
func (m *Manager) settle(req Request) (boxer.Limits, time.Duration, time.Duration, error) {
	c := m.cfg
	lim := c.Limits
	if req.MemoryBytes != 0 {
		lim.MemoryBytes = req.MemoryBytes
	}
	if req.CPUs != 0 {
		lim.CPUs = req.CPUs
	}
	if c.MaxLimits.MemoryBytes > 0 && lim.MemoryBytes > c.MaxLimits.MemoryBytes {
		return lim, 0, 0, boxer.Errorf(boxer.ECodeInvalidRequest, "memory_mb: %d is more than this server allows (%d)", lim.MemoryBytes>>20, c.MaxLimits.MemoryBytes>>20)
	}
	if c.MaxLimits.CPUs > 0 && lim.CPUs > c.MaxLimits.CPUs {
		return lim, 0, 0, boxer.Errorf(boxer.ECodeInvalidRequest, "cpus: %g is more than this server allows (%g)", lim.CPUs, c.MaxLimits.CPUs)
	}
	lim, err := m.eng.JobLimits(lim)
	if err != nil {
		return lim, 0, 0, err
	}
	idle, life := c.IdleTimeout, c.MaxLifetime
	if req.IdleTimeout != 0 {
		idle = req.IdleTimeout
	}
	if req.MaxLifetime != 0 {
		life = req.MaxLifetime
	}
	if idle < time.Second || idle > c.MaxIdleTimeout {
		return lim, 0, 0, boxer.Errorf(boxer.ECodeInvalidRequest, "idle_timeout_seconds: %g is out of range; allowed: 1 to %g", idle.Seconds(), c.MaxIdleTimeout.Seconds())
	}
	if life < time.Second || life > c.MaxMaxLifetime {
		return lim, 0, 0, boxer.Errorf(boxer.ECodeInvalidRequest, "max_lifetime_seconds: %g is out of range; allowed: 1 to %g", life.Seconds(), c.MaxMaxLifetime.Seconds())
	}
	return lim, idle, life, nil
}

// reserve takes a place for quota's new session within the caps.
// The cap in all is this node's (its sandboxes); the cap per caller
// counts the caller's open sessions on every node sharing the store.
func (m *Manager) reserve(ctx context.Context, quota string) error {
	everywhere := 0
	if m.store.Shared() {
		n, err := m.store.OpenSessions(ctx, quota)
		if err != nil {
			return err
		}
		everywhere = n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	total, here := len(m.live), 0
	for _, p := range m.pending {
		total += p
	}
	for _, e := range m.live {
		if e.quota == quota {
			here++
		}
	}
	mine := m.pending[quota] + max(here, everywhere)
	if mine >= m.cfg.MaxPerOwner {
		return boxer.Errorf(boxer.ECodeRateLimited, "you hold %d sessions, the most this service allows one caller; delete one (DELETE /v1/sessions/{id}) or let it expire", mine)
	}
	if total >= m.cfg.Max {
		return boxer.Errorf(boxer.ECodeBusy, "all %d sessions this server keeps are taken; retry later", m.cfg.Max)
	}
	m.pending[quota]++
	return nil
}

func (m *Manager) release(quota string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending[quota]--; m.pending[quota] <= 0 {
		delete(m.pending, quota)
	}
}

// zygote returns the sessions' zygote, starting it (again, if it died).
func (m *Manager) zygote(ctx context.Context) (*sandbox.Zygote, error) {
	m.zmu.Lock()
	defer m.zmu.Unlock()
	m.mu.Lock()
	z := m.zyg
	m.mu.Unlock()
	if z != nil {
		select {
		case <-z.Dead():
		default:
			return z, nil
		}
		z.Close()
	}
	t := time.Now()
	z, err := m.eng.StartZygote(ctx, sandbox.ZygoteConfig{PreImports: m.cfg.PreImports, Slots: m.cfg.Max + readyKernels, MemoryBytes: m.cfg.ZygoteMemoryBytes})
	if err != nil {
		return nil, fmt.Errorf("session: start the sessions' zygote: %w", err)
	}
	m.log.Info("sessions' zygote ready", "preimports", m.cfg.PreImports, "slots", m.cfg.Max, "took", time.Since(t).Round(time.Millisecond))
	m.mu.Lock()
	m.zyg = z
	m.mu.Unlock()
	m.nudge() // the reaper watches it
	return z, nil
}

// get returns owner's live session id, or why there is none: ErrNotFound,
// or a *boxer.Error with code session_lost or session_ended.
func (m *Manager) get(ctx context.Context, owner, id string) (*entry, error) {
	if !m.Enabled() {
		return nil, ErrOff
	}
	m.mu.Lock()
	e := m.live[id]
	var ending string
	if e != nil {
		ending = e.endedReason
	}
	m.mu.Unlock()
	switch {
	case e != nil && e.owner != owner:
		return nil, ErrNotFound
	case e != nil && ending != "":
		return nil, boxer.Errorf(boxer.ECodeSessionEnded, "session %s ended: %s", id, ending)
	case e != nil:
		if alive, why := e.s.Alive(); !alive && e.cellsRunning() == 0 {
			m.end(e, why) // died between cells: it is gone, say so
			return nil, boxer.Errorf(boxer.ECodeSessionEnded, "session %s ended: %s", id, why)
		}
		return e, nil
	}
	rec, found, err := m.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found || rec.Owner != owner {
		return nil, ErrNotFound
	}
	if rec.EndReason == store.SessionLost {
		return nil, boxer.Errorf(boxer.ECodeSessionLost, "session %s was lost: the server holding it stopped or restarted at %s; its state is gone; create a new session", id, rec.EndedAt.Format(time.RFC3339))
	}
	if rec.EndedAt.IsZero() {
		// Open, on another node (this one's open sessions are live here):
		// the API forwards a call to it there, so one that comes here has
		// found that node gone.
		return nil, boxer.Errorf(boxer.ECodeSessionLost, "session %s was lost: node %s, which held it, cannot be reached; its state is gone; create a new session", id, rec.Node)
	}
	return nil, boxer.Errorf(boxer.ECodeSessionEnded, "session %s ended at %s: %s", id, rec.EndedAt.Format(time.RFC3339), rec.EndReason)
}

// Holds reports whether session id lives in this process.
func (m *Manager) Holds(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id] != nil
}

// Get describes owner's session id.
func (m *Manager) Get(ctx context.Context, owner, id string) (*Info, error) {
	e, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	info := e.info()
	return &info, nil
}

// List describes owner's sessions, the newest first.
func (m *Manager) List(owner string) []Info {
	m.mu.Lock()
	var es []*entry
	for _, e := range m.live {
		if e.owner == owner && e.endedReason == "" {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	out := make([]Info, 0, len(es))
	for _, e := range es {
		out = append(out, e.info())
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].CreatedAt.After(out[j].CreatedAt) || out[i].CreatedAt.Equal(out[j].CreatedAt) && out[i].ID < out[j].ID
	})
	return out
}

// Delete ends owner's session id.
func (m *Manager) Delete(ctx context.Context, owner, id string) error {
	return m.End(ctx, owner, id, "deleted by its owner")
}

// End ends owner's session id at once, as Delete does, for why: what a
// later call for it is told (session_ended).
func (m *Manager) End(ctx context.Context, owner, id, why string) error {
	e, err := m.get(ctx, owner, id)
	if err != nil {
		return err
	}
	m.end(e, why)
	return nil
}

// ExecResult is a cell's result, with the session's state after it.
type ExecResult struct {
	*sandbox.CellResult
	Session Info
}

// Exec runs code in owner's session id for at most timeout (0: the
// default), its output given to output as it comes if output is not nil.
// A session busy with another cell answers session_busy; one that ended
// with the cell (killed past its timeout, out of memory) says so in the
// result, and is gone afterwards.
func (m *Manager) Exec(ctx context.Context, owner, id, code string, timeout time.Duration, output func(boxer.Stream, []byte)) (*ExecResult, error) {
	if timeout == 0 {
		timeout = m.cfg.CellTimeout
	}
	if timeout < 0 || timeout > m.cfg.MaxCellTimeout {
		return nil, boxer.Errorf(boxer.ECodeInvalidRequest, "timeout_seconds: %g is out of range; allowed: up to %g", timeout.Seconds(), m.cfg.MaxCellTimeout.Seconds())
	}
	e, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	e.touch(1)
	res, err := e.s.Exec(ctx, code, timeout, output)
	e.touch(-1)
	if errors.Is(err, sandbox.ErrSessionBusy) {
		return nil, boxer.Errorf(boxer.ECodeSessionBusy, "a cell is running in session %s; wait for its answer", id)
	}
	if errors.Is(err, sandbox.ErrSessionGone) {
		_, why := e.s.Alive()
		m.end(e, why)
		return nil, boxer.Errorf(boxer.ECodeSessionEnded, "session %s ended: %s", id, why)
	}
	if res != nil && !res.Alive {
		m.end(e, res.Ended)
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.execs++
	e.mu.Unlock()
	m.nudge()
	return &ExecResult{CellResult: res, Session: e.info()}, nil
}

// WriteFiles writes files into owner's session id.
func (m *Manager) WriteFiles(ctx context.Context, owner, id string, files []boxer.File) (*Info, error) {
	e, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	e.touch(0)
	if err := e.s.WriteFiles(files); err != nil {
		if errors.Is(err, sandbox.ErrSessionGone) {
			return nil, boxer.Errorf(boxer.ECodeSessionEnded, "session %s has ended", id)
		}
		return nil, err
	}
	info := e.info()
	return &info, nil
}

// OpenFile opens the file at p in owner's session id, at most limit
// bytes, and returns it with its size; the caller closes it.
func (m *Manager) OpenFile(ctx context.Context, owner, id, p string, limit int64) (*os.File, int64, error) {
	e, err := m.get(ctx, owner, id)
	if err != nil {
		return nil, 0, err
	}
	e.touch(0)
	f, size, reason, err := e.s.OpenFile(p, limit)
	if err != nil {
		return nil, 0, boxer.Errorf(boxer.ECodeSessionEnded, "session %s has ended", id)
	}
	switch {
	case reason == "":
		return f, size, nil
	case strings.HasPrefix(reason, "not found"):
		return nil, 0, boxer.Errorf(boxer.ECodeNotFound, "file %q: %s", p, reason)
	case strings.Contains(reason, "larger than"):
		return nil, 0, boxer.Errorf(boxer.ECodePayloadTooLarge, "file %q: %s", p, reason)
	}
	return nil, 0, boxer.Errorf(boxer.ECodeInvalidRequest, "file %q: %s", p, reason)
}

// touch marks e used now; running counts a cell starting (1) or ending
// (-1): a session with a cell running is never idle.
func (e *entry) touch(running int) {
	e.mu.Lock()
	e.lastUsed = time.Now()
	e.running += running
	e.mu.Unlock()
}

func (e *entry) cellsRunning() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

func (e *entry) info() Info {
	mem, _ := e.s.Memory() // not under e.mu: it waits for a Close under way
	e.mu.Lock()
	defer e.mu.Unlock()
	return Info{ID: e.id, CreatedAt: e.created, LastUsedAt: e.lastUsed, ExpiresAt: e.expiresLocked(),
		IdleTimeout: e.idle, MaxLifetime: e.life, MemoryLimit: e.limits.MemoryBytes, CPUs: e.limits.CPUs,
		Execs: e.execs, Busy: e.running > 0, MemoryBytes: mem}
}

func (e *entry) expiresLocked() time.Time {
	idle, life := e.lastUsed.Add(e.idle), e.created.Add(e.life)
	if idle.Before(life) {
		return idle
	}
	return life
}

// end closes e, records why it ended and removes it from the live
// sessions; the first end stands. Until the store has the end, e stays
// among the live ones, marked: a call to it meanwhile is told it ended.
func (m *Manager) end(e *entry, why string) {
	m.mu.Lock()
	if m.live[e.id] != e || e.endedReason != "" {
		m.mu.Unlock()
		return
	}
	e.endedReason = why
	m.mu.Unlock()
	m.finishEnd(e, why)
}

// finishEnd is end's work once e is marked ending.
func (m *Manager) finishEnd(e *entry, why string) {
	e.s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.store.EndSession(ctx, e.id, why, m.now()); err != nil {
		m.log.Error("record a session's end", "session", e.id, "err", err)
	}
	m.mu.Lock()
	delete(m.live, e.id)
	m.mu.Unlock()
	m.log.Info("session ended", "session", e.id, "reason", why)
}

func (m *Manager) nudge() { poke(m.wake) }

// poke wakes the goroutine waiting on ch, a channel of one, unless it is
// already woken.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reap ends sessions past their idle timeout or lifetime, at their
// deadlines, and every session of a zygote that died (their processes
// died with it).
func (m *Manager) reap() {
	defer close(m.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		next := now.Add(time.Hour)
		var expired, lost, gone []*entry
		m.mu.Lock()
		z := m.zyg
		for _, e := range m.live {
			if e.endedReason != "" {
				continue // being ended
			}
			if isDead(e.z) {
				lost = append(lost, e)
				continue
			}
			e.mu.Lock()
			at, running := e.expiresLocked(), e.running
			if life := e.created.Add(e.life); running > 0 {
				at = life // a running cell keeps it from idling, not from ageing
			}
			e.mu.Unlock()
			if alive, why := e.s.Alive(); !alive && running == 0 {
				// Died between cells (a cell's own end is Exec's to tell).
				e.endedReason = why
				gone = append(gone, e)
				continue
			}
			if !at.After(now) {
				expired = append(expired, e)
			} else if at.Before(next) {
				next = at
			}
		}
		for _, e := range expired {
			e.endedReason = expiryReason(e, now)
		}
		for _, e := range lost {
			e.endedReason = store.SessionLost
		}
		m.mu.Unlock()
		// Each is marked ending (a call to it is told so); closing one
		// waits for a call still using it, which must not hold up the rest.
		for _, e := range slices.Concat(expired, lost, gone) {
			go m.finishEnd(e, e.endedReason)
		}
		var dead <-chan struct{}
		if z != nil {
			dead = z.Dead()
		}
		timer.Reset(time.Until(next))
		select {
		case <-m.stop:
			return
		case <-m.wake:
		case <-timer.C:
		case <-dead:
		}
	}
}

func expiryReason(e *entry, now time.Time) string {
	if !e.created.Add(e.life).After(now) {
		return fmt.Sprintf("reached its lifetime of %s", e.life)
	}
	return fmt.Sprintf("idle for %s", e.idle)
}

// Stats is what /v1/health and the metrics report of the sessions.
type Stats struct {
	Live, Busy int
	Max        int
	// MemoryBytes is what their cgroups hold; IdleMemoryBytes the part of
	// it held by sessions with no cell running.
	MemoryBytes, IdleMemoryBytes int64
}

// Stats reads the sessions' figures.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	es := make([]*entry, 0, len(m.live))
	for _, e := range m.live {
		es = append(es, e)
	}
	m.mu.Unlock()
	st := Stats{Live: len(es), Max: m.cfg.Max}
	for _, e := range es {
		i := e.info()
		st.MemoryBytes += i.MemoryBytes
		if i.Busy {
			st.Busy++
		} else {
			st.IdleMemoryBytes += i.MemoryBytes
		}
	}
	return st
}

// Close ends every session (recorded as lost: the process is going) and
// the sessions' zygote.
func (m *Manager) Close() {
	close(m.stop)
	<-m.done
	<-m.refilled
	for len(m.ready) > 0 {
		(<-m.ready).s.Close()
	}
	m.mu.Lock()
	es := slices.Collect(maps.Values(m.live))
	z := m.zyg
	m.mu.Unlock()
	for _, e := range es {
		m.end(e, store.SessionLost)
	}
	if z != nil {
		z.Close()
	}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID makes a session id: "ses_" and 128 random bits. The id is the
// session's capability where no API key tells callers apart.
func newID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "ses_" + idEncoding.EncodeToString(b), nil
}
