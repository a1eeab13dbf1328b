package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"boxer"
)

// POST /v1/run-python: the seed 004 API. This file reads and checks the
// request; runpython_response.go shapes the answer; jobs.go runs it once per
// job_id.

// Bounds of a /v1/run-python request: the seed's body schema, plus limits
// the schema leaves open (job_id and command sizes).
const (
	minFiles         = 1
	maxFiles         = 64
	maxArtifacts     = 16
	minMemoryMB      = boxer.MinMemoryBytes >> 20
	maxMemoryMB      = 1024
	minTimeoutSecs   = 1
	maxTimeoutSecs   = 30
	maxJobIDBytes    = 128
	maxCommandArgs   = 64
	maxCommandBytes  = 64 << 10
	defaultRuntime   = "python"
	defaultMainFile  = "main.py"
	defaultPythonCmd = "python"
)

// runRequest is a checked /v1/run-python request. Optional fields the caller
// left out are nil, so that the job's defaults come from the config at run
// time, not from the request.
type runRequest struct {
	Files          []boxer.File // clean paths, sorted
	Stdin          string
	JobID          string // "" when the caller sent none
	Command        []string
	CPUs           *float64
	MemoryMB       *int64
	TimeoutSeconds *int64
	ArtifactPaths  []string // clean paths, in the caller's order
	// Async answers 202 at once and runs the job in the background;
	// WebhookURL, if set, gets its result (see jobs.go).
	Async      bool
	WebhookURL string
}

// decodeRunPython parses and checks a /v1/run-python body.
//
// Postconditions of a nil error: 1 to 64 files, each path clean, relative,
// inside the work dir and unique, no path a parent directory of another;
// every string valid UTF-8 without NUL; command non-empty with a non-empty
// first element; numbers inside the seed's ranges; at most 16 artifact
// paths, clean and unique.
func decodeRunPython(body []byte) (*runRequest, *boxer.Error) {
	root, e := parseBody(body)
	if e != nil {
		return nil, e
	}
	// The fields exactly as in seed 004's schema.
	fields, e := requestObject(root, "files", "stdin", "job_id", "command", "runtime",
		"cpus", "memory_mb", "timeout_seconds", "artifact_paths", "async", "webhook_url")
	if e != nil {
		return nil, e
	}
	req := &runRequest{Command: []string{defaultPythonCmd, defaultMainFile}}

	v, ok := fields["files"]
	if !ok {
		return nil, fieldError("files", "is required: an object of %d to %d entries, relative path -> UTF-8 text", minFiles, maxFiles)
	}
	if req.Files, e = decodeFiles(v, minFiles); e != nil {
		return nil, e
	}
	if v, ok := fields["stdin"]; ok {
		if req.Stdin, e = text("stdin", v); e != nil {
			return nil, e
		}
	}
	if v, ok := fields["job_id"]; ok {
		if req.JobID, e = decodeJobID(v); e != nil {
			return nil, e
		}
	}
	if v, ok := fields["command"]; ok {
		if req.Command, e = decodeCommand(v); e != nil {
			return nil, e
		}
	}
	if v, ok := fields["runtime"]; ok {
		rt, e := text("runtime", v)
		if e != nil {
			return nil, e
		}
		if rt != defaultRuntime {
			return nil, fieldError("runtime", "%q is not supported; allowed: %q", rt, defaultRuntime)
		}
	}
	if v, ok := fields["cpus"]; ok {
		f, e := number("cpus", v, boxer.MinCPUs, boxer.MaxCPUs)
		if e != nil {
			return nil, e
		}
		req.CPUs = &f
	}
	if v, ok := fields["memory_mb"]; ok {
		n, e := integer("memory_mb", v, minMemoryMB, maxMemoryMB)
		if e != nil {
			return nil, e
		}
		req.MemoryMB = &n
	}
	if v, ok := fields["timeout_seconds"]; ok {
		n, e := integer("timeout_seconds", v, minTimeoutSecs, maxTimeoutSecs)
		if e != nil {
			return nil, e
		}
		req.TimeoutSeconds = &n
	}
	if v, ok := fields["artifact_paths"]; ok {
		if req.ArtifactPaths, e = decodeArtifactPaths(v); e != nil {
			return nil, e
		}
	}
	if v, ok := fields["async"]; ok {
		if req.Async, e = boolean("async", v); e != nil {
			return nil, e
		}
	}
	if v, ok := fields["webhook_url"]; ok {
		if req.WebhookURL, e = text("webhook_url", v); e != nil {
			return nil, e
		}
		if !req.Async {
			return nil, fieldError("webhook_url", "needs \"async\": true: a webhook gets the result of a job run in the background")
		}
	}
	return req, nil
}

