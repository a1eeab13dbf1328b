package mcpserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A JSON-RPC batch is refused before any of its calls runs: it would run
// them all at once. One message a request goes through, and so does the
// front end boxer serve puts before the transport (Before).
func TestHTTPNoBatches(t *testing.T) {
	h, got := stubAPI(t, 200, nil, okRun())
	s, err := New(Config{API: h, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	befores := 0
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{MaxBody: 1 << 20,
		Before: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { befores++; next.ServeHTTP(w, r) })
		}}))
	defer srv.Close()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)"}}}`
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post(call); status != 200 || !strings.Contains(body, `"stdout":"hi\n"`) || got.path != "/v1/run-python" {
		t.Fatalf("one call: %d %s", status, body)
	}
	got.path = ""
	status, body := post(" \n[" + call + "," + call + "]")
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal([]byte(body), &e)
	if status != 400 || e.Error.Code != "invalid_request" || got.path != "" {
		t.Fatalf("a batch: %d %s (API reached: %q)", status, body, got.path)
	}
	if befores != 2 {
		t.Fatalf("Before ran %d times, want 2", befores)
	}
}
