package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// The storage probes (issue 19): what a run leaves in the server's
// database. A run without a job_id leaves nothing: the id its answer
// carries is unknown to GET. A job_id result larger than the server keeps
// (8 MiB) is sent once, and its replay and its GET answer 410
// result_not_kept instead of running again or replaying megabytes.
func runStorageProbes(t *testing.T, a *attacker, host *hostWatch) {
	probe(t, a, host, "storage/no-job-id-not-kept", false, func(t *testing.T, path string) {
		code, body := a.raw(t, http.MethodPost, "/v1/run-python", runBody(path, map[string]string{"main.py": "print(1)"}, ""))
		var res struct {
			JobID  string `json:"job_id"`
			Stdout string `json:"stdout"`
		}
		if err := json.Unmarshal(body, &res); err != nil || code != 200 || res.Stdout != "1\n" || res.JobID == "" {
			t.Fatalf("%d %.300s", code, body)
		}
		wantAPIError(t, a, http.MethodGet, "/v1/jobs/"+res.JobID, "", 404, "not_found")
	})
	probe(t, a, host, "storage/large-result-sent-once", false, func(t *testing.T, path string) {
		req := runBody(path, map[string]string{"main.py": `import os; open("big", "wb").write(os.urandom(9 << 20))`},
			fmt.Sprintf(`"job_id": "large-%s", "artifact_paths": ["big"]`, path))
		r := a.send(t, "/v1/run-python", "", []byte(req))
		if r.code != 200 || len(r.artifacts["big"]) < 9<<20 {
			t.Fatalf("first run: %d %s %.100q", r.code, r.errMsg, r.artifacts["big"])
		}
		wantAPIError(t, a, http.MethodPost, "/v1/run-python", req, 410, "result_not_kept")
		wantAPIError(t, a, http.MethodGet, "/v1/jobs/large-"+path, "", 410, "result_not_kept")
	})
}

// raw sends a request and returns its status and body, whatever they are.
func (a *attacker) raw(t *testing.T, method, route, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.s.url+route, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// wantAPIError sends a request and checks that it gets the error code with
// status.
func wantAPIError(t *testing.T, a *attacker, method, route, body string, status int, code string) {
	t.Helper()
	got, b := a.raw(t, method, route, body)
	var e struct {
		Success *bool `json:"success"`
		Error   struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || got != status || e.Success == nil || *e.Success || e.Error.Code != code {
		t.Errorf("%s %s: %d %.300s, want %d %s", method, route, got, b, status, code)
	}
}
