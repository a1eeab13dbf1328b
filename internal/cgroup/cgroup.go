package cgroup

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
)

// Version is the cgroup API in use on this host.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string {
	switch v {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return "Version(" + strconv.Itoa(int(v)) + ")"
}

// Resources are the limits of one cgroup. A zero field means unlimited:
// Set writes the whole struct, so a zero field also lifts an earlier limit.
type Resources struct {
	// CPUs is the CPU bandwidth in cores (0.5 = half a core), enforced by the
	// CFS quota over a 100 ms period. Quotas under 1 ms per period, the
	// kernel's minimum, are raised to 1 ms.
	CPUs float64
	// MemoryBytes caps the cgroup's memory. Swap is never a way around it:
	// swap is limited to the same total (v1 memsw) or to zero (v2).
	MemoryBytes int64
	// Pids caps the number of tasks (processes and threads).
	Pids int
	// Weight is the cgroup's share of contended CPU, on cgroup v2's
	// cpu.weight scale (1 to 10000); 0 means the default, 100. On v1 it
	// becomes cpu.shares (100 is 1024).
	Weight int
}

func (r Resources) validate() error {
	switch {
	case math.IsNaN(r.CPUs) || math.IsInf(r.CPUs, 0) || r.CPUs < 0:
		return fmt.Errorf("cgroup: invalid CPUs %v", r.CPUs)
	case r.MemoryBytes < 0:
		return fmt.Errorf("cgroup: invalid MemoryBytes %d", r.MemoryBytes)
	case r.Pids < 0:
		return fmt.Errorf("cgroup: invalid Pids %d", r.Pids)
	case r.Weight < 0 || r.Weight > 10000:
		return fmt.Errorf("cgroup: invalid Weight %d", r.Weight)
	}
	return nil
}

// cfsPeriodUs is the CFS bandwidth period used on both versions. 100 ms is
// the kernel's default; a shorter one costs scheduler overhead, a longer one
// lets a run burst for longer before it is throttled.
const cfsPeriodUs = 100000

// cfsMinQuotaUs is the smallest quota the kernel accepts (1 ms).
const cfsMinQuotaUs = 1000

// weight is r.Weight with its default applied.
func (r Resources) weight() int {
	if r.Weight == 0 {
		return 100
	}
	return r.Weight
}

// cpuQuotaUs returns the CFS quota for r, or -1 for unlimited.
func (r Resources) cpuQuotaUs() int64 {
	if r.CPUs == 0 {
		return -1
	}
	return max(int64(math.Round(r.CPUs*cfsPeriodUs)), cfsMinQuotaUs)
}

// Stats is what a cgroup used since it was made or last Reset. Read it
// after the run has ended, before Destroy.
type Stats struct {
	// MemoryPeak is the highest memory use in bytes; 0 when the kernel does
	// not report it (v2 before Linux 5.19, which added memory.peak).
	MemoryPeak int64
	// OOMKills counts processes the kernel's OOM killer killed in the cgroup.
	OOMKills int64
	// CPU is the CPU time (user and system) of every task that ran in it.
	CPU time.Duration
}

// Manager creates per-run cgroups under one base cgroup. Its methods are
// safe for concurrent use.
type Manager interface {
	// Version reports which cgroup API the Manager drives.
	Version() Version
	// Create makes the empty cgroup <base>/name and applies r. name is one
	// path element, unique among the live runs; Create fails if it exists.
	Create(name string, r Resources) (Cgroup, error)
	// CleanupStale kills every process under the base and removes every
	// cgroup below it: the leftovers of an instance that was killed before
	// it could clean up.
	//
	// Precondition: no other live boxer uses the same base (the same Root,
	// Parent and Name), or its runs are killed too. Call it once at start,
	// before the first Create.
	CleanupStale() error
	// Close removes the base if no run cgroup is left in it; a base that
	// still holds runs (or, on v2, boxer's own supervisor cgroup) stays,
	// and is cleaned by the next start's CleanupStale. Call it last.
	Close() error
	// Placement says where the runs live and how boxer came to own that
	// cgroup.
	Placement() Placement
	// Check verifies, for `boxer doctor`, that every controller boxer needs
	// is present and writable, by creating, limiting, reading and removing a
	// probe cgroup. Its error explains each problem in plain words.
	Check() error
}

// Placement is where a Manager keeps the runs, for `boxer doctor` and the
// start-up log.
type Placement struct {
	// Base is the directory of the cgroup that holds the runs (on v1, its
	// directory in the memory hierarchy).
	Base string
	// How says in a sentence how boxer got the cgroup above the base.
	How string
}

