package main

import (
	"boxer/internal/testenv"
	"fmt"
	"net/http"
	"os"
	"testing"

	"boxer/internal/api"
	"boxer/internal/api/openapicheck"
)

// docCheck validates the real server's answers in these tests, the attack
// suite's included, against the OpenAPI document.
var docCheck = func() *openapicheck.Checker {
	doc, err := api.OpenAPI(api.DocInfo{Version: "test"})
	if err != nil {
		panic(err)
	}
	c, err := openapicheck.New(doc)
	if err != nil {
		panic(err)
	}
	return c
}()

func docChecked(base http.RoundTripper) http.RoundTripper { return docCheck.Transport(base) }

// TestMain reports how many answers were checked against the document.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres() // the cluster tests' server
	if n := docCheck.Validated(); n > 0 {
		fmt.Printf("openapi: %d answers of the real server validated against /openapi.json\n", n)
	}
	os.Exit(code)
}
