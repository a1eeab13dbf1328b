package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// v2Manager keeps the base in the unified hierarchy.
type v2Manager struct {
	fs fsys
	// home is the cgroup above the base, found by placeV2; how says how.
	home, how string
	base      string
	// noReset is set once a Reset found that the kernel cannot reset
	// memory.peak (see ErrNotReusable).
	noReset atomic.Bool
}

func (m *v2Manager) Close() error { return removeIfEmpty(m.fs, m.base) }

func (m *v2Manager) Placement() Placement { return Placement{Base: m.base, How: m.how} }

// newV2 finds boxer a home (see placeV2), then creates the base in it with
// the controllers enabled for the runs. The base never holds a process, so
// enabling there is always allowed.
func newV2(f fsys, l layout, opts Options) (*v2Manager, error) {
	home, how, err := placeV2(f, l, opts)
	if err != nil {
		return nil, err
	}
	if err := available(home); err != nil {
		return nil, err
	}
	m := &v2Manager{fs: f, home: home, how: how, base: filepath.Join(home, opts.Name)}
	if err := f.mkdir(m.base); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := enableControllers(f, m.base); err != nil {
		return nil, err
	}
	return m, nil
}

// available checks that cgroup dir may hand the controllers down at all,
// which only the cgroup above it (systemd, the container runtime) decides.
func available(dir string) error {
	file := filepath.Join(dir, "cgroup.controllers")
	s, err := readFile(file)
	if err != nil {
		return explainMissingParent(err)
	}
	have := strings.Fields(s)
	var missing []string
	for _, c := range v2Controllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroup: boxer needs the %s controllers but %s lists only %q (missing: %s). The cgroup above did not delegate them; under systemd run boxer in a unit with Delegate=yes, in a container give it its own cgroup namespace with the controllers enabled",
			strings.Join(v2Controllers, ", "), file, strings.Join(have, " "), strings.Join(missing, ", "))
	}
	return nil
}

// enableControllers writes to dir's cgroup.subtree_control only the
// controllers not already enabled there, so that an enabled parent is never
// written to (and never fails with EBUSY) again.
func enableControllers(f fsys, dir string) error {
	missing, err := notEnabled(dir)
	if err != nil || len(missing) == 0 {
		return err
	}
	add := make([]string, len(missing))
	for i, c := range missing {
		add[i] = "+" + c
	}
	return f.write(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(add, " "))
}

// notEnabled lists the controllers boxer needs that dir does not enable for
// its children.
func notEnabled(dir string) ([]string, error) {
	s, err := readFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(s)
	return slices.DeleteFunc(slices.Clone(v2Controllers), func(c string) bool { return slices.Contains(have, c) }), nil
}

// enabled reports whether dir enables every controller boxer needs for its
// children.
func enabled(dir string) bool {
	missing, err := notEnabled(dir)
	return err == nil && len(missing) == 0
}

func (m *v2Manager) Version() Version { return V2 }

func (m *v2Manager) Create(name string, r Resources) (_ Cgroup, retErr error) {
	if err := validName("cgroup name", name); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(m.base, name)
	if err := m.fs.mkdir(dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w (a leftover of an earlier instance? CleanupStale removes those)", err)
		}
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = m.fs.rmdir(dir)
		}
	}()
	c := &v2Cgroup{fs: m.fs, held: newHeld(m.fs), dir: dir, fd: -1, peak: -1, noReset: &m.noReset, set: written{}}
	defer func() {
		if retErr != nil {
			c.held.close()
		}
	}()
	if err := c.Set(r); err != nil {
		return nil, err
	}
	// A plain read-only directory fd: that is what clone3 takes as
	// CLONE_INTO_CGROUP's target.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, newFileError("open", dir, err)
	}
	c.fd = fd
	return c, nil
}

func (m *v2Manager) CleanupStale() error {
	// cgroup.kill (and the freezer) act on a whole subtree, so killing the
	// base kills every stale run at once.
	if err := killV2(m.fs, m.base); err != nil {
		return err
	}
	subs, err := subdirs(m.base)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range subs {
		errs = append(errs, m.fs.removeTree(filepath.Join(m.base, s)))
	}
	return errors.Join(errs...)
}

func (m *v2Manager) Check() error {
	if err := available(m.home); err != nil {
		return err
	}
	missing, err := notEnabled(m.base)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroup: the %s controller is not enabled in %s, so runs could not be limited by it; something changed it after boxer started", missing[0], filepath.Join(m.base, "cgroup.subtree_control"))
	}
	return errors.Join(swapEscape(filepath.Join(m.base, "memory.swap.max")), probe(m))
}

// v2Cgroup is one run's directory in the unified hierarchy.
type v2Cgroup struct {
	fs   fsys
	held *held
	dir  string
	set  written

	mu sync.Mutex
	// fd is the directory fd handed out by FD; -1 once Destroy closed it.
	fd int
	// peak is memory.peak opened for reading and writing by the first
	// Reset, which resets the peak for reads through it; -1 before.
	peak int
	// noReset is the manager's: set once a Reset found that this kernel
	// cannot reset memory.peak, so that no other cgroup tries again.
	noReset *atomic.Bool
	// base is what the counters held at the last Reset: Stats counts from
	// there.
	base Stats
}

func (c *v2Cgroup) Path() string { return c.dir }

func (c *v2Cgroup) FD() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd, c.fd >= 0
}

