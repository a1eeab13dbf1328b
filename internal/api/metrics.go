package api

import (
	"time"

	"boxer"
)

// Metrics receives the service's measurements. internal/api does not import
// a metrics library: cmd/boxer passes an implementation (the Prometheus one
// is in internal/api/prommetrics), so the API and its tests do not depend on
// one, and there is no global registry to share.
//
// Implementations must be safe for concurrent use and cheap: they are
// called on every request.
type Metrics interface {
	// ObserveRequest counts one request by route pattern and HTTP status
	// and records its latency. route is "other" when no route matched.
	ObserveRequest(route string, status int, d time.Duration)
	// ObserveRun records one program run by route and outcome: d is the
	// program's wall time.
	ObserveRun(route string, status boxer.Status, d time.Duration)
	// SetRuns reports the limiter's state after each change: runs
	// executing and runs waiting for a slot.
	SetRuns(running, queued int)
}

type noMetrics struct{}

func (noMetrics) ObserveRequest(string, int, time.Duration)      {}
func (noMetrics) ObserveRun(string, boxer.Status, time.Duration) {}
func (noMetrics) SetRuns(int, int)                               {}
