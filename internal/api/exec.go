package api

import (
	"net/http"

	"boxer"
)

// POST /v1/exec: the seed 000/001 API. Request {"code", "language"}; response
// {"success": true, "result": {...}} with the seed's camelCase names.

// The values /v1/exec's language accepts. The code always runs on the one
// Python runtime; "python3" is accepted because clients reasonably send it.
const (
	languagePython  = "python"
	languagePython3 = "python3"
)

type execRequest struct {
	Code string
}

// decodeExec parses and checks a /v1/exec body.
//
// Postcondition of a nil error: Code is valid UTF-8 without NUL and at most
// maxCode bytes long.
func decodeExec(body []byte, maxCode int) (*execRequest, *boxer.Error) {
	root, e := parseBody(body)
	if e != nil {
		return nil, e
	}
	fields, e := requestObject(root, "code", "language")
	if e != nil {
		return nil, e
	}
	var req execRequest
	if req.Code, e = codeField(fields, maxCode, "the Python source to run"); e != nil {
		return nil, e
	}
	if v, ok := fields["language"]; ok {
		lang, e := text("language", v)
		if e != nil {
			return nil, e
		}
		if !isSupportedLanguage(lang) {
			return nil, boxer.Errorf(boxer.ECodeUnsupportedLanguage, "language %q is not supported; supported: %q (default), %q", lang, languagePython, languagePython3)
		}
	}
	return &req, nil
}

// codeField reads a request's required "code": UTF-8 text of at most
// maxCode bytes; what names what it is, for the caller who left it out.
func codeField(fields map[string]*jsonValue, maxCode int, what string) (string, *boxer.Error) {
	v, ok := fields["code"]
	if !ok {
		return "", fieldError("code", "is required: %s", what)
	}
	code, e := text("code", v)
	if e != nil {
		return "", e
	}
	if len(code) > maxCode {
		return "", boxer.Errorf(boxer.ECodeCodeTooLarge, "code is %d bytes; at most %d bytes are allowed", len(code), maxCode)
	}
	return code, nil
}

func isSupportedLanguage(lang string) bool {
	return lang == languagePython || lang == languagePython3
}

// execJob is the job for a /v1/exec request: the code as main.py, run as
// "python main.py" so that a traceback names a file, as it would locally.
func execJob(req *execRequest, limits boxer.Limits) *boxer.Job {
	return &boxer.Job{
		Runtime: "python",
		Argv:    []string{"python", "main.py"},
		Files:   []boxer.File{{Path: "main.py", Content: []byte(req.Code)}},
		Limits:  limits,
	}
}

type execResponse struct {
	Success bool       `json:"success"`
	Result  ExecResult `json:"result"`
}

// ExecResult is /v1/exec's result (and the MCP exec tool's). It keeps the
// seed's five fields first and in the seed's order; boxer's extras follow
// in the same camelCase style.
type ExecResult struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	TimedOut   bool   `json:"timedOut"`

	Status          boxer.Status `json:"status"`
	OOMKilled       bool         `json:"oomKilled"` // any process of the run, main or not
	OOMKills        int64        `json:"oomKills"`
	StdoutTruncated bool         `json:"stdoutTruncated"`
	StderrTruncated bool         `json:"stderrTruncated"`
	CPUTimeMs       int64        `json:"cpuTimeMs"`
	MemoryPeakBytes int64        `json:"memoryPeakBytes"`
	Signal          *string      `json:"signal"` // null when the program exited
	Timing          ExecTiming   `json:"timing"`
}

// ExecTiming is where a run's time went, in milliseconds.
type ExecTiming struct {
	QueueMs   int64 `json:"queueMs"`
	AcquireMs int64 `json:"acquireMs"`
	RunMs     int64 `json:"runMs"`
	CollectMs int64 `json:"collectMs"`
}

// newExecResponse shapes a Result for /v1/exec. success is true whenever the
// program ran, whatever its exit code: the seed's contract.
//
// Output bytes that are not valid UTF-8 are sent as U+FFFD by encoding/json;
// a JSON string cannot carry them, and the seed returns strings.
func newExecResponse(res *boxer.Result) execResponse {
	return execResponse{
		Success: true,
		Result: ExecResult{
			Stdout:          string(res.Stdout.Data),
			Stderr:          string(res.Stderr.Data),
			ExitCode:        res.ExitCode,
			DurationMs:      res.Wall.Milliseconds(),
			TimedOut:        res.TimedOut(),
			Status:          res.Status,
			OOMKilled:       res.OOMKilled(),
			OOMKills:        res.OOMKills,
			StdoutTruncated: res.Stdout.Truncated,
			StderrTruncated: res.Stderr.Truncated,
			CPUTimeMs:       res.CPU.Milliseconds(),
			MemoryPeakBytes: res.MemoryPeak,
			Signal:          signalOf(res),
			Timing: ExecTiming{
				QueueMs:   res.Timing.Queue.Milliseconds(),
				AcquireMs: res.Timing.Acquire.Milliseconds(),
				RunMs:     res.Timing.Run.Milliseconds(),
				CollectMs: res.Timing.Collect.Milliseconds(),
			},
		},
	}
}

func signalOf(res *boxer.Result) *string {
	if res.Signal == "" {
		return nil
	}
	s := res.Signal
	return &s
}

func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r, s.cfg.MaxExecBodyBytes, s.cfg.BodyTimeout)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	req, e := decodeExec(body, s.cfg.MaxCodeBytes)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	res, answered, e := s.run(r, execJob(req, s.cfg.ExecLimits))
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	defer answered()
	writeJSON(w, s.log, http.StatusOK, newExecResponse(res))
}
