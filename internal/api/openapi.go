package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"boxer"
)

// DocInfo is what the service documents (GET /openapi.json, /llms.txt)
// say beyond the API itself.
type DocInfo struct {
	Version string
	// Prices are USD per call by route path ("/v1/exec": "0.02"); none
	// when payments are off. Network and Asset name what pays them.
	Prices         map[string]string
	Network, Asset string
	// AlsoPaidOn names the other networks a payment may be made on, each
	// with its asset ("solana:5eyk... (asset EPjF...)").
	AlsoPaidOn []string
	// SignIn: a payer may sign in (x402 sign-in-with-x) to reach its own
	// kept jobs and sessions without paying again.
	SignIn bool
	// KeysRequired: callers without an API key are refused (when no
	// payment is asked of them instead).
	KeysRequired bool
}

func statuses() []any {
	return []any{string(boxer.StatusOK), string(boxer.StatusNonzeroExit), string(boxer.StatusTimeout), string(boxer.StatusOOM), string(boxer.StatusSignaled)}
}

// routeDoc describes one route: the source of the OpenAPI document's
// operations and of llms.txt's endpoint list.
type routeDoc struct {
	method, path, id, summary, description string
	request                                any             // its type is the body's; nil: no body
	example                                json.RawMessage // a request body
	ok                                     any             // the 200 body: a value of its type, or its schema
	okExample                              json.RawMessage
	accepted                               any      // the 202 body's type, if the route answers one
	errors                                 []string // error codes the route answers besides the common ones
	keyed                                  bool     // API keys apply
	run                                    bool     // a run route: payments and admission too
	status                                 int      // the success status, if not 200
	raw                                    bool     // the success body is the bytes of a file, not JSON
	streams                                bool     // Accept: text/event-stream gets the output as events (stream.go)
}

