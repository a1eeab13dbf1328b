package api

import (
	"fmt"
	"reflect"

	"boxer"

	"github.com/google/jsonschema-go/jsonschema"
)

// ExecRequest is POST /v1/exec's body (seed 000/001). The handler decodes
// bodies strictly on its own (decodeExec); this type is the body's
// description, for the OpenAPI document and the MCP exec tool.
type ExecRequest struct {
	Code     string `json:"code" jsonschema:"Python source, at most 64 KiB of UTF-8"`
	Language string `json:"language,omitempty" jsonschema:"python (the default; py and python3 are accepted too)"`
}

// RunPythonRequest is POST /v1/run-python's body (seed 004), described as
// ExecRequest is.
type RunPythonRequest struct {
	Files          map[string]string `json:"files,omitempty" jsonschema:"input files: relative path -> UTF-8 text content"`
	Stdin          *string           `json:"stdin,omitempty" jsonschema:"the program's standard input"`
	Command        []string          `json:"command,omitempty" jsonschema:"argv to run in the work dir; default [\"python\", \"main.py\"], e.g. [\"python\", \"-m\", \"pytest\", \"test_math.py\"]"`
	Runtime        *string           `json:"runtime,omitempty" jsonschema:"python, the only one"`
	CPUs           *float64          `json:"cpus,omitempty" jsonschema:"CPU limit in cores"`
	MemoryMB       *int64            `json:"memory_mb,omitempty" jsonschema:"memory limit in MiB"`
	TimeoutSeconds *int64            `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit in seconds"`
	ArtifactPaths  []string          `json:"artifact_paths,omitempty" jsonschema:"files the program writes to bring back, relative to the work dir"`
	JobID          *string           `json:"job_id,omitempty" jsonschema:"your id for this run: the same request again returns the stored result instead of running twice (GET /v1/jobs/{job_id} too)"`
	Async          *bool             `json:"async,omitempty" jsonschema:"answer 202 with the job_id at once and run in the background; GET /v1/jobs/{job_id} shows queued, running, then the result"`
	WebhookURL     *string           `json:"webhook_url,omitempty" jsonschema:"with async: where to POST the result when the job is done, signed with X-Boxer-Signature (t=<unix>,v1=<hex HMAC-SHA256 of t.body>)"`
}

// SchemaFor is the JSON Schema (draft 2020-12) of v's type, with the
// limits the API enforces on it written in: the one description of each
// body and result, which the OpenAPI document and the MCP tools share.
func SchemaFor(v any) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(reflect.TypeOf(v), &jsonschema.ForOptions{})
	if err != nil {
		return nil, err
	}
	p := s.Properties
	bound := func(name string, lo, hi float64) {
		if f := p[name]; f != nil {
			f.Minimum, f.Maximum = &lo, &hi
		}
	}
	switch v.(type) {
	case RunPythonRequest:
		bound("cpus", 0.1, 2)
		bound("memory_mb", 64, 1024)
		bound("timeout_seconds", 1, 30)
		one, files, paths := minFiles, maxFiles, maxArtifacts
		p["files"].MinProperties, p["files"].MaxProperties = &one, &files
		p["artifact_paths"].MaxItems = &paths
		p["command"].MinItems = &one
		p["runtime"].Enum = []any{"python"}
	case ExecRequest:
		p["language"].Enum = []any{"python", "py", "python3"}
	case ExecResult, RunResponse:
		p["status"].Enum = statuses()
	case SessionCreateRequest:
		bound("cpus", boxer.MinCPUs, boxer.MaxCPUs)
		bound("memory_mb", minMemoryMB, 1<<20)
		bound("idle_timeout_seconds", 1, maxSessionIdleSecs)
		bound("max_lifetime_seconds", 1, maxSessionLifeSecs)
		files := maxFiles
		p["files"].MaxProperties = &files
	case SessionExecRequest:
		bound("timeout_seconds", 1, maxCellTimeoutSecs)
	case SessionFilesRequest:
		one, files := 1, maxFiles
		p["files"].MinProperties, p["files"].MaxProperties = &one, &files
	}
	return s, nil
}

// mustSchema is SchemaFor for the types this package declares, whose
// schemas cannot fail to build (TestOpenAPIDocument builds them all).
func mustSchema(v any) *jsonschema.Schema {
	s, err := SchemaFor(v)
	if err != nil {
		panic(fmt.Sprintf("api: schema of %T: %v", v, err))
	}
	return s
}
