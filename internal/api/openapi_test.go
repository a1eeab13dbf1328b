package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The document is valid OpenAPI 3.1, priced or not.
func TestOpenAPIDocument(t *testing.T) {
	for _, info := range []DocInfo{{Version: "test"}, {Version: "test", Prices: map[string]string{"/v1/exec": "0.02", "/v1/run-python": "0.01"}, Network: "eip155:8453"}} {
		doc := loadDoc(t, info)
		if !doc.IsOpenAPI31OrLater() {
			t.Fatalf("openapi %s, want 3.1", doc.OpenAPI)
		}
		if n := doc.Paths.Len(); n != len(routeDocs) {
			t.Fatalf("%d paths, want %d", n, len(routeDocs))
		}
	}
}

func loadDoc(t testing.TB, info DocInfo) *openapi3.T {
	t.Helper()
	b, err := OpenAPI(info)
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	return doc
}

// docCheck validates the tests' responses against the document: every
// response of a documented route, whatever the test asserts besides.
var docCheck struct {
	once      sync.Once
	router    routers.Router
	validated atomic.Int64
}

func checkAgainstDoc(t *testing.T, req *http.Request, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	docCheck.once.Do(func() {
		doc := loadDoc(t, DocInfo{Version: "test"})
		doc.Servers = openapi3.Servers{{URL: "http://example.com"}}
		r, err := gorillamux.NewRouter(doc)
		if err != nil {
			t.Fatal(err)
		}
		docCheck.router = r
	})
	if rec.Code == statusClientClosed || req.Method == http.MethodHead || req.Method == http.MethodOptions || req.Context().Err() != nil {
		return // nothing was sent, or nobody was there to read it
	}
	if rec.Code == http.StatusPaymentRequired && rec.Body.Len() == 0 {
		return // a test's stand-in for the payment layer, not boxer's answer
	}
	u := *req.URL
	u.Scheme, u.Host = "http", "example.com"
	r2 := req.Clone(context.Background())
	r2.URL = &u
	r2.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := docCheck.router.FindRoute(r2)
	if err != nil {
		return // an undocumented path: the 404 fallback, a wrong method
	}
	in := &openapi3filter.RequestValidationInput{Request: r2, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s -> %d does not match /openapi.json: %v\nbody: %.300s", req.Method, req.URL.Path, rec.Code, err, rec.Body.String())
	}
	docCheck.validated.Add(1)
}

// TestMain reports how many responses were checked against the document.
func TestMain(m *testing.M) {
	code := m.Run()
	if n := docCheck.validated.Load(); n > 0 {
		fmt.Printf("openapi: %d responses validated against /openapi.json\n", n)
	}
	os.Exit(code)
}

// The service serves its documents: the OpenAPI one as built, llms.txt
// naming every route, the limits and, when priced, the prices.
func TestServedDocuments(t *testing.T) {
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Doc = DocInfo{Prices: map[string]string{"/v1/exec": "0.02", "/v1/run-python": "0.01"}, Network: "eip155:8453", Asset: "0xUSDC"}
	})
	rec := ts.do("GET", "/openapi.json", "")
	want, _ := OpenAPI(DocInfo{Version: "test", Prices: map[string]string{"/v1/exec": "0.02", "/v1/run-python": "0.01"}, Network: "eip155:8453", Asset: "0xUSDC"})
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), want) {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Header())
	}
	rec = ts.do("GET", "/llms.txt", "")
	text := rec.Body.String()
	for _, s := range []string{
		"- Endpoint: POST http://example.com/v1/exec (Run a Python snippet)",
		"- Endpoint: POST http://example.com/v1/run-python (Run Python files)",
		"- MCP: http://example.com/mcp (streamable HTTP), tools run_python and exec",
		"- Price of /v1/exec: $0.02 a call, paid with x402 (eip155:8453, asset 0xUSDC); free with an API key",
		"- /v1/exec: 0.5 CPU, 512 MiB of memory, 30s",
		"### GET /v1/jobs/{job_id}",
		`curl -s http://example.com/v1/run-python -H 'Content-Type: application/json' -d '{"files":{"main.py":"print(2 + 2)"},"timeout_seconds":10}'`,
		"409 job_id_conflict",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("llms.txt lacks %q", s)
		}
	}
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || t.Failed() {
		t.Fatalf("GET /llms.txt: %d %s\n%s", rec.Code, rec.Header(), text)
	}
}
