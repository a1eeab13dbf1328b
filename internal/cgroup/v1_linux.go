package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// unlimited is what a v1 memory limit file takes for no limit.
const unlimited = "-1"

// v1Manager keeps the base in each v1 hierarchy. A run is one directory of
// the same name in each of them.
type v1Manager struct {
	fs fsys
	// bases maps each of v1Controllers to the base directory in its
	// hierarchy; co-mounted controllers map to the same directory.
	bases map[string]string
	// memsw and tcp say whether the memory hierarchy has swap and TCP
	// buffer accounting (memory.memsw.* and memory.kmem.tcp.*): the same
	// for every cgroup in it, so looked up once.
	memsw, tcp bool
}

func (m *v1Manager) Close() error {
	var errs []error
	for _, dir := range distinct(m.bases) {
		errs = append(errs, removeIfEmpty(m.fs, dir))
	}
	return errors.Join(errs...)
}

// newV1 creates the base in every hierarchy.
func newV1(f fsys, l layout, name string) (*v1Manager, error) {
	m := &v1Manager{fs: f, bases: make(map[string]string)}
	for c, parent := range l.v1Parents {
		m.bases[c] = filepath.Join(parent, name)
	}
	for _, dir := range distinct(m.bases) {
		if err := f.mkdir(dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, explainMissingParent(err)
		}
	}
	m.memsw = exists(filepath.Join(m.bases["memory"], "memory.memsw.limit_in_bytes"))
	m.tcp = exists(filepath.Join(m.bases["memory"], "memory.kmem.tcp.limit_in_bytes"))
	return m, nil
}

func (m *v1Manager) Version() Version { return V1 }

func (m *v1Manager) Placement() Placement {
	return Placement{Base: m.bases["memory"], How: "boxer's own cgroup in each v1 hierarchy (v1 has no rule against processes beside child cgroups)"}
}

func (m *v1Manager) Create(name string, r Resources) (_ Cgroup, retErr error) {
	if err := validName("cgroup name", name); err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	c := m.cgroup(name)
	var made []string
	defer func() {
		if retErr != nil {
			c.held.close()
			for _, dir := range made {
				_ = m.fs.rmdir(dir)
			}
		}
	}()
	for _, dir := range c.distinct {
		if err := m.fs.mkdir(dir); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("%w (a leftover of an earlier instance? CleanupStale removes those)", err)
			}
			return nil, err
		}
		made = append(made, dir)
	}
	// A new memory cgroup starts unlimited: setMemory need not read it to
	// know which of limit and memsw to write first.
	c.set[c.file("memory", "memory.limit_in_bytes")] = unlimited
	if err := c.Set(r); err != nil {
		return nil, err
	}
	return c, nil
}

// cgroup returns the run cgroup name, without creating it.
func (m *v1Manager) cgroup(name string) *v1Cgroup {
	c := &v1Cgroup{fs: m.fs, held: newHeld(m.fs), dirs: make(map[string]string), set: written{}, memsw: m.memsw, tcp: m.tcp}
	for ctl, base := range m.bases {
		c.dirs[ctl] = filepath.Join(base, name)
	}
	c.distinct = distinct(c.dirs)
	return c
}