// decodeFiles reads a files object of least to maxFiles entries.
func decodeFiles(v *jsonValue, least int) ([]boxer.File, *boxer.Error) {
	if v.kind != kindObject {
		return nil, fieldError("files", "must be an object of relative path -> UTF-8 text, got %s", v.kind)
	}
	if n := len(v.members); n < least || n > maxFiles {
		return nil, fieldError("files", "has %d entries; allowed: %d to %d", n, least, maxFiles)
	}
	files := make([]boxer.File, 0, len(v.members))
	byClean := make(map[string]string, len(v.members)) // clean path -> as sent
	for _, m := range v.members {
		if m.name.badText != "" {
			return nil, fieldError("files", "path %q must be valid UTF-8 text: %s", m.name.text, m.name.badText)
		}
		sent := m.name.text
		clean, err := cleanRelPath(sent)
		if err != nil {
			return nil, fieldError("files", "path %q %v", sent, err)
		}
		if prev, dup := byClean[clean]; dup {
			return nil, fieldError("files", "paths %q and %q name the same file %q", prev, sent, clean)
		}
		byClean[clean] = sent
		content, e := text(fmt.Sprintf("files[%q]", sent), m.value)
		if e != nil {
			return nil, e
		}
		files = append(files, boxer.File{Path: clean, Content: []byte(content)})
	}
	// A file cannot also be a directory holding another file.
	for _, f := range files {
		for dir := parentDir(f.Path); dir != ""; dir = parentDir(dir) {
			if sent, clash := byClean[dir]; clash {
				return nil, fieldError("files", "path %q needs %q to be a directory, but %q is a file", byClean[f.Path], dir, sent)
			}
		}
	}
	slices.SortFunc(files, func(a, b boxer.File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// parentDir returns the directory part of a clean relative path, "" at the top.
func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

func decodeJobID(v *jsonValue) (string, *boxer.Error) {
	id, e := text("job_id", v)
	if e != nil {
		return "", e
	}
	if why := checkJobID(id); why != "" {
		return "", fieldError("job_id", "%s", why)
	}
	return id, nil
}

// checkJobID says what is wrong with a job_id, "" if nothing. A job_id is
// printable ASCII without '/' so that it sits in GET /v1/jobs/{job_id} and
// in a log line as it is.
func checkJobID(id string) string {
	if id == "" || len(id) > maxJobIDBytes {
		return fmt.Sprintf("must be 1 to %d characters, got %d", maxJobIDBytes, len(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7F || c == '/' {
			return fmt.Sprintf("has %q at position %d; allowed: printable ASCII except space and '/'", c, i)
		}
	}
	return ""
}

func decodeCommand(v *jsonValue) ([]string, *boxer.Error) {
	cmd, e := textArray("command", v, maxCommandArgs)
	if e != nil {
		return nil, e
	}
	if len(cmd) == 0 {
		return nil, fieldError("command", "must not be empty; omit it for the default [%q, %q]", defaultPythonCmd, defaultMainFile)
	}
	if cmd[0] == "" {
		return nil, fieldError("command[0]", "must name a program, got an empty string")
	}
	total := 0
	for _, a := range cmd {
		total += len(a)
	}
	if total > maxCommandBytes {
		return nil, fieldError("command", "is %d bytes in all; at most %d are allowed", total, maxCommandBytes)
	}
	return cmd, nil
}

func decodeArtifactPaths(v *jsonValue) ([]string, *boxer.Error) {
	paths, e := textArray("artifact_paths", v, maxArtifacts)
	if e != nil {
		return nil, e
	}
	seen := make(map[string]int, len(paths))
	for i, p := range paths {
		clean, err := cleanRelPath(p)
		if err != nil {
			return nil, fieldError(fmt.Sprintf("artifact_paths[%d]", i), "path %q %v", p, err)
		}
		if j, dup := seen[clean]; dup {
			return nil, fieldError(fmt.Sprintf("artifact_paths[%d]", i), "path %q names the same file as artifact_paths[%d]", p, j)
		}
		seen[clean] = i
		paths[i] = clean
	}
	return paths, nil
}

// job builds the run for req: the config's run limits with the request's
// overrides.
func (req *runRequest) job(base boxer.Limits) *boxer.Job {
	limits := base
	if req.CPUs != nil {
		limits.CPUs = *req.CPUs
	}
	if req.MemoryMB != nil {
		limits.MemoryBytes = *req.MemoryMB << 20
	}
	if req.TimeoutSeconds != nil {
		limits.WallTime = time.Duration(*req.TimeoutSeconds) * time.Second
	}
	job := &boxer.Job{
		Runtime:   defaultRuntime,
		Argv:      req.Command,
		Files:     req.Files,
		Artifacts: req.ArtifactPaths,
		Limits:    limits,
	}
	if req.Stdin != "" {
		job.Stdin = []byte(req.Stdin)
	}
	return job
}

// hash identifies what the request asks for, for job_id idempotency: the
// same hash means the same run. It covers the request after checking and
// cleaning (so "./main.py" and "main.py" are one request, files in any
// order, an empty stdin the same as none, the default command the same as
// none) and leaves out job_id itself. Limits the caller left out stay out:
// a replay after an operator changed the defaults is still the same request.
func (req *runRequest) hash() string {
	canon := struct {
		Files          map[string]string `json:"files"`
		Stdin          string            `json:"stdin"`
		Command        []string          `json:"command"`
		CPUs           *float64          `json:"cpus,omitempty"`
		MemoryMB       *int64            `json:"memory_mb,omitempty"`
		TimeoutSeconds *int64            `json:"timeout_seconds,omitempty"`
		ArtifactPaths  []string          `json:"artifact_paths"`
	}{
		Files:          make(map[string]string, len(req.Files)),
		Stdin:          req.Stdin,
		Command:        req.Command,
		CPUs:           req.CPUs,
		MemoryMB:       req.MemoryMB,
		TimeoutSeconds: req.TimeoutSeconds,
		ArtifactPaths:  req.ArtifactPaths,
	}
	for _, f := range req.Files {
		canon.Files[f.Path] = string(f.Content)
	}
	if canon.ArtifactPaths == nil {
		canon.ArtifactPaths = []string{}
	}
	// Maps encode with sorted keys, so the encoding is deterministic.
	b, err := json.Marshal(canon)
	if err != nil {
		panic("api: encoding a request hash cannot fail: " + err.Error())
	}
	// The prefix versions the canonical form: changing it must not make
	// old job records match new requests.
	sum := sha256.Sum256(append([]byte("run-python/1\n"), b...))
	return hex.EncodeToString(sum[:])
}
