package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The guard in front of /mcp refuses what the API's own routes refuse
// before a handler: a caller refused anyway (before its body is read), a
// body too large, and JSON-RPC batches, which would run every call they
// hold at once.
func TestHTTPGuard(t *testing.T) {
	h, got := stubAPI(t, 200, nil, okRun())
	s, err := New(Config{API: h, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{MaxBody: 4096, BodyTimeout: time.Minute,
		RefusesAnonymous: func(context.Context) bool { return refuse }}))
	defer srv.Close()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)"}}}`
	post := func(body string, headers ...string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code := func(body string) string {
		var e struct{ Error struct{ Code string } }
		_ = json.Unmarshal([]byte(body), &e)
		return e.Error.Code
	}

	if status, body := post(call); status != 200 || !strings.Contains(body, `"stdout":"hi\n"`) {
		t.Fatalf("one call: %d %s", status, body)
	}
	if status, body := post(" \n[" + call + "," + call + "]"); status != 400 || code(body) != "invalid_request" || got.path != "/v1/run-python" {
		t.Fatalf("a batch: %d %s", status, body)
	}
	if status, body := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"code":"` + strings.Repeat("x", 5000) + `"}}}`); status != 413 || code(body) != "payload_too_large" {
		t.Fatalf("too large: %d %s", status, body)
	}
	refuse = true
	got.path = ""
	if status, body := post(call); status != 401 || code(body) != "unauthorized" || got.path != "" {
		t.Fatalf("anonymous, keys required: %d %s (API reached: %q)", status, body, got.path)
	}
	if status, _ := post(call, "Authorization", "Bearer bxk_x_y"); status != 200 || got.path != "/v1/run-python" {
		t.Fatalf("with a key the API decides: %d", status)
	}
}