func (c *v2Cgroup) file(name string) string { return filepath.Join(c.dir, name) }

func (c *v2Cgroup) Set(r Resources) error {
	if err := r.validate(); err != nil {
		return err
	}
	quota := "max"
	if q := r.cpuQuotaUs(); q > 0 {
		quota = strconv.FormatInt(q, 10)
	}
	if err := c.set.put(c.held, c.file("cpu.max"), quota+" "+strconv.Itoa(cfsPeriodUs)); err != nil {
		return err
	}
	if err := c.set.put(c.held, c.file("cpu.weight"), strconv.Itoa(r.weight())); err != nil {
		return err
	}
	mem := "max"
	if r.MemoryBytes > 0 {
		mem = strconv.FormatInt(r.MemoryBytes, 10)
	}
	if err := c.set.put(c.held, c.file("memory.max"), mem); err != nil {
		return err
	}
	// No swap at all, limit or not: v2 counts swap apart from memory.max,
	// so any swap allowance would be memory beyond the limit. The file is
	// missing when the kernel has no swap support.
	if swap := c.file("memory.swap.max"); c.set[swap] != "0" && exists(swap) {
		if err := c.set.put(c.held, swap, "0"); err != nil {
			return err
		}
	}
	pids := "max"
	if r.Pids > 0 {
		pids = strconv.Itoa(r.Pids)
	}
	return c.set.put(c.held, c.file("pids.max"), pids)
}

func (c *v2Cgroup) Add(pid int) error {
	return c.held.write(c.file("cgroup.procs"), strconv.Itoa(pid))
}

func (c *v2Cgroup) Stats() (Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats()
}

func (c *v2Cgroup) stats() (Stats, error) {
	var st Stats
	// memory.peak arrived in Linux 5.19; before it the peak is unknown.
	if c.peak >= 0 {
		n, err := readPeak(c.peak, c.file("memory.peak"))
		if err != nil {
			return Stats{}, err
		}
		st.MemoryPeak = n
	} else if peak := c.file("memory.peak"); exists(peak) {
		n, err := readInt(peak)
		if err != nil {
			return Stats{}, err
		}
		st.MemoryPeak = n
	}
	ooms, err := c.held.readKey(c.file("memory.events"), "oom_kill")
	if err != nil {
		return Stats{}, err
	}
	st.OOMKills = ooms - c.base.OOMKills
	usec, err := c.held.readKey(c.file("cpu.stat"), "usage_usec")
	if err != nil {
		return Stats{}, err
	}
	st.CPU = time.Duration(usec)*time.Microsecond - c.base.CPU
	return st, nil
}

func (c *v2Cgroup) Memory() (int64, error) { return c.held.readInt(c.file("memory.current")) }

func (c *v2Cgroup) Tasks() (int64, error) { return c.held.readInt(c.file("pids.current")) }

func (c *v2Cgroup) Kill() error { return killV2(c.fs, c.dir) }

func (c *v2Cgroup) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := killV2(c.fs, c.dir); err != nil {
		return err
	}
	if err := c.fs.removeTree(c.dir); err != nil {
		return err
	}
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
		c.fd = -1
	}
	if c.peak >= 0 {
		_ = unix.Close(c.peak)
		c.peak = -1
	}
	c.held.close()
	return nil
}

// killV2 kills every process in dir's subtree and waits for "populated 0"
// in cgroup.events. cgroup.kill (Linux 5.14) does it in one write: the
// kernel also stops the subtree from forking meanwhile. Before it, the
// subtree is frozen, its processes SIGKILLed and thawed, until it is empty.
// A missing dir counts as empty.
func killV2(f fsys, dir string) error {
	if !isDir(dir) {
		return nil
	}
	events := filepath.Join(dir, "cgroup.events")
	empty := func() (bool, error) {
		populated, err := readKey(events, "populated")
		return populated == 0, err
	}
	var ok bool
	var err error
	if kill := filepath.Join(dir, "cgroup.kill"); exists(kill) {
		if done, err := empty(); done || err != nil {
			return err
		}
		if err := f.write(kill, "1"); err != nil {
			return err
		}
		ok, err = poll(f.h.killTimeout, empty)
	} else {
		ok, err = killRounds(f.h.killTimeout, empty, func() error { return freezeKillThaw(f, dir) })
	}
	if err != nil || ok {
		return err
	}
	pids, _ := treePids(dir)
	return fmt.Errorf("cgroup: kill %s: still populated after %v, processes %v", dir, f.h.killTimeout, pids)
}

// freezeKillThaw is one round of the kill for kernels without cgroup.kill.
// Freezing first means nothing forks or exits while the pids are read and
// killed; thawing lets the kills take effect.
func freezeKillThaw(f fsys, dir string) error {
	freeze := filepath.Join(dir, "cgroup.freeze")
	events := filepath.Join(dir, "cgroup.events")
	if err := f.write(freeze, "1"); err != nil {
		return err
	}
	// A task stuck in the kernel can hold off "frozen 1"; kill anyway, the
	// signal lands when it wakes.
	if _, err := poll(freezeWait, func() (bool, error) {
		frozen, err := readKey(events, "frozen")
		return frozen == 1, err
	}); err != nil {
		return err
	}
	pids, err := treePids(dir)
	if err != nil {
		return err
	}
	killErr := sigkill(pids)
	return errors.Join(killErr, f.write(freeze, "0"))
}
