package boxer

import "time"

// Status is how a run ended. Every status is an outcome the caller sees; none
// of them means boxer failed, except StatusInternalError, which a Result
// carries only when the engine could not tell what happened to the program.
type Status string

const (
	StatusOK            Status = "ok"             // exited with code 0
	StatusNonzeroExit   Status = "nonzero_exit"   // exited with another code
	StatusTimeout       Status = "timeout"        // killed at the wall-clock limit
	StatusOOM           Status = "oom"            // killed by the kernel's OOM killer
	StatusSignaled      Status = "signaled"       // killed by a signal of its own doing
	StatusInternalError Status = "internal_error" // boxer lost track of the run
)

// Output is what was kept of one stream.
type Output struct {
	// Data is the first Limits.OutputBytes bytes the program wrote.
	Data []byte `json:"data"`
	// Bytes counts everything the program wrote, kept or not.
	Bytes int64 `json:"bytes"`
	// Truncated reports that Bytes > len(Data).
	Truncated bool `json:"truncated"`
}

// Artifact is a file read back from the work dir after the run.
type Artifact struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Content []byte `json:"content"`
	SHA256  string `json:"sha256"`
}

// MissingArtifact is a requested path that was not returned, and why.
type MissingArtifact struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Timing splits a run's latency into the phases a caller can act on.
type Timing struct {
	Queue   time.Duration `json:"queue"`   // waiting for a run slot
	Acquire time.Duration `json:"acquire"` // preparing or taking a sandbox
	Run     time.Duration `json:"run"`     // the program itself
	Collect time.Duration `json:"collect"` // output, artifacts, teardown
}

// Result is everything known about one finished run.
type Result struct {
	Status   Status `json:"status"`
	ExitCode int    `json:"exit_code"`
	// Signal is the name of the signal that ended the program ("SIGKILL"),
	// empty when it exited.
	Signal string `json:"signal,omitempty"`
	// Wall is the program's wall-clock time, from start to exit or kill.
	Wall time.Duration `json:"wall"`
	// CPU is the CPU time of every process of the run.
	CPU time.Duration `json:"cpu"`
	// MemoryPeak is the highest memory use of the run's cgroup, in bytes.
	MemoryPeak int64 `json:"memory_peak"`
	// OOMKills counts the run's processes the kernel's OOM killer killed,
	// the main one or any other (the memory controller's own oom_kill
	// counter). A child killed for memory does not change Status, which is
	// always the main process's outcome; StatusOOM means the main process
	// ended for memory.
	OOMKills int64 `json:"oom_kills"`

	Stdout Output `json:"stdout"`
	Stderr Output `json:"stderr"`

	Artifacts        []Artifact        `json:"artifacts,omitempty"`
	MissingArtifacts []MissingArtifact `json:"missing_artifacts,omitempty"`

	Timing Timing `json:"timing"`
}

// TimedOut reports whether the run hit its wall-clock limit.
func (r *Result) TimedOut() bool { return r.Status == StatusTimeout }

// OOMKilled reports whether the kernel's OOM killer killed any process of
// the run, main or not.
func (r *Result) OOMKilled() bool { return r.OOMKills > 0 }
