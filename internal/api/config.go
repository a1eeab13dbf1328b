package api

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"boxer"
	"boxer/internal/cgroup"

	"golang.org/x/sys/unix"
)

// Config is the API's part of boxer's configuration. The zero value of a
// field means its default (see WithDefaults); Validate reports the rest.
type Config struct {
	// Version is reported by GET /v1/health.
	Version string

	// ExecLimits bound every POST /v1/exec run. Default: the seed's 0.5
	// CPU, 512 MiB, 30 s, other fields from boxer.DefaultLimits.
	ExecLimits boxer.Limits
	// RunLimits bound POST /v1/run-python runs; a request's cpus,
	// memory_mb and timeout_seconds override their fields. Default:
	// DefaultRunLimits.
	RunLimits boxer.Limits

	// MaxCodeBytes caps /v1/exec's code, counted in bytes of UTF-8.
	// Default 65536 (the seed's 64 KB).
	MaxCodeBytes int
	// MaxExecBodyBytes caps a /v1/exec request body. It must leave room
	// for MaxCodeBytes of code written with JSON escapes (up to six bytes
	// per byte), so that code over the limit gets code_too_large rather
	// than payload_too_large. Default 512 KiB.
	MaxExecBodyBytes int64
	// MaxRunBodyBytes caps a /v1/run-python request body, which carries
	// every file. Default 8 MiB.
	MaxRunBodyBytes int64
	// BodyTimeout is the longest a request body may take to arrive, from
	// the end of its headers: a client that sends it slowly, or stops,
	// gets request_timeout instead of holding a connection. Default 20 s
	// (the largest /v1/run-python body at 0.4 MiB/s).
	BodyTimeout time.Duration

	// KeysRequired refuses callers without an API key (401) once any key
	// is active (boxer keys add may run while boxer serves), where
	// payments do not ask them to pay instead. A caller with a valid key
	// is served either way, and never charged.
	KeysRequired bool

	// ListKeylessSessions lets a caller without an API key list the
	// sessions made without one (GET /v1/sessions). Such a session is
	// reached by its id alone, so a listing hands out every one of them:
	// only for a server whose keyless callers are one tenant (boxer serve
	// on loopback with payments off, boxer mcp).
	ListKeylessSessions bool

	// Slots is how many runs may execute at once. Default: DefaultSlots.
	Slots int
	// A run that finds every slot taken waits for one if its expected
	// wait (the runs ahead of it over Slots, times a run's recent time in
	// its slot) is at most MaxQueueWait, and if fewer than Queue runs,
	// holding fewer than QueueBytes of jobs, wait already; otherwise it is
	// refused with busy. Defaults: 10 s, 1024 runs, 256 MiB. Set NoQueue
	// for no waiting at all.
	MaxQueueWait time.Duration
	Queue        int
	QueueBytes   int64
	// NoQueue makes Queue 0: a run either gets a slot at once or is busy.
	NoQueue bool
	// QueueTimeout is the longest a run waits for a slot before it is
	// refused with busy, whatever was expected. Default 30 s.
	QueueTimeout time.Duration
	// RetryAfter is the Retry-After sent with busy and unavailable.
	// Default 2 s; sent in whole seconds, rounded up.
	RetryAfter time.Duration

	// AnswerBudgetBytes bounds the memory the answers in flight hold, from
	// a result's return to its response's last byte (see answers): past
	// it, finished runs wait for earlier answers to go out, their slots
	// held. Default 512 MiB.
	AnswerBudgetBytes int64

	// MaxKeptResultBytes caps one stored /v1/run-python response: a run
	// with a job_id whose response is larger is answered in full once,
	// and its record then holds a result_not_kept error (410), which a
	// replay or a GET gets instead of a second run. Default 8 MiB. (All
	// stored responses together are bounded by the store's budget, which
	// deletes the oldest first.)
	MaxKeptResultBytes int64

	// JobRetention is how long a finished /v1/run-python job is kept for
	// replay and GET /v1/jobs/{job_id}. Default 24 h.
	JobRetention time.Duration
	// NodeAddr is where the other nodes sharing the store reach this one
	// (host:port), recorded with its heartbeat; NodeTimeout how long a
	// node goes unseen before the others end what it held (default 30 s).
	// A node records itself six times a NodeTimeout.
	NodeAddr    string
	NodeTimeout time.Duration
	// PruneInterval is how often old jobs, calls and nonces are deleted.
	// Default 10 min.
	PruneInterval time.Duration
	// HealthRecentRuns is how many recent runs GET /v1/health's success
	// rate and median duration cover. Default 1000.
	HealthRecentRuns int
}

// Defaults that are not in boxer.DefaultLimits.
const (
	DefaultMaxCodeBytes     = 64 << 10
	DefaultMaxExecBodyBytes = 512 << 10
	DefaultMaxRunBodyBytes  = 8 << 20
	DefaultBodyTimeout      = 20 * time.Second
	DefaultQueueTimeout     = 30 * time.Second
	DefaultMaxQueueWait     = 10 * time.Second
	DefaultQueue            = 1024
	DefaultQueueBytes       = 256 << 20
	DefaultRetryAfter       = 2 * time.Second
	DefaultJobRetention     = 24 * time.Hour
	DefaultMaxKeptResult    = 8 << 20
	DefaultAnswerBudget     = 512 << 20
	DefaultPruneInterval    = 10 * time.Minute
	DefaultNodeTimeout      = 30 * time.Second
	DefaultHealthRecentRuns = 1000

	// statsWindow is the marketplaces' window: calls30d, uniquePayers30d.
	// Calls and used nonces are kept this long.
	statsWindow = 30 * 24 * time.Hour
)