func (m *v1Manager) CleanupStale() error {
	// The base as a whole is one cgroup per hierarchy: freezing and killing
	// it takes every stale run with it, and any stray process put in the
	// base itself.
	base := &v1Cgroup{fs: m.fs, held: newHeld(fsys{}), dirs: m.bases, distinct: distinct(m.bases), set: written{}}
	defer base.held.close()
	if err := base.Kill(); err != nil {
		return err
	}
	var errs []error
	for _, dir := range base.distinct {
		subs, err := subdirs(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range subs {
			errs = append(errs, m.fs.removeTree(filepath.Join(dir, s)))
		}
	}
	return errors.Join(errs...)
}

func (m *v1Manager) Check() error {
	var problems []error
	for _, dir := range distinct(m.bases) {
		if !isDir(dir) {
			problems = append(problems, fmt.Errorf("cgroup: the base %s is missing; boxer creates it at start, so something removed it since", dir))
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	return errors.Join(swapEscape(filepath.Join(m.bases["memory"], "memory.memsw.limit_in_bytes")), probe(m))
}

// v1Cgroup is one run: a directory per hierarchy.
type v1Cgroup struct {
	fs   fsys
	held *held
	// dirs maps each of v1Controllers to the run's directory in its
	// hierarchy; distinct lists each directory once.
	dirs     map[string]string
	distinct []string
	set      written
	// memsw and tcp are the manager's: which memory files exist.
	memsw, tcp bool
	// base is what the counters held at the last Reset: Stats counts from
	// there.
	base Stats
}

func (c *v1Cgroup) Path() string { return c.dirs["memory"] }

func (c *v1Cgroup) FD() (int, bool) { return -1, false }

func (c *v1Cgroup) file(controller, name string) string {
	return filepath.Join(c.dirs[controller], name)
}

func (c *v1Cgroup) Set(r Resources) error {
	if err := r.validate(); err != nil {
		return err
	}
	if err := c.set.put(c.held, c.file("cpu", "cpu.cfs_period_us"), strconv.Itoa(cfsPeriodUs)); err != nil {
		return err
	}
	if err := c.set.put(c.held, c.file("cpu", "cpu.cfs_quota_us"), strconv.FormatInt(r.cpuQuotaUs(), 10)); err != nil {
		return err
	}
	if err := c.set.put(c.held, c.file("cpu", "cpu.shares"), strconv.Itoa(max(2, r.weight()*1024/100))); err != nil {
		return err
	}
	if err := c.setMemory(r.MemoryBytes); err != nil {
		return err
	}
	// Best effort: swappiness is not writable on every kernel, and with
	// memsw capped swapping cannot get a run past its limit anyway; it only
	// keeps a run from being slowed down by swap.
	_ = c.set.put(c.held, c.file("memory", "memory.swappiness"), "0")
	pids := "max"
	if r.Pids > 0 {
		pids = strconv.Itoa(r.Pids)
	}
	return c.set.put(c.held, c.file("pids", "pids.max"), pids)
}

// setMemory sets memory.limit_in_bytes and, where swap accounting exists,
// memory.memsw.limit_in_bytes (memory plus swap) to the same value, so swap
// is no way around the limit. The kernel insists on memsw >= limit at every
// moment, so a raise writes memsw first and a cut writes the limit first.
// v1 counts TCP socket buffers apart from the memory limit, so the limit
// goes to memory.kmem.tcp.limit_in_bytes too: without it a run could pin
// the host's whole tcp_mem (gigabytes) in unread loopback data. (v2
// charges socket memory to memory.max.)
func (c *v1Cgroup) setMemory(bytes int64) error {
	limitFile := c.file("memory", "memory.limit_in_bytes")
	memswFile := c.file("memory", "memory.memsw.limit_in_bytes")
	tcpFile := c.file("memory", "memory.kmem.tcp.limit_in_bytes")
	value := unlimited
	if bytes > 0 {
		value = strconv.FormatInt(bytes, 10)
	}
	cur, known := c.set[limitFile]
	if known && cur == value {
		return nil
	}
	delete(c.set, limitFile)
	if err := c.writeMemory(bytes, value, cur, limitFile, memswFile); err != nil {
		return err
	}
	if c.tcp {
		if err := c.held.write(tcpFile, value); err != nil {
			return err
		}
	}
	c.set[limitFile] = value
	return nil
}

// writeMemory writes value (bytes, or unlimited for 0) to the limit and
// memsw. last is what the limit holds, as Set last wrote it, or "" if
// unknown: then it is read.
func (c *v1Cgroup) writeMemory(bytes int64, value, last, limitFile, memswFile string) error {
	if !c.memsw {
		return c.held.write(limitFile, value)
	}
	var cur int64
	switch last {
	case unlimited:
		cur = math.MaxInt64
	case "":
		var err error
		if cur, err = readInt(limitFile); err != nil {
			return err
		}
	default:
		var err error
		if cur, err = strconv.ParseInt(last, 10, 64); err != nil {
			return err
		}
	}
	order := []string{limitFile, memswFile}
	if bytes == 0 || bytes > cur {
		order = []string{memswFile, limitFile}
	}
	for _, f := range order {
		if err := c.held.write(f, value); err != nil {
			return err
		}
	}
	return nil
}

// Add writes pid into the pids hierarchy first, so that a process is in
// no hierarchy of the run without being in that one (see Kill).
func (c *v1Cgroup) Add(pid int) error {
	first := c.dirs["pids"]
	dirs := append([]string{first}, slices.DeleteFunc(slices.Clone(c.distinct), func(d string) bool { return d == first })...)
	for _, dir := range dirs {
		if err := c.held.write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (c *v1Cgroup) Stats() (Stats, error) {
	peak, err := c.held.readInt(c.file("memory", "memory.max_usage_in_bytes"))
	if err != nil {
		return Stats{}, err
	}
	ooms, err := c.held.readKey(c.file("memory", "memory.oom_control"), "oom_kill")
	if err != nil {
		return Stats{}, err
	}
	cpu, err := c.held.readInt(c.file("cpuacct", "cpuacct.usage"))
	if err != nil {
		return Stats{}, err
	}
	return Stats{MemoryPeak: peak, OOMKills: ooms - c.base.OOMKills, CPU: time.Duration(cpu) - c.base.CPU}, nil
}

// Kill freezes the cgroup, so that nothing in it can fork or exit while the
// pids are read, SIGKILLs every process, thaws it so the kills take effect
// (a frozen task does not die), and repeats until no hierarchy lists a
// process. v1 has no cgroup.kill.
func (c *v1Cgroup) Kill() error {
	freezer := c.file("freezer", "freezer.state")
	empty := func() (bool, error) {
		// One read answers the common case, a run whose processes are all
		// gone: pids.current counts every task in the run's pids cgroup and
		// below, and Add puts a process there before anywhere else. Walking
		// every hierarchy's cgroup.procs costs dozens of system calls.
		if n, err := c.Tasks(); err == nil && n == 0 {
			return true, nil
		}
		pids, err := c.pids()
		return len(pids) == 0, err
	}
	var stuck bool // the last round's freeze never settled
	round := func() error {
		// The freezer dir is missing only in a half-created stale run,
		// which no process was ever added to.
		hasFreezer := exists(freezer)
		if hasFreezer {
			if err := c.fs.write(freezer, "FROZEN"); err != nil {
				return err
			}
			// A task in uninterruptible sleep can hold off FROZEN; the
			// kills are sent anyway and land when it wakes.
			frozen, err := poll(freezeWait, func() (bool, error) {
				s, err := readFile(freezer)
				return strings.TrimSpace(s) == "FROZEN", err
			})
			if err != nil {
				return err
			}
			stuck = !frozen
		}
		pids, err := c.pids()
		if err != nil {
			return err
		}
		killErr := sigkill(pids)
		if hasFreezer {
			if err := c.fs.write(freezer, "THAWED"); err != nil {
				return errors.Join(killErr, err)
			}
		}
		return killErr
	}
	ok, err := killRounds(c.fs.h.killTimeout, empty, round)
	if err != nil || ok {
		return err
	}
	pids, _ := c.pids()
	err = fmt.Errorf("cgroup: kill %s: processes %v still there after %v", c.Path(), pids, c.fs.h.killTimeout)
	if stuck {
		err = fmt.Errorf("%w (%s never reached FROZEN: a task is stuck in the kernel)", err, freezer)
	}
	return err
}

func (c *v1Cgroup) Memory() (int64, error) {
	return c.held.readInt(c.file("memory", "memory.usage_in_bytes"))
}

func (c *v1Cgroup) Tasks() (int64, error) { return c.held.readInt(c.file("pids", "pids.current")) }

// pids lists the processes in the run, over every hierarchy and every
// cgroup below the run's.
func (c *v1Cgroup) pids() ([]int, error) {
	var all []int
	for _, dir := range c.distinct {
		pids, err := treePids(dir)
		if err != nil {
			return nil, err
		}
		all = append(all, pids...)
	}
	return all, nil
}

func (c *v1Cgroup) Destroy() error {
	if err := c.Kill(); err != nil {
		return err
	}
	var errs []error
	for _, dir := range c.distinct {
		errs = append(errs, c.fs.removeTree(dir))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.held.close()
	return nil
}

// distinct returns the directories of dirs, each once, in a stable order.
func distinct(dirs map[string]string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, d)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
