package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"boxer"
	"boxer/internal/cgroup"
	"boxer/internal/sandbox/nsinit"
	"boxer/internal/seccomp"

	"golang.org/x/sys/unix"
)

// Engine runs jobs in fresh sandboxes. It implements boxer.Runner and is
// safe for concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	cgroups cgroup.Manager
	runtime *Runtime
	setup   nsinit.Setup // shared part of every sandbox's Setup
	filter  []byte       // the marshalled seccomp program
	// ipFilter is filter with IP sockets asked of a listener (seccomp's
	// NotifyIP), for warm jobs whose network namespace may be kept.
	// zygoteFilter and sealFilter are a zygote's own programs (seccomp's
	// Zygote and ZygoteSealed); all four are nil without seccomp.
	ipFilter, zygoteFilter, sealFilter []byte
	ids                                *idPool
	runsDir                            string
	lock                               *os.File // flock on the state dir: one engine per state dir
	spawn                              *spawner // starts every pid 1 (see spawner)
	// host are boxer's own hard rlimits, read in New: no sandbox gets more.
	host hostRlimits

	// zygoteIDs[k] is held while a zygote owns id block k. There are
	// sixteen, in the upper half of the engine's ids: by default the pool
	// has four lanes (the pre-imports, the lean one and two own lanes),
	// each of which may start a fresh zygote while the one it replaces
	// still serves, and sessions have one; the rest is room for more own
	// lanes.
	zygoteIDs [16]sync.Mutex
}

var _ boxer.Runner = (*Engine)(nil)

// New checks the host, cleans up after a previous instance that died, and
// returns an engine ready to run jobs.
func New(ctx context.Context, cfg Config) (_ *Engine, retErr error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkIDsMapped(cfg.IDBase, cfg.IDSpan); err != nil {
		return nil, err
	}
	host, err := readHostRlimits()
	if err != nil {
		return nil, err
	}
	if err := host.fit(cfg.Limits); err != nil {
		return nil, fmt.Errorf("default limits: %w", err)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, ids: newIDPool(cfg.IDBase, cfg.MaxSandboxes), spawn: newSpawner(), host: host}
	defer func() {
		if retErr != nil {
			e.Close()
		}
	}()
	if err := e.openStateDir(); err != nil {
		return nil, err
	}
	cg, err := cgroup.New(cgroup.Options{Parent: cfg.CgroupParent, Name: cfg.CgroupName})
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	e.cgroups = cg
	if err := cg.CleanupStale(); err != nil {
		return nil, fmt.Errorf("cgroups: clean up a previous instance: %w", err)
	}
	e.runtime, err = ProbePython(ctx, cfg.Python, cfg.ExtraBinds)
	if err != nil {
		return nil, err
	}
	e.setup = setupTemplate(e.runtime, cfg.TmpInodes)
	if !cfg.NoSeccomp {
		for _, f := range []struct {
			p   seccomp.Policy
			out *[]byte
		}{{seccomp.Default(), &e.filter}, {seccomp.NotifyIP(seccomp.Default()), &e.ipFilter},
			{seccomp.Zygote(), &e.zygoteFilter}, {seccomp.ZygoteSealed(), &e.sealFilter}} {
			prog, err := seccomp.Build(f.p)
			if err != nil {
				return nil, fmt.Errorf("seccomp: %w", err)
			}
			*f.out = prog.Marshal()
		}
	}
	return e, nil
}

// openStateDir creates the state dir, takes its lock and removes what a
// previous instance left behind (it may have been killed mid-run).
func (e *Engine) openStateDir() error {
	dir := e.cfg.StateDir
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := searchable(dir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("state dir lock: %w", err)
	}
	e.lock = lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("state dir %s is in use by another boxer: %w", dir, err)
	}
	e.runsDir = filepath.Join(dir, "runs")
	if err := os.MkdirAll(e.runsDir, 0o711); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	// MkdirAll's mode is cut by the umask (0077 would make it 0700, and
	// no sandbox could reach its mount points).
	if err := os.Chmod(e.runsDir, 0o711); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return removeRuns(e.runsDir, func(p string) {
		e.log.Info("removed a sandbox left by a previous instance", "dir", p)
	})
}

// removeRuns removes every run's dir under runsDir, unmounting its work
// dir first, and calls removed with each.
func removeRuns(runsDir string, removed func(string)) error {
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	for _, ent := range entries {
		p := filepath.Join(runsDir, ent.Name())
		if err := unmountWork(filepath.Join(p, "work")); err != nil {
			return fmt.Errorf("clean up %s: %w", p, err)
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("clean up %s: %w", p, err)
		}
		removed(p)
	}
	return nil
}

