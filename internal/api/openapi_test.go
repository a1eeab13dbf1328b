package api

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"boxer/internal/api/openapicheck"
)

// The document is valid OpenAPI 3.1, priced or not, with an operation for
// each documented route.
func TestOpenAPIDocument(t *testing.T) {
	for _, info := range []DocInfo{{Version: "test"}, {Version: "test", Prices: map[string]string{"/v1/exec": "0.02", "/v1/run-python": "0.01"}, Network: "eip155:8453"}} {
		c := newDocCheck(t, info)
		ops := 0
		for _, item := range c.Doc().Paths.Map() {
			ops += len(item.Operations())
		}
		if ops != len(routeDocs) {
			t.Fatalf("%d operations, want %d", ops, len(routeDocs))
		}
	}
}

func newDocCheck(t testing.TB, info DocInfo) *openapicheck.Checker {
	t.Helper()
	b, err := OpenAPI(info)
	if err != nil {
		t.Fatal(err)
	}
	c, err := openapicheck.New(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// docCheck validates the tests' responses against the document: every
// response of a documented route, whatever the test asserts besides.
var docCheck struct {
	once sync.Once
	c    *openapicheck.Checker
}

func checkAgainstDoc(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	docCheck.once.Do(func() { docCheck.c = newDocCheck(t, DocInfo{Version: "test"}) })
	if rec.Code == statusClientClosed || req.Method == http.MethodHead || req.Method == http.MethodOptions || req.Context().Err() != nil {
		return // nothing was sent, or nobody was there to read it
	}
	if rec.Code == http.StatusPaymentRequired && rec.Body.Len() == 0 {
		return // a test's stand-in for the payment layer, not boxer's answer
	}
	if _, err := docCheck.c.Check(req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Error(err)
	}
}

// TestMain reports how many responses were checked against the document.
func TestMain(m *testing.M) {
	code := m.Run()
	if docCheck.c != nil {
		fmt.Printf("openapi: %d responses validated against /openapi.json\n", docCheck.c.Validated())
	}
	os.Exit(code)
}

// The service serves its documents: the OpenAPI one as built, llms.txt
// naming every route, the limits and, when priced, the prices.
func TestServedDocuments(t *testing.T) {
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Doc = DocInfo{Prices: map[string]string{"/v1/exec": "0.02", "/v1/run-python": "0.01"}, Network: "eip155:8453", Asset: "0xUSDC",
			AlsoPaidOn: []string{"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp (asset EPjF)"}, SignIn: true}
	})
	rec := ts.do("GET", "/openapi.json", "")
	want, _ := OpenAPI(DocInfo{Version: "test", Prices: map[string]string{"/v1/exec": "0.02", "/v1/run-python": "0.01"}, Network: "eip155:8453", Asset: "0xUSDC",
		AlsoPaidOn: []string{"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp (asset EPjF)"}, SignIn: true})
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), want) {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Header())
	}
	rec = ts.do("GET", "/llms.txt", "")
	text := rec.Body.String()
	for _, s := range []string{
		"- Endpoint: POST http://example.com/v1/exec (Run a Python snippet)",
		"- Endpoint: POST http://example.com/v1/run-python (Run Python files)",
		"- MCP: http://example.com/mcp (streamable HTTP), tools run_python, exec and session_create",
		"- Price of /v1/exec: $0.02 a call, paid with x402 (eip155:8453, asset 0xUSDC); free with an API key",
		"- /v1/exec: 0.5 CPU, 512 MiB of memory, 30s",
		"### GET /v1/jobs/{job_id}",
		`curl -s http://example.com/v1/run-python -H 'Content-Type: application/json' -d '{"files":{"main.py":"print(2 + 2)"},"timeout_seconds":10}'`,
		"409 job_id_conflict",
		"- x402 discovery: http://example.com/.well-known/x402 (each priced route and what its 402 challenge asks for)",
		"- Also payable with x402 on solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp (asset EPjF), while the facilitator offers it",
		"send it in SIGN-IN-WITH-X; a bad, expired or reused proof: 401 sign_in_rejected",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("llms.txt lacks %q", s)
		}
	}
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || t.Failed() {
		t.Fatalf("GET /llms.txt: %d %s\n%s", rec.Code, rec.Header(), text)
	}
}

// GET /.well-known/x402 serves the payment layer's document, cacheable, and
// is a JSON 404 while nothing is priced.
func TestDiscoveryRoute(t *testing.T) {
	free := newTestServer(t, Config{}, nil)
	wantError(t, free.do("GET", "/.well-known/x402", ""), http.StatusNotFound, "not_found")

	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Discovery = func(r *http.Request) (any, bool) {
			return map[string]any{"x402Version": 2, "items": []any{}, "pagination": map[string]any{}, "version": 1, "resources": []string{"http://" + r.Host + "/v1/exec"}}, true
		}
	})
	rec := ts.do("GET", "/.well-known/x402", "")
	want := `{"items":[],"pagination":{},"resources":["http://example.com/v1/exec"],"version":1,"x402Version":2}`
	if rec.Code != 200 || rec.Header().Get("Cache-Control") != "public, max-age=300" || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("GET /.well-known/x402: %d %s %s", rec.Code, rec.Header(), rec.Body)
	}
	wantError(t, ts.do("POST", "/.well-known/x402", "{}"), http.StatusMethodNotAllowed, "method_not_allowed")
}

// Unpriced, or priced without Solana or sign-in, llms.txt names neither.
func TestServedDocumentsWithoutSolanaOrSignIn(t *testing.T) {
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Doc = DocInfo{Prices: map[string]string{"/v1/exec": "0.02"}, Network: "eip155:8453", Asset: "0xUSDC"}
	})
	text := ts.do("GET", "/llms.txt", "").Body.String()
	if strings.Contains(text, "Also payable") || strings.Contains(text, "without paying again (when priced)") {
		t.Fatalf("llms.txt names Solana or sign-in, which are off:\n%s", text)
	}
}
