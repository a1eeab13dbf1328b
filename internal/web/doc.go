// Package web is boxer's web playground: one page, served at /, where a
// person tries boxer without curl. It is a plain client of the HTTP API
// (POST /v1/run-python), embedded in the binary with no build step and
// nothing fetched from elsewhere, so it works offline and on a host with
// no route to the internet.
package web