// RemoveStateDir removes a state dir no boxer uses any more, with the
// work dirs that one killed mid-run left mounted. (A boxer started on the
// dir would remove them itself; this is for a dir none will use again,
// such as a test's.)
func RemoveStateDir(dir string) error {
	runs := filepath.Join(dir, "runs")
	if _, err := os.Stat(runs); err == nil {
		if err := removeRuns(runs, func(string) {}); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// searchable checks that every directory from / to dir lets others through:
// a sandbox's pid 1 walks to its mount points as an unprivileged host uid.
func searchable(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by others (mode %v); sandboxes could not reach their mount points", p, fi.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

// Runtime describes the interpreter the engine runs.
func (e *Engine) Runtime() Runtime { return *e.runtime }

// Limits are the limits a job gets for what it leaves unset.
func (e *Engine) Limits() boxer.Limits { return e.cfg.Limits }

// CgroupVersion reports which cgroup hierarchy the engine uses.
func (e *Engine) CgroupVersion() cgroup.Version { return e.cgroups.Version() }

// CgroupPlacement says where the engine's runs live and how boxer got that
// cgroup.
func (e *Engine) CgroupPlacement() cgroup.Placement { return e.cgroups.Placement() }

// SeccompEnabled reports whether programs run under the syscall filter.
func (e *Engine) SeccompEnabled() bool { return len(e.filter) > 0 }

// JobLimits are the limits a job asking for l runs with: the engine's
// defaults for every zero field, checked against boxer's bounds and against
// what this host lets boxer give (a *boxer.Error, invalid_request, if they
// do not hold). The one place a job's limits are settled, for a cold run
// and a warm one alike.
func (e *Engine) JobLimits(l boxer.Limits) (boxer.Limits, error) {
	l = l.WithDefaults(e.cfg.Limits)
	if err := l.Validate(); err != nil {
		return l, boxer.Errorf(boxer.ECodeInvalidRequest, "%v", err)
	}
	return l, e.host.allow(l)
}

// Run runs job in a fresh sandbox and destroys the sandbox afterwards.
func (e *Engine) Run(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
	t0 := time.Now()
	lim, err := e.JobLimits(job.Limits)
	if err != nil {
		return nil, err
	}
	if job.Runtime != "" && job.Runtime != e.runtime.Name {
		return nil, boxer.Errorf(boxer.ECodeInvalidRequest, "runtime %q is not available; this server runs %q", job.Runtime, e.runtime.Name)
	}
	path, err := e.resolve(job.Argv)
	if err != nil {
		return nil, err
	}
	sb, err := e.prepare(ctx, lim)
	if err != nil {
		return nil, err
	}
	defer sb.destroy()
	t1 := time.Now()
	res, err := sb.run(ctx, job, lim, path)
	if err != nil {
		return nil, err
	}
	res.Timing.Acquire = t1.Sub(t0)
	res.Timing.Run = res.Wall
	res.Timing.Collect = time.Since(t1) - res.Wall
	return res, nil
}

// resolve maps argv[0] to the executable's path inside the sandbox: the
// runtime's names ("python", "python3") to its interpreter, an absolute
// path to itself, and a bare name to /usr/bin.
func (e *Engine) resolve(argv []string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", boxer.Errorf(boxer.ECodeInvalidRequest, "command is empty")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return "", boxer.Errorf(boxer.ECodeInvalidRequest, "command contains a NUL byte")
		}
	}
	switch name := argv[0]; {
	case slices.Contains(e.runtime.Aliases, name):
		return e.runtime.Path, nil
	case filepath.IsAbs(name):
		return name, nil
	case !strings.Contains(name, "/"):
		return "/usr/bin/" + name, nil
	default:
		return filepath.Join(WorkDir, name), nil
	}
}

func (e *Engine) artifactLimits() artifactLimits {
	return artifactLimits{perFile: e.cfg.ArtifactBytes, total: e.cfg.ArtifactsTotalBytes}
}

// Close releases the state dir and the spawner's thread, whose exit kills
// any sandbox still running. Cancel runs first to have their results.
func (e *Engine) Close() error {
	e.spawn.close()
	var errs []error
	if e.cgroups != nil {
		errs = append(errs, e.cgroups.Close())
	}
	if e.lock != nil {
		errs = append(errs, e.lock.Close())
	}
	return errors.Join(errs...)
}

// Ready reports whether a sandbox can be prepared right now, by preparing
// one and destroying it unused.
func (e *Engine) Ready(ctx context.Context) error {
	sb, err := e.prepare(ctx, e.cfg.Limits)
	if err != nil {
		return err
	}
	sb.destroy()
	return nil
}