var routeDocs = []routeDoc{
	{
		method: "POST", path: routeExec, id: "exec", summary: "Run a Python snippet",
		description: "Runs code in a fresh sandbox (no network, read-only system, 0.5 CPU, 512 MiB, 30 s by default) and returns stdout, stderr, exit code and status. success is true whenever the program ran, whatever its exit code (seed 000).",
		request:     ExecRequest{}, example: json.RawMessage(`{"code":"print(2 + 2)","language":"python"}`),
		ok: map[string]any{"type": "object", "required": []string{"success", "result"}, "additionalProperties": false,
			"properties": map[string]any{"success": map[string]any{"const": true}, "result": mustSchema(ExecResult{})}},
		okExample: json.RawMessage(`{"success":true,"result":{"stdout":"4\n","stderr":"","exitCode":0,"durationMs":3,"timedOut":false,` +
			`"status":"ok","oomKilled":false,"oomKills":0,"stdoutTruncated":false,"stderrTruncated":false,"cpuTimeMs":3,` +
			`"memoryPeakBytes":524288,"signal":null,"timing":{"queueMs":0,"acquireMs":0,"runMs":3,"collectMs":0}}}`),
		errors: []string{boxer.ECodeUnsupportedLanguage, boxer.ECodeCodeTooLarge},
		keyed:  true, run: true, streams: true,
	},
	{
		method: "POST", path: routeRunPython, id: "runPython", summary: "Run Python files",
		description: "Runs files in a fresh sandbox with a command (default python main.py), stdin and limits, and returns stdout, stderr, exit code, status and the files named in artifact_paths (seed 004). With job_id the result is kept, and the same request again returns it without a second run. With async: true it answers 202 with the job_id at once; GET /v1/jobs/{job_id} shows queued, running, then the result, and webhook_url gets the result, signed (X-Boxer-Signature).",
		request:     RunPythonRequest{}, example: json.RawMessage(`{"files":{"main.py":"print(2 + 2)"},"timeout_seconds":10}`),
		ok: RunResponse{},
		okExample: json.RawMessage(`{"job_id":"job_MDRMXQJIC3VUYBRALDLWVYMQM3","exit_code":0,"stdout":"4\n","stderr":"",` +
			`"timed_out":false,"oom_killed":false,"duration_ms":3,"stdout_truncated":false,"stderr_truncated":false,"artifacts":[],` +
			`"missing_artifacts":[],"status":"ok","oom_kills":0,"signal":null,"cpu_time_ms":3,"memory_peak_bytes":524288,` +
			`"timing":{"queue_ms":0,"acquire_ms":0,"run_ms":3,"collect_ms":0}}`),
		accepted: runningResponse{},
		errors:   []string{boxer.ECodeJobIDConflict, boxer.ECodeResultNotKept, boxer.ECodeRunLost},
		keyed:    true, run: true, streams: true,
	},
	{
		method: "GET", path: "/v1/jobs/{job_id}", id: "getJob", summary: "A kept run-python result",
		description: "The stored result of a /v1/run-python request that named job_id: 200 with it, 202 while the run goes on, 404 when unknown or expired, 410 when it was too large to keep. With payments on, a caller without an API key signs in as the payer (x402 sign-in-with-x: the 402 carries the challenge, SIGN-IN-WITH-X the signed proof) and gets that payer's job.",
		ok:          RunResponse{}, accepted: runningResponse{}, errors: []string{boxer.ECodeNotFound, boxer.ECodeResultNotKept, boxer.ECodeRunLost},
		keyed: true,
	},
	{
		method: "POST", path: routeSessions, id: "createSession", summary: "Start a session",
		description: "Starts a session: one Python interpreter in a sandbox of its own that keeps its globals, imports, open files and work dir between calls, as a notebook kernel does. Optional files, limits for the whole session, idle_timeout_seconds (default 600) and max_lifetime_seconds (default 3600). Answers 201 with the session_id and when it expires.",
		request:     SessionCreateRequest{}, example: json.RawMessage(`{"files":{"data.csv":"x,y\n1,2\n"},"memory_mb":512}`),
		ok: SessionInfo{}, status: http.StatusCreated,
		okExample: json.RawMessage(`{"session_id":"ses_jd2mrbcnkf6vt7zq3x4ahbyoue","created_at":"2026-12-02T10:00:00Z","expires_at":"2026-12-02T10:10:00Z",` +
			`"last_used_at":"2026-12-02T10:00:00Z","idle_timeout_seconds":600,"max_lifetime_seconds":3600,"memory_mb":512,"cpus":0.5,"execs":0,"busy":false,"memory_bytes":1048576}`),
		errors: []string{boxer.ECodeNotFound},
		keyed:  true, run: true,
	},
	{
		method: "GET", path: routeSessions, id: "listSessions", summary: "Your sessions",
		description: "The caller's live sessions, newest first: an API key's own, or without a key (while payments are off) those made without one.",
		ok:          SessionList{}, errors: []string{boxer.ECodeNotFound}, keyed: true,
	},
	{
		method: "POST", path: routeSessionExec, id: "execInSession", summary: "Run code in a session",
		description: "Runs code in the session's interpreter: what earlier calls defined is there. The result is /v1/exec's plus value (the repr of a trailing expression), error, figures (matplotlib figures left open, as PNG) and whether the session survived: a cell past timeout_seconds is interrupted (KeyboardInterrupt) and the session goes on, unless the cell will not stop or runs the session out of memory.",
		request:     SessionExecRequest{}, example: json.RawMessage(`{"code":"import pandas as pd\ndf = pd.read_csv('data.csv')\ndf.x.sum()"}`),
		ok:     SessionExecResponse{},
		errors: []string{boxer.ECodeCodeTooLarge, boxer.ECodeNotFound, boxer.ECodeSessionBusy, boxer.ECodeSessionEnded, boxer.ECodeSessionLost},
		keyed:  true, run: true, streams: true,
	},
	{
		method: "POST", path: routeSessionFork, id: "forkSession", summary: "Fork a session",
		description: "Starts a new session holding a copy of this one as it is now: its interpreter's memory (globals, imports, objects, open files), its work dir, /tmp and /dev/shm, its limits and timeouts. The copy takes milliseconds; from then on the two diverge, each in a sandbox of its own, as isolated from each other as any two sessions. Answers 201 with the new session_id. A session running a cell answers 409 session_busy; one that cannot be copied answers 409 fork_refused and goes on unharmed: a thread or process of its own still running (e.g. a thread pool started by a library), or memory shared with another process.",
		request:     SessionForkRequest{}, example: json.RawMessage(`{}`),
		ok: SessionInfo{}, status: http.StatusCreated,
		okExample: json.RawMessage(`{"session_id":"ses_q7xkcw3b5mzu2h6e4rsd7fnyka","created_at":"2026-12-02T10:05:00Z","expires_at":"2026-12-02T10:15:00Z",` +
			`"last_used_at":"2026-12-02T10:05:00Z","idle_timeout_seconds":600,"max_lifetime_seconds":3600,"memory_mb":512,"cpus":0.5,"execs":0,"busy":false,"memory_bytes":8388608}`),
		errors: []string{boxer.ECodeNotFound, boxer.ECodeSessionBusy, boxer.ECodeForkRefused, boxer.ECodeSessionEnded, boxer.ECodeSessionLost},
		keyed:  true, run: true,
	},
	{
		method: "POST", path: routeSessionPut, id: "putSessionFiles", summary: "Upload files into a session",
		description: "Writes files into the session's work dir, replacing those there (paths as in /v1/run-python).",
		request:     SessionFilesRequest{}, example: json.RawMessage(`{"files":{"more.csv":"x,y\n3,4\n"}}`),
		ok: SessionFilesResponse{}, errors: []string{boxer.ECodeNotFound, boxer.ECodeSessionEnded, boxer.ECodeSessionLost}, keyed: true,
	},
	{
		method: "GET", path: routeSessionGet, id: "getSessionFile", summary: "Download a file from a session",
		description: "The bytes of a regular file in the session's work dir (no symlinks followed, at most 16 MiB).",
		raw:         true, errors: []string{boxer.ECodeNotFound, boxer.ECodeSessionEnded, boxer.ECodeSessionLost}, keyed: true,
	},
	{
		method: "GET", path: routeSession, id: "getSession", summary: "A session",
		description: "The session's state: when it expires, its limits, cells run, memory held. 404 for an id the caller has no session of, 410 session_ended for one that ended and session_lost for one the server lost in a restart.",
		ok:          SessionInfo{}, errors: []string{boxer.ECodeNotFound, boxer.ECodeSessionEnded, boxer.ECodeSessionLost}, keyed: true,
	},
	{
		method: "DELETE", path: routeSession, id: "deleteSession", summary: "End a session",
		description: "Ends the session at once: its interpreter, files and memory are gone.",
		ok:          SessionDeleted{}, errors: []string{boxer.ECodeNotFound, boxer.ECodeSessionEnded, boxer.ECodeSessionLost}, keyed: true,
	},
	{
		method: "GET", path: "/v1/health", id: "health", summary: "Service health and figures",
		description: "Status, version, runs, success rate and p50 of recent runs, calls and unique payers over 30 days, last call, slots in use.",
		ok:          healthBody{},
	},
	{method: "GET", path: "/healthz", id: "healthz", summary: "Liveness", description: "The process serves HTTP.", ok: statusBody{}},
	{method: "GET", path: "/readyz", id: "readyz", summary: "Readiness", description: "A sandbox can start now; fails (503) while shutting down, and while runs are priced and the x402 facilitator does not answer as configured.", ok: statusBody{},
		errors: []string{boxer.ECodeUnavailable}},
	{method: "GET", path: routeDiscovery, id: "x402Discovery", summary: "What each priced route asks for",
		description: "x402 discovery: one item per priced route whose accepts are the requirements of its 402 challenge, with the challenge's bazaar description of its input and output (the listing of the x402 specification's discovery API), and the resources' URLs (the well-known document of catalogs such as x402scan). 404 when payments are off.",
		ok:          discoverySchema, errors: []string{boxer.ECodeNotFound}},
}

