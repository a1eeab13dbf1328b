package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"unicode/utf8"

	"boxer"
)

// RunResponse is /v1/run-python's 200 body, snake_case like the request:
// boxer's one result schema, which `boxer run --json` prints too. The seed's
// fields come first; boxer's extras follow.
type RunResponse struct {
	JobID            string            `json:"job_id"`
	ExitCode         int               `json:"exit_code"`
	Stdout           string            `json:"stdout"`
	Stderr           string            `json:"stderr"`
	TimedOut         bool              `json:"timed_out"`
	OOMKilled        bool              `json:"oom_killed"` // any process of the run, main or not
	DurationMs       int64             `json:"duration_ms"`
	StdoutTruncated  bool              `json:"stdout_truncated"`
	StderrTruncated  bool              `json:"stderr_truncated"`
	Artifacts        []RunArtifact     `json:"artifacts"`
	MissingArtifacts []MissingArtifact `json:"missing_artifacts"`

	Status          boxer.Status `json:"status"`
	OOMKills        int64        `json:"oom_kills"`
	Signal          *string      `json:"signal"` // null when the program exited
	CPUTimeMs       int64        `json:"cpu_time_ms"`
	MemoryPeakBytes int64        `json:"memory_peak_bytes"`
	Timing          RunTiming    `json:"timing"`
}

// RunArtifact is a file the program left at one of artifact_paths.
type RunArtifact struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Encoding string `json:"encoding"` // "utf-8" or "base64"
	Content  string `json:"content"`
	SHA256   string `json:"sha256"`
}

// MissingArtifact is an artifact path that gave no file, and why.
type MissingArtifact struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// RunTiming is where a run's time went, in milliseconds.
type RunTiming struct {
	QueueMs   int64 `json:"queue_ms"`
	AcquireMs int64 `json:"acquire_ms"`
	RunMs     int64 `json:"run_ms"`
	CollectMs int64 `json:"collect_ms"`
}

// runningResponse is GET /v1/jobs/{job_id}'s 202 body while the job runs.
type runningResponse struct {
	JobID  string `json:"job_id"`
	Status string `json:"status" jsonschema:"queued (waiting for a run slot) or running"`
}

// NewRunResponse shapes a Result for /v1/run-python. An artifact is text when
// its bytes are valid UTF-8 and the JSON string they make is no longer than
// their base64, and base64 otherwise, so that it comes back byte-exact
// either way and at most a third larger: a file of NUL bytes is valid
// UTF-8, and as text each byte would be six ("\u0000"). stdout and stderr
// are strings as in the seed (bytes that are not UTF-8 arrive as U+FFFD).
func NewRunResponse(jobID string, res *boxer.Result) RunResponse {
	out := RunResponse{
		JobID:            jobID,
		ExitCode:         res.ExitCode,
		Stdout:           string(res.Stdout.Data),
		Stderr:           string(res.Stderr.Data),
		TimedOut:         res.TimedOut(),
		OOMKilled:        res.OOMKilled(),
		DurationMs:       res.Wall.Milliseconds(),
		StdoutTruncated:  res.Stdout.Truncated,
		StderrTruncated:  res.Stderr.Truncated,
		Artifacts:        make([]RunArtifact, 0, len(res.Artifacts)),
		MissingArtifacts: make([]MissingArtifact, 0, len(res.MissingArtifacts)),
		Status:           res.Status,
		OOMKills:         res.OOMKills,
		Signal:           signalOf(res),
		CPUTimeMs:        res.CPU.Milliseconds(),
		MemoryPeakBytes:  res.MemoryPeak,
		Timing: RunTiming{
			QueueMs:   res.Timing.Queue.Milliseconds(),
			AcquireMs: res.Timing.Acquire.Milliseconds(),
			RunMs:     res.Timing.Run.Milliseconds(),
			CollectMs: res.Timing.Collect.Milliseconds(),
		},
	}
	for _, a := range res.Artifacts {
		art := RunArtifact{Path: a.Path, Size: a.Size, SHA256: a.SHA256}
		if art.SHA256 == "" { // the engine's job; a cheap safeguard
			sum := sha256.Sum256(a.Content)
			art.SHA256 = hex.EncodeToString(sum[:])
		}
		if utf8.Valid(a.Content) && jsonTextSize(a.Content) <= base64.StdEncoding.EncodedLen(len(a.Content)) {
			art.Encoding, art.Content = "utf-8", string(a.Content)
		} else {
			art.Encoding, art.Content = "base64", base64.StdEncoding.EncodeToString(a.Content)
		}
		out.Artifacts = append(out.Artifacts, art)
	}
	for _, m := range res.MissingArtifacts {
		out.MissingArtifacts = append(out.MissingArtifacts, MissingArtifact(m))
	}
	return out
}

// jsonTextSize is the length of valid UTF-8 text b inside a JSON string as
// marshal writes it (no HTML escapes): two bytes for '"', '\\' and the
// control characters with a short escape, six for the other control
// characters and for U+2028 and U+2029, one for every other byte.
func jsonTextSize(b []byte) int {
	n := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		case c == 0xe2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
			n += 6
			i += 2
		default:
			n++
		}
	}
	return n
}
