package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"boxer/internal/api"
)

// docChecked wraps base so that every answer of the real server to a
// documented route is validated against its OpenAPI document: the end to
// end tests and the attack suite check the document as they go. An answer
// that does not match fails the request (and so its test).
func docChecked(base http.RoundTripper) http.RoundTripper {
	return &docTransport{base: base}
}

type docTransport struct{ base http.RoundTripper }

var docCheck struct {
	once      sync.Once
	router    routers.Router
	err       error
	validated atomic.Int64
}

func (d *docTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return resp, err
	}
	docCheck.once.Do(func() {
		b, err := api.OpenAPI(api.DocInfo{Version: "test"})
		if err != nil {
			docCheck.err = err
			return
		}
		doc, err := openapi3.NewLoader().LoadFromData(b)
		if err != nil {
			docCheck.err = err
			return
		}
		doc.Servers = openapi3.Servers{{URL: "http://boxer.test"}}
		docCheck.router, docCheck.err = gorillamux.NewRouter(doc)
	})
	if docCheck.err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("openapi document: %w", docCheck.err)
	}
	r2 := req.Clone(context.Background())
	u := *req.URL
	u.Scheme, u.Host = "http", "boxer.test"
	r2.URL, r2.Body = &u, http.NoBody
	route, params, err := docCheck.router.FindRoute(r2)
	if err != nil {
		return resp, nil // an undocumented path: the 404 fallback, a wrong method
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: r2, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return nil, fmt.Errorf("%s %s -> %d does not match /openapi.json: %v (body %.300s)", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	docCheck.validated.Add(1)
	return resp, nil
}

// TestMain reports how many answers were checked against the document.
func TestMain(m *testing.M) {
	code := m.Run()
	if n := docCheck.validated.Load(); n > 0 {
		fmt.Printf("openapi: %d answers of the real server validated against /openapi.json\n", n)
	}
	os.Exit(code)
}