// discoverySchema is what OpenAPI says of GET /.well-known/x402's answer,
// whose type is internal/x402's.
var discoverySchema = map[string]any{
	"type":     "object",
	"required": []string{"x402Version", "items", "pagination", "version", "resources"},
	"properties": map[string]any{
		"x402Version": map[string]any{"type": "integer", "const": 2},
		"items": map[string]any{"type": "array", "items": map[string]any{
			"type":     "object",
			"required": []string{"resource", "type", "x402Version", "accepts", "lastUpdated"},
			"properties": map[string]any{
				"resource":    map[string]any{"type": "string"},
				"type":        map[string]any{"type": "string"},
				"x402Version": map[string]any{"type": "integer"},
				"accepts":     map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
				"lastUpdated": map[string]any{"type": "string"},
				"metadata":    map[string]any{"type": "object"},
			},
		}},
		"pagination":   map[string]any{"type": "object"},
		"version":      map[string]any{"type": "integer", "const": 1},
		"resources":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"instructions": map[string]any{"type": "string"},
	},
}

// The codes routes answer besides their own: every route; a route with a
// body; a route keys apply to; a run route.
var (
	anyErrors   = []string{boxer.ECodeMethodNotAllowed, boxer.ECodeInternal, boxer.ECodeForbiddenHost}
	bodyErrors  = []string{boxer.ECodeInvalidJSON, boxer.ECodeInvalidRequest, boxer.ECodePayloadTooLarge, boxer.ECodeUnsupportedMedia, boxer.ECodeRequestTimeout}
	keyedErrors = []string{boxer.ECodeUnauthorized, boxer.ECodeRateLimited}
	runErrors   = []string{boxer.ECodePaymentRequired, boxer.ECodeBusy, boxer.ECodeUnavailable,
		// x402's payment-identifier extension, when priced.
		boxer.ECodeInvalidPaymentID, boxer.ECodePaymentIDConflict, boxer.ECodePaymentIDInFlight}
	// A keyed route that is not a run serves, with payments on, the payer
	// who signs in (x402 sign-in-with-x): 402 asks for the proof.
	signInErrors = []string{boxer.ECodePaymentRequired, boxer.ECodeSignInRejected}
)

