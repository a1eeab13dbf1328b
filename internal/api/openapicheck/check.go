// Package openapicheck validates boxer's answers against its own OpenAPI
// document (api.OpenAPI, handed in as bytes: the api package's own tests
// use this package too) with kin-openapi. Tests use it: the api package's
// handler tests and cmd/boxer's end-to-end tests and attack suite check
// every answer to a documented route as they go, so the document is held
// to what boxer really sends.
package openapicheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Checker validates answers against the document.
type Checker struct {
	doc       *openapi3.T
	router    routers.Router
	validated atomic.Int64
}

// host stands for any server's: answers are matched by path and method.
const host = "boxer.test"

// New loads document and checks it is valid OpenAPI 3.1.
func New(document []byte) (*Checker, error) {
	doc, err := openapi3.NewLoader().LoadFromData(document)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("invalid OpenAPI document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi %s, want 3.1", doc.OpenAPI)
	}
	doc.Servers = openapi3.Servers{{URL: "http://" + host}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Checker{doc: doc, router: router}, nil
}

// Doc is the loaded document.
func (c *Checker) Doc() *openapi3.T { return c.doc }

// Check validates the answer (status, header, body) to req. An answer to
// a path or method the document does not have is not checked (the 404
// and 405 fallbacks), and reports false.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) (bool, error) {
	r := req.Clone(context.Background())
	u := *req.URL
	u.Scheme, u.Host = "http", host
	r.URL, r.Body = &u, http.NoBody
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		return false, nil
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return true, fmt.Errorf("%s %s -> %d does not match /openapi.json: %v (body %.300s)", req.Method, req.URL.Path, status, err, body)
	}
	c.validated.Add(1)
	return true, nil
}

// Validated counts the answers checked and found to match.
func (c *Checker) Validated() int64 { return c.validated.Load() }

// Transport wraps base so that every answer is checked: one that does not
// match the document fails its request with the mismatch.
func (c *Checker) Transport(base http.RoundTripper) http.RoundTripper {
	return transport{c, base}
}

type transport struct {
	c    *Checker
	base http.RoundTripper
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if _, err := t.c.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		return nil, err
	}
	return resp, nil
}
