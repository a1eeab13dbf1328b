package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// New detects the cgroup version from opts.MountInfo, finds the parent
// cgroup and creates the base <parent>/<opts.Name> (an existing base is
// reused: it may hold stale runs, see CleanupStale). On v2 it also enables
// the cpu, memory and pids controllers for the runs, which may move this
// process (see placeV2 and the package doc).
func New(opts Options) (Manager, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	mountInfo, err := readFile(opts.MountInfo)
	if err != nil {
		return nil, err
	}
	self, err := readFile(opts.ProcSelfCgroup)
	if err != nil {
		return nil, err
	}
	l, err := detectLayout(opts.Root, opts.Parent, mountInfo, self)
	if err != nil {
		return nil, err
	}
	f := newFsys(opts.hooks)
	if l.version == V1 {
		return newV1(f, l, opts.Name)
	}
	return newV2(f, l, opts)
}

// probe is the heart of Check: a run cgroup is created with every limit
// set, its usage read, and removed, so that each controller file boxer
// writes or reads is exercised once.
func probe(m Manager) error {
	name := "check-" + strconv.Itoa(os.Getpid())
	c, err := m.Create(name, Resources{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 16})
	if err != nil {
		return fmt.Errorf("cgroup: boxer cannot create and limit a run's cgroup (is it running as root, with the cgroup filesystem mounted read-write?): %w", err)
	}
	_, statsErr := c.Stats()
	if statsErr != nil {
		statsErr = fmt.Errorf("cgroup: boxer cannot read a run's usage: %w", statsErr)
	}
	return errors.Join(statsErr, c.Destroy())
}

// swapEscape explains, for Check, that a run could swap past its memory
// limit: swap is on, but the kernel keeps no per-cgroup account of it (file,
// memory.memsw.limit_in_bytes on v1 or memory.swap.max on v2, is missing).
func swapEscape(file string) error {
	if exists(file) {
		return nil
	}
	swaps, err := os.ReadFile("/proc/swaps")
	if err != nil || len(strings.Split(strings.TrimSpace(string(swaps)), "\n")) < 2 {
		return nil // no swap device beyond the header line
	}
	return fmt.Errorf("cgroup: swap is on but the kernel keeps no per-cgroup swap account (%s is missing), so a run can swap beyond its memory limit; boot with swapaccount=1 or turn swap off", file)
}

// explainMissingParent adds why a file of the parent cgroup can be missing.
func explainMissingParent(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (the parent cgroup does not exist: Options.Parent must name an existing cgroup)", err)
	}
	return err
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