// OpenAPI is boxer's OpenAPI 3.1 document.
func OpenAPI(info DocInfo) ([]byte, error) {
	errSchema := map[string]any{"$ref": "#/components/schemas/Error"}
	paths := map[string]any{}
	for _, rd := range routeDocs {
		op := map[string]any{"operationId": rd.id, "summary": rd.summary, "description": rd.description}
		if rd.request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
				"schema": mustSchema(rd.request), "example": rd.example}}}
		}
		path, params := docPath(rd.path)
		if len(params) > 0 {
			op["parameters"] = params
		}
		status := rd.status
		if status == 0 {
			status = http.StatusOK
		}
		var okMedia map[string]any
		switch m, isSchema := rd.ok.(map[string]any); {
		case rd.raw:
			okMedia = map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		case isSchema:
			okMedia = map[string]any{"application/json": map[string]any{"schema": m}}
		default:
			okMedia = map[string]any{"application/json": map[string]any{"schema": mustSchema(rd.ok)}}
		}
		if rd.okExample != nil {
			okMedia["application/json"].(map[string]any)["example"] = rd.okExample
		}
		if rd.streams {
			okMedia["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string",
				"description": "With Accept: text/event-stream: events stdout and stderr ({\"data\": text}) as the program writes, then result (the JSON answer above) or error (the error envelope)"}}
		}
		responses := map[string]any{fmt.Sprint(status): map[string]any{"description": http.StatusText(status), "content": okMedia}}
		if rd.accepted != nil {
			responses["202"] = map[string]any{"description": "The run goes on", "content": map[string]any{"application/json": map[string]any{
				"schema": mustSchema(rd.accepted)}}}
		}
		codes := append(append([]string(nil), rd.errors...), anyErrors...)
		if rd.request != nil {
			codes = append(codes, bodyErrors...)
		}
		if rd.keyed {
			codes = append(codes, keyedErrors...)
		}
		if rd.run {
			codes = append(codes, runErrors...)
		} else if rd.keyed {
			codes = append(codes, signInErrors...)
		}
		byStatus := map[int][]string{}
		for _, c := range codes {
			byStatus[httpStatus(c)] = append(byStatus[httpStatus(c)], c)
		}
		for status, cs := range byStatus {
			sort.Strings(cs)
			desc := "error: " + strings.Join(cs, ", ")
			var schema any = errSchema
			if status == http.StatusPaymentRequired {
				// The x402 layer answers with its PaymentRequired object.
				schema = map[string]any{"anyOf": []any{errSchema, paymentRequiredSchema}}
			}
			r := map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": schema}}}
			switch status {
			case http.StatusServiceUnavailable, http.StatusTooManyRequests:
				r["headers"] = map[string]any{"Retry-After": map[string]any{"description": "seconds", "schema": map[string]any{"type": "integer"}}}
			case http.StatusPaymentRequired:
				r["headers"] = map[string]any{"PAYMENT-REQUIRED": map[string]any{"description": "x402 PaymentRequired, base64 JSON", "schema": map[string]any{"type": "string"}}}
			case http.StatusUnauthorized:
				r["headers"] = map[string]any{"WWW-Authenticate": map[string]any{"schema": map[string]any{"type": "string"}}}
			}
			responses[fmt.Sprint(status)] = r
		}
		op["responses"] = responses
		if rd.keyed {
			op["security"] = []any{map[string]any{}, map[string]any{"apiKey": []any{}}}
		}
		if p, ok := info.Prices[rd.path]; ok {
			op["x-price-usd"] = p
			op["description"] = fmt.Sprintf("%s Price: %s USD a call (x402, %s), or free with an API key.", rd.description, p, info.Network)
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path].(map[string]any)[strings.ToLower(rd.method)] = op
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": map[string]any{"title": "boxer", "version": info.Version,
			"description": "Runs untrusted Python in a disposable Linux sandbox (no network, read-only system, hard limits) and returns stdout, stderr, exit code and the files the program wrote. Speaks the wire formats of seed 000 (POST /v1/exec) and seed 004 (POST /v1/run-python). Errors are {success: false, error: {code, message}} with stable codes. MCP: POST /mcp (streamable HTTP)."},
		"paths": paths,
		"components": map[string]any{
			"schemas": map[string]any{"Error": map[string]any{"type": "object", "required": []string{"success", "error"}, "additionalProperties": false,
				"properties": map[string]any{"success": map[string]any{"const": false}, "error": map[string]any{"type": "object",
					"required": []string{"code", "message"}, "additionalProperties": false,
					"properties": map[string]any{"code": map[string]any{"type": "string", "enum": allCodes()}, "message": map[string]any{"type": "string"}}}}}},
			"securitySchemes": map[string]any{"apiKey": map[string]any{"type": "http", "scheme": "bearer",
				"description": "An API key from boxer keys add; a key holder is never charged"}},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// docPath is an OpenAPI path and its parameters for a route pattern of
// net/http's: "{name}" stays, "{name...}" (the rest of the path) becomes
// "{name}".
func docPath(pattern string) (string, []any) {
	var params []any
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		if !strings.HasPrefix(p, "{") {
			continue
		}
		name, rest := strings.CutSuffix(strings.Trim(p, "{}"), "...")
		parts[i] = "{" + name + "}"
		desc := "the " + strings.ReplaceAll(name, "_", " ")
		if rest {
			desc = "a file's path relative to the work dir; a path of several parts is sent as one segment with its slashes encoded (%2F)"
		}
		params = append(params, map[string]any{"name": name, "in": "path", "required": true, "description": desc, "schema": map[string]any{"type": "string"}})
	}
	return strings.Join(parts, "/"), params
}

