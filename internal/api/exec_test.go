package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"boxer"
)

// The seed's own example (000): request {"code": "print(2 + 2)",
// "language": "python"}, response as below.
const seedExecExample = `{"result":{"durationMs":210,"exitCode":0,"stderr":"","stdout":"4\n","timedOut":false},"success":true}`

func TestExecSeedExample(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	rec := ts.do("POST", "/v1/exec", `{"code": "print(2 + 2)", "language": "python"}`)
	if rec.Code != 200 {
		t.Fatalf("status = %d: %s", rec.Code, rec.Body)
	}
	want := `{"success":true,"result":{"stdout":"4\n","stderr":"","exitCode":0,"durationMs":210,"timedOut":false,` +
		`"status":"ok","oomKilled":false,"oomKills":0,"stdoutTruncated":false,"stderrTruncated":false,"cpuTimeMs":35,` +
		`"memoryPeakBytes":9437184,"signal":null,"timing":{"queueMs":0,"acquireMs":3,"runMs":210,"collectMs":2}}}`
	if got := rec.Body.String(); got != want {
		t.Fatalf("body =\n%s\nwant\n%s", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}

	// Every field of the seed's example is there with the seed's value.
	var seed, got map[string]any
	json.Unmarshal([]byte(seedExecExample), &seed)
	json.Unmarshal(rec.Body.Bytes(), &got)
	if got["success"] != seed["success"] {
		t.Errorf("success = %v", got["success"])
	}
	for k, v := range seed["result"].(map[string]any) {
		if g := got["result"].(map[string]any)[k]; !reflect.DeepEqual(g, v) {
			t.Errorf("result.%s = %v, want %v", k, g, v)
		}
	}

	job := ts.runner.last()
	want2 := &boxer.Job{
		Runtime: "python",
		Argv:    []string{"python", "main.py"},
		Files:   []boxer.File{{Path: "main.py", Content: []byte("print(2 + 2)")}},
		Limits:  DefaultExecLimits(),
	}
	if !reflect.DeepEqual(job, want2) {
		t.Errorf("job =\n%+v\nwant\n%+v", job, want2)
	}
}

func TestExecOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		result *boxer.Result
		want   map[string]any // fields of result
	}{
		{"runtime error", &boxer.Result{Status: boxer.StatusNonzeroExit, ExitCode: 1,
			Stderr: boxer.Output{Data: []byte("Traceback (most recent call last):\n  File \"main.py\", line 1\nZeroDivisionError\n")}},
			map[string]any{"exitCode": 1.0, "status": "nonzero_exit", "timedOut": false,
				"stderr": "Traceback (most recent call last):\n  File \"main.py\", line 1\nZeroDivisionError\n"}},
		{"timeout keeps partial stdout", &boxer.Result{Status: boxer.StatusTimeout, ExitCode: -1, Signal: "SIGKILL",
			Wall: 30 * time.Second, Stdout: boxer.Output{Data: []byte("partial\n")}},
			map[string]any{"timedOut": true, "status": "timeout", "stdout": "partial\n", "signal": "SIGKILL", "durationMs": 30000.0}},
		{"oom", &boxer.Result{Status: boxer.StatusOOM, ExitCode: -1, Signal: "SIGKILL", OOMKills: 1},
			map[string]any{"oomKilled": true, "oomKills": 1.0, "status": "oom", "timedOut": false}},
		{"a child killed for memory: the main process's status, and the count", &boxer.Result{Status: boxer.StatusOK, OOMKills: 6},
			map[string]any{"oomKilled": true, "oomKills": 6.0, "status": "ok", "exitCode": 0.0}},
		{"truncated", &boxer.Result{Status: boxer.StatusOK, Stdout: boxer.Output{Data: []byte("xx"), Bytes: 9, Truncated: true}},
			map[string]any{"stdoutTruncated": true, "stderrTruncated": false}},
		{"html is not escaped", &boxer.Result{Status: boxer.StatusOK, Stdout: boxer.Output{Data: []byte("<a&b>\n")}},
			map[string]any{"stdout": "<a&b>\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, Config{}, nil)
			ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) { return tt.result, nil })
			rec := ts.do("POST", "/v1/exec", `{"code":"x"}`)
			if rec.Code != 200 {
				t.Fatalf("status = %d: %s", rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), `\u003c`) {
				t.Errorf("HTML-escaped output: %s", rec.Body)
			}
			var body struct {
				Success bool           `json:"success"`
				Result  map[string]any `json:"result"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if !body.Success {
				t.Error("success = false; a program that ran is a success whatever its exit")
			}
			for k, v := range tt.want {
				if body.Result[k] != v {
					t.Errorf("result.%s = %#v, want %#v", k, body.Result[k], v)
				}
			}
		})
	}
}

func TestExecHTTPErrors(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	code := func(n int) string { return `{"code":"` + strings.Repeat("a", n) + `"}` }
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"64 KiB of code", code(65536), 200, ""},
		{"64 KiB + 1 of code", code(65537), 413, boxer.ECodeCodeTooLarge},
		{"limit counted in bytes", `{"code":"` + strings.Repeat("é", 32769) + `"}`, 413, boxer.ECodeCodeTooLarge},
		{"escaped code under the body cap", `{"code":"` + strings.Repeat(`\u0061`, 65537) + `"}`, 413, boxer.ECodeCodeTooLarge},
		{"body over the cap", code(DefaultMaxExecBodyBytes), 413, boxer.ECodePayloadTooLarge},
		{"empty body", "", 400, boxer.ECodeInvalidJSON},
		{"malformed", `{"code":`, 400, boxer.ECodeInvalidJSON},
		{"wrong type", `{"code":1}`, 400, boxer.ECodeInvalidRequest},
		{"unsupported language", `{"code":"1","language":"ruby"}`, 400, boxer.ECodeUnsupportedLanguage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ts.runner.count()
			rec := ts.do("POST", "/v1/exec", tt.body)
			if tt.code == "" {
				if rec.Code != tt.status {
					t.Fatalf("status = %d: %s", rec.Code, rec.Body)
				}
				return
			}
			wantError(t, rec, tt.status, tt.code)
			if ts.runner.count() != before {
				t.Error("a rejected request reached the runner")
			}
		})
	}
}

// TestBodyCapWhileReading: a body of unknown length (chunked) is still cut
// at the cap while it is read.
func TestBodyCapWhileReading(t *testing.T) {
	ts := newTestServer(t, Config{MaxExecBodyBytes: 1024, MaxCodeBytes: 512}, nil)
	body := `{"code":"` + strings.Repeat("a", 2000) + `"}`
	req := httptest.NewRequest("POST", "/v1/exec", io.MultiReader(strings.NewReader(body)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	ts.ServeHTTP(rec, req)
	wantError(t, rec, 413, boxer.ECodePayloadTooLarge)
}
