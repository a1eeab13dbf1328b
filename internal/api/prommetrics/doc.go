// Package prommetrics implements api.Metrics with Prometheus collectors
// registered on a registry the caller owns (no global registry), and serves
// them with Handler.
//
// It is built only with the boxer_prometheus build tag until go.sum carries
// client_golang's dependencies: run
//
//	go get github.com/prometheus/client_golang/prometheus@v1.25.0
//
// then delete the //go:build lines of this package.
package prommetrics