// paymentRequiredSchema is x402's PaymentRequired, as far as a client
// needs it to pay: a 402's body and its PAYMENT-REQUIRED header.
var paymentRequiredSchema = map[string]any{
	"type":        "object",
	"description": "x402 PaymentRequired: pay one of accepts and send it again in PAYMENT-SIGNATURE",
	"required":    []string{"x402Version", "accepts"},
	"properties": map[string]any{
		"x402Version": map[string]any{"type": "integer"},
		"error":       map[string]any{"type": "string"},
		"resource":    map[string]any{"type": "object"},
		"accepts":     map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
		"extensions":  map[string]any{"type": "object"},
	},
}

func allCodes() []string {
	return []string{boxer.ECodeInvalidJSON, boxer.ECodeInvalidRequest, boxer.ECodeUnsupportedLanguage, boxer.ECodeCodeTooLarge,
		boxer.ECodePayloadTooLarge, boxer.ECodeUnsupportedMedia, boxer.ECodeRequestTimeout, boxer.ECodeNotFound, boxer.ECodeMethodNotAllowed,
		boxer.ECodeJobIDConflict, boxer.ECodeResultNotKept, boxer.ECodeSessionBusy, boxer.ECodeSessionEnded, boxer.ECodeSessionLost, boxer.ECodeForkRefused, boxer.ECodeRunLost, boxer.ECodeUnauthorized, boxer.ECodeForbiddenHost, boxer.ECodePaymentRequired, boxer.ECodeSignInRejected, boxer.ECodeRateLimited,
		boxer.ECodeBusy, boxer.ECodeUnavailable, boxer.ECodeInternal}
}

// PricedRoute is how a run route describes itself to payment catalogs (the
// x402 bazaar extension): from routeDocs, as the OpenAPI document and
// llms.txt do.
type PricedRoute struct {
	Path, Method, Description          string
	InputExample, OutputExample, Input json.RawMessage // Input: the body's JSON Schema
}

// PricedRoutes describes the run routes.
func PricedRoutes() ([]PricedRoute, error) {
	var out []PricedRoute
	for _, rd := range routeDocs {
		if !rd.run {
			continue
		}
		schema, err := json.Marshal(mustSchema(rd.request))
		if err != nil {
			return nil, err
		}
		out = append(out, PricedRoute{Path: rd.path, Method: rd.method, Description: rd.summary + ": " + rd.description,
			InputExample: rd.example, OutputExample: rd.okExample, Input: schema})
	}
	return out, nil
}