// Cgroup is one run's cgroup. Its methods are safe for concurrent use.
type Cgroup interface {
	// Path is the cgroup's directory (on v1, its directory in the memory
	// hierarchy), for logs and diagnostics.
	Path() string
	// Set applies r in full; see Resources. On error some limits may be
	// applied and others not: Destroy the cgroup rather than run in it.
	Set(r Resources) error
	// Add moves the process pid (all its threads) into the cgroup, in every
	// controller. On v1 the engine must Add the child before it execs the
	// untrusted program; on v2 it can start it inside (see FD).
	Add(pid int) error
	// FD returns a directory fd of the cgroup for SysProcAttr.UseCgroupFD
	// and CgroupFD (clone3 CLONE_INTO_CGROUP), and true, on v2; -1 and false
	// on v1. The Cgroup owns the fd: it stays open until Destroy succeeds and
	// must not be closed by the caller.
	FD() (int, bool)
	// Stats reads what the cgroup used so far.
	Stats() (Stats, error)
	// Memory reads the memory charged to the cgroup now: what counts
	// against its limit.
	Memory() (int64, error)
	// Tasks counts the tasks (threads) in the cgroup and below it from the
	// pids controller: a fork under way is counted, and a task that has
	// exited until its parent reaps it.
	Tasks() (int64, error)
	// Kill kills every process in the cgroup, including daemons that left
	// their process group or session, and returns once the cgroup is empty.
	// It gives up with an error after a few seconds.
	Kill() error
	// Reset readies the cgroup for another run once the last has ended: it
	// kills what is left, gives back the memory the last run left charged,
	// and starts the counters Stats reports (peak, OOM kills, CPU) again,
	// so that nothing of the last run shows in the next one's figures or
	// limits (see reset_linux.go). Limits stay: Set them before the next
	// run. Reset fails with ErrNotReusable where the kernel cannot do it
	// all, and with another error when the cgroup will not empty: either
	// way, Destroy it and Create another.
	//
	// Precondition: no other method of the cgroup is in use.
	Reset() error
	// Destroy kills what is left and removes the cgroup. It may be called
	// again after an error, and is a no-op once it has succeeded.
	Destroy() error
}

// Options say where the cgroups go. The zero value is valid.
type Options struct {
	// Root is where the cgroup filesystems are mounted: the v2 mount point,
	// or the directory holding the v1 hierarchies. Default /sys/fs/cgroup.
	Root string
	// Parent, when set, is the cgroup (a path as /proc/self/cgroup shows it,
	// e.g. "/boxer.slice") under which the base is created, instead of the
	// cgroup this process runs in. It must exist in every hierarchy used.
	Parent string
	// Name is the base directory created under the parent. Default "boxer".
	Name string
	// ProcSelfCgroup and MountInfo are the files read to find this process's
	// cgroup and the mounts; tests point them at fakes. Default
	// /proc/self/cgroup and /proc/self/mountinfo.
	ProcSelfCgroup string
	MountInfo      string

	// hooks replace, in tests, what a tree of plain files cannot imitate.
	hooks hooks
}

// hooks are nil or zero in production.
type hooks struct {
	// mkdir makes a cgroup directory; a fake also makes the control files
	// the kernel would.
	mkdir func(dir string) error
	// rmdir removes a cgroup directory; a fake removes its files too.
	rmdir func(dir string) error
	// write stands in for writing a control file, e.g. to return EBUSY.
	write func(file, data string) error
	// pid is this process's pid as written to cgroup.procs.
	pid int
	// startScope stands in for systemd's StartTransientUnit: it moves pid
	// into the scope unit. When it is set, noSystemd says systemd is not
	// running.
	startScope func(unit string, pid int) error
	noSystemd  bool
	// killTimeout bounds Kill.
	killTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Root == "" {
		o.Root = "/sys/fs/cgroup"
	}
	if o.Name == "" {
		o.Name = "boxer"
	}
	if o.ProcSelfCgroup == "" {
		o.ProcSelfCgroup = "/proc/self/cgroup"
	}
	if o.MountInfo == "" {
		o.MountInfo = "/proc/self/mountinfo"
	}
	return o
}

func (o Options) validate() error {
	if !path.IsAbs(o.Root) {
		return fmt.Errorf("cgroup: Root %q is not an absolute path", o.Root)
	}
	if o.Parent != "" && (!path.IsAbs(o.Parent) || path.Clean(o.Parent) != o.Parent) {
		return fmt.Errorf("cgroup: Parent %q is not a clean absolute cgroup path", o.Parent)
	}
	return validName("Name", o.Name)
}

// validName accepts one path element: cgroup names end up in paths, and a
// "/" or ".." would put a cgroup outside the base.
func validName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") {
		return fmt.Errorf("cgroup: invalid %s %q: want one path element", what, name)
	}
	return nil
}
