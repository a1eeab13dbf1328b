package x402

import "encoding/json"

// DefaultRoutes are boxer's two paid routes, priced as in the discovery
// records of the services boxer replaces: $0.02 for /v1/exec and $0.01 for
// /v1/run-python. boxer serve describes them from internal/api's own
// description instead (api.PricedRoutes, the source of /openapi.json and
// /llms.txt); these descriptions are the package's defaults, for its tests
// and for a Config built without one.
func DefaultRoutes() []Route {
	return []Route{
		{
			Path:  "/v1/exec",
			Price: "0.02",
			Description: "Run untrusted Python code in an isolated Linux sandbox (no network, read-only root, " +
				"0.5 CPU, 512 MB RAM, 30 s timeout). Returns stdout, stderr and exit code.",
			Method:        "POST",
			InputExample:  json.RawMessage(`{"code":"print(2 + 2)","language":"python"}`),
			BodySchema:    json.RawMessage(execBodySchema),
			OutputExample: json.RawMessage(`{"success":true,"result":{"stdout":"4\n","stderr":"","exitCode":0,"durationMs":210,"timedOut":false}}`),
		},
		{
			Path:  "/v1/run-python",
			Price: "0.01",
			Description: "Run supplied Python files in a disposable isolated sandbox and return stdout, stderr, " +
				"exit code and requested artifacts. No network, GPU or host access.",
			Method:        "POST",
			InputExample:  json.RawMessage(`{"files":{"main.py":"print(2 + 2)"},"command":["python","main.py"],"timeout_seconds":10}`),
			BodySchema:    json.RawMessage(runPythonBodySchema),
			OutputExample: json.RawMessage(`{"status":"ok","exit_code":0,"stdout":"4\n","stderr":"","artifacts":[]}`),
		},
	}
}

const execBodySchema = `{"type":"object","properties":{` +
	`"code":{"type":"string","description":"Python source, at most 64 KiB."},` +
	`"language":{"type":"string","enum":["python"]}},` +
	`"required":["code"]}`

const runPythonBodySchema = `{"type":"object","properties":{` +
	`"files":{"type":"object","description":"Relative file path -> UTF-8 text content.","minProperties":1,"maxProperties":64,"additionalProperties":{"type":"string"}},` +
	`"command":{"type":"array","items":{"type":"string"},"description":"Optional argv; defaults to ['python','main.py']."},` +
	`"stdin":{"type":"string"},` +
	`"runtime":{"type":"string","enum":["python"]},` +
	`"timeout_seconds":{"type":"integer","minimum":1,"maximum":30},` +
	`"memory_mb":{"type":"integer","minimum":64,"maximum":1024},` +
	`"cpus":{"type":"number","minimum":0.1,"maximum":2},` +
	`"artifact_paths":{"type":"array","items":{"type":"string"},"maxItems":16},` +
	`"job_id":{"type":"string"}},` +
	`"required":["files"]}`
