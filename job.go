package boxer

import (
	"errors"
	"fmt"
	"time"
)

// Limits bound one run. The zero value of a field means "use the engine's
// default"; Validate reports values outside what the engine can enforce.
type Limits struct {
	// WallTime is the wall-clock budget of the program, counted from the
	// moment it is started. It is independent of the CPU quota.
	WallTime time.Duration `json:"wall_time"`
	// CPUs is the CPU bandwidth as a fraction of one core (0.5 = half a core).
	CPUs float64 `json:"cpus"`
	// MemoryBytes caps the run's cgroup: the program's memory, its tmpfs
	// files (work dir, /tmp, /dev/shm) and kernel memory charged to it.
	MemoryBytes int64 `json:"memory_bytes"`
	// Pids caps the number of tasks (processes and threads) in the run.
	Pids int `json:"pids"`
	// OutputBytes caps what is kept of stdout and of stderr, each.
	OutputBytes int64 `json:"output_bytes"`
	// FileSizeBytes is RLIMIT_FSIZE: the largest file the program may write.
	FileSizeBytes int64 `json:"file_size_bytes"`
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int `json:"open_files"`
	// DiskBytes caps each writable tmpfs (the work dir and /tmp).
	DiskBytes int64 `json:"disk_bytes"`
}

// Bounds of every limit, the only ones: the engine refuses a job outside
// them (Validate), an operator's defaults are checked against them, and the
// API names them in its errors. They are the seeds' ranges, widened where a
// self-hosted operator may reasonably want more. (A request to
// /v1/run-python has the seed's own narrower ranges for the fields it
// takes: see internal/api.)
const (
	MinCPUs        = 0.1
	MaxCPUs        = 2.0
	MinMemoryBytes = 64 << 20
	MinWallTime    = 100 * time.Millisecond
	MinPids        = 8
	MinOpenFiles   = 16
	MinDiskBytes   = 1 << 20
)

// Validate reports every limit of l outside its bounds. Call it on limits
// with the defaults applied: a zero field is out of bounds.
func (l Limits) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(l.WallTime >= MinWallTime, "wall time %v: must be at least %v", l.WallTime, MinWallTime)
	check(l.CPUs >= MinCPUs && l.CPUs <= MaxCPUs, "cpus %g: must be between %g and %g", l.CPUs, MinCPUs, MaxCPUs)
	check(l.MemoryBytes >= MinMemoryBytes, "memory %d bytes: must be at least %d MiB", l.MemoryBytes, MinMemoryBytes>>20)
	check(l.Pids >= MinPids, "pids %d: must be at least %d", l.Pids, MinPids)
	check(l.OpenFiles >= MinOpenFiles, "open files %d: must be at least %d", l.OpenFiles, MinOpenFiles)
	check(l.DiskBytes >= MinDiskBytes, "disk %d bytes: must be at least %d MiB", l.DiskBytes, MinDiskBytes>>20)
	check(l.OutputBytes >= 0, "output %d bytes: must not be negative", l.OutputBytes)
	check(l.FileSizeBytes >= 1, "file size %d bytes: must be positive", l.FileSizeBytes)
	return errors.Join(errs...)
}

// DefaultLimits are the seed's limits: 30 s, 512 MiB, half a CPU.
func DefaultLimits() Limits {
	return Limits{
		WallTime:      30 * time.Second,
		CPUs:          0.5,
		MemoryBytes:   512 << 20,
		Pids:          128,
		OutputBytes:   1 << 20,
		FileSizeBytes: 64 << 20,
		OpenFiles:     256,
		DiskBytes:     128 << 20,
	}
}

// WithDefaults returns l with every zero field taken from d.
func (l Limits) WithDefaults(d Limits) Limits {
	if l.WallTime == 0 {
		l.WallTime = d.WallTime
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.FileSizeBytes == 0 {
		l.FileSizeBytes = d.FileSizeBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = d.DiskBytes
	}
	return l
}

// File is one input file placed in the run's work dir before the program
// starts. Path is relative to the work dir and uses forward slashes.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
}

// Job is one program to run in a fresh sandbox.
type Job struct {
	// Runtime names the interpreter ("python"); empty means the default.
	Runtime string `json:"runtime,omitempty"`
	// Argv is the command. Its first element may be "python" or "python3",
	// which name the runtime's interpreter; anything else must be a path
	// inside the sandbox.
	Argv []string `json:"argv"`
	// Files are written to the work dir, which is the program's cwd.
	Files []File `json:"files,omitempty"`
	// Stdin is the program's standard input; it sees EOF after it.
	Stdin []byte `json:"stdin,omitempty"`
	// Artifacts are work-dir-relative paths read back after the run.
	Artifacts []string `json:"artifacts,omitempty"`
	Limits    Limits   `json:"limits"`
	// Output, if set, is given each piece of stdout (Stdout) and stderr
	// (Stderr) as the program writes it, as far as the run keeps it
	// (Limits.OutputBytes), from the goroutine reading that stream. It
	// must not block: the program would wait on a full pipe. The Result
	// holds the whole output all the same.
	Output func(s Stream, chunk []byte) `json:"-"`
}

// Stream names a program's output stream.
type Stream int

// The streams Job.Output sees.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)
