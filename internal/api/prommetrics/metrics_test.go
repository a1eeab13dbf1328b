package prommetrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"boxer"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Fatal("registering twice on one registry succeeded")
	}
	m.ObserveRequest("/v1/exec", 200, 250*time.Millisecond)
	m.ObserveRequest("/v1/exec", 200, 50*time.Millisecond)
	m.ObserveRequest("/v1/exec", 503, time.Millisecond)
	m.ObserveRun("/v1/exec", boxer.StatusTimeout, 30*time.Second)
	m.SetRuns(2, 3)

	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`boxer_http_requests_total{code="200",route="/v1/exec"} 2`,
		`boxer_http_requests_total{code="503",route="/v1/exec"} 1`,
		`boxer_http_request_duration_seconds_count{route="/v1/exec"} 3`,
		`boxer_run_duration_seconds_count{route="/v1/exec",status="timeout"} 1`,
		`boxer_runs_running 2`,
		`boxer_runs_queued 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}