// DefaultExecLimits are the seed's /v1/exec limits: 0.5 CPU, 512 MiB, 30 s,
// which are boxer's defaults.
func DefaultExecLimits() boxer.Limits { return boxer.DefaultLimits() }

// DefaultRunLimits are a /v1/run-python run's when it asks for none:
// boxer's defaults but a whole CPU. Seed 004 states no default (a request
// may ask for 0.1 to 2); its jobs are test suites, charts and scripts
// that a caller would otherwise run with a bare python3, which has a
// whole core, and at half of one a chart's render is throttled (seed
// 004's chart: p50 382 ms at 0.5 CPU, 285 ms at 2, README).
func DefaultRunLimits() boxer.Limits {
	l := boxer.DefaultLimits()
	l.CPUs = 1
	return l
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.ExecLimits = c.ExecLimits.WithDefaults(DefaultExecLimits())
	c.RunLimits = c.RunLimits.WithDefaults(DefaultRunLimits())
	if c.MaxCodeBytes == 0 {
		c.MaxCodeBytes = DefaultMaxCodeBytes
	}
	if c.MaxExecBodyBytes == 0 {
		c.MaxExecBodyBytes = DefaultMaxExecBodyBytes
	}
	if c.MaxRunBodyBytes == 0 {
		c.MaxRunBodyBytes = DefaultMaxRunBodyBytes
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots()
	}
	if c.NoQueue {
		c.Queue = 0
	} else if c.Queue == 0 {
		c.Queue = DefaultQueue
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.MaxQueueWait == 0 {
		c.MaxQueueWait = DefaultMaxQueueWait
	}
	if c.QueueTimeout == 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.AnswerBudgetBytes == 0 {
		c.AnswerBudgetBytes = DefaultAnswerBudget
	}
	if c.MaxKeptResultBytes == 0 {
		c.MaxKeptResultBytes = DefaultMaxKeptResult
	}
	if c.JobRetention == 0 {
		c.JobRetention = DefaultJobRetention
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = DefaultNodeTimeout
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = DefaultPruneInterval
	}
	if c.HealthRecentRuns == 0 {
		c.HealthRecentRuns = DefaultHealthRecentRuns
	}
	return c
}

// Validate reports every setting that is out of range, after defaults.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	for _, l := range []struct {
		name string
		l    boxer.Limits
	}{{"exec limits", c.ExecLimits}, {"run limits", c.RunLimits}} {
		if err := l.l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.name, err))
		}
	}
	check(c.MaxCodeBytes > 0, "max code bytes %d must be positive", c.MaxCodeBytes)
	check(c.MaxExecBodyBytes >= int64(c.MaxCodeBytes)+64, "max exec body bytes %d must exceed max code bytes %d", c.MaxExecBodyBytes, c.MaxCodeBytes)
	check(c.MaxRunBodyBytes > 0, "max run body bytes %d must be positive", c.MaxRunBodyBytes)
	check(c.BodyTimeout > 0, "body timeout %s must be positive", c.BodyTimeout)
	check(c.Slots > 0, "slots %d must be positive", c.Slots)
	check(c.Queue >= 0, "queue %d must not be negative", c.Queue)
	check(c.QueueTimeout > 0, "queue timeout %s must be positive", c.QueueTimeout)
	check(c.QueueBytes > 0, "queue bytes %d must be positive", c.QueueBytes)
	check(c.MaxQueueWait > 0, "max queue wait %s must be positive", c.MaxQueueWait)
	check(c.RetryAfter > 0, "retry-after %s must be positive", c.RetryAfter)
	check(c.JobRetention > 0, "job retention %s must be positive", c.JobRetention)
	check(c.AnswerBudgetBytes >= answerFree, "answer budget %d must be at least %d bytes", c.AnswerBudgetBytes, answerFree)
	check(c.MaxKeptResultBytes > 0, "max kept result bytes %d must be positive", c.MaxKeptResultBytes)
	check(c.PruneInterval > 0, "prune interval %s must be positive", c.PruneInterval)
	check(c.NodeTimeout >= 600*time.Millisecond, "node timeout %s must be at least 600ms", c.NodeTimeout)
	check(c.HealthRecentRuns > 0, "health recent runs %d must be positive", c.HealthRecentRuns)
	return errors.Join(errs...)
}

// DefaultSlots is how many runs execute at once unless configured: four a
// CPU, but no more than one for each GiB of the host's memory, and never
// fewer than one a CPU (the default before). CPUs and memory are the
// host's, or the limits of boxer's cgroup where they are lower (a
// container's, a pod's: see cgroupLimits).
//
// A run's path passes through several processes (boxer, the zygote, the
// warm child) and waits on each in turn, so one run a CPU leaves the CPUs
// idle part of the time: in bench/service on 2 cores (2026-12-02), the
// rate of print(2+2) at concurrency 16 was 2.0 and 2.1 times a bare
// python3's with 2 slots, 2.2 with 4, 2.2 and 2.4 with 6, 2.5 with 8. The
// memory bound keeps the runs at /v1/exec's default limit (512 MiB) from
// taking more than half of a small host; it never takes a host below one
// run a CPU (a 2-CPU qemu guest of 2 GiB, a little less usable, had got
// a single slot).
func DefaultSlots() int {
	cpuLimit, memLimit := cgroup.Limits(cgroup.Options{})
	cpus := cgroup.CPUsBoundedBy(runtime.NumCPU(), cpuLimit)
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 4 * cpus
	}
	memory := uint64(si.Totalram) * uint64(si.Unit)
	if memLimit > 0 && memLimit < memory {
		memory = memLimit
	}
	return slotsFor(cpus, memory)
}

// slotsFor is DefaultSlots on a host with cpus CPUs and memory bytes.
func slotsFor(cpus int, memory uint64) int {
	return max(min(4*cpus, int(memory>>30)), cpus, 1)
}
