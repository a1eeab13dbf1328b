package prommetrics

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"boxer"
	"boxer/internal/api"
)

// Metrics is the Prometheus implementation of api.Metrics.
type Metrics struct {
	requests   *prometheus.CounterVec
	requestDur *prometheus.HistogramVec
	runDur     *prometheus.HistogramVec
	running    prometheus.Gauge
	queued     prometheus.Gauge
}

var _ api.Metrics = (*Metrics)(nil)

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	// Run durations span a 10 ms print to the 30 s limit.
	runBuckets := []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boxer_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		requestDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boxer_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern, queueing included.",
			Buckets: runBuckets,
		}, []string{"route"}),
		runDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "boxer_run_duration_seconds",
			Help:    "Wall time of programs run, by route and outcome.",
			Buckets: runBuckets,
		}, []string{"route", "status"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "boxer_runs_running",
			Help: "Runs executing now.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "boxer_runs_queued",
			Help: "Runs waiting for a slot.",
		}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, m.requestDur, m.runDur, m.running, m.queued} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// ObserveRequest implements api.Metrics.
func (m *Metrics) ObserveRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestDur.WithLabelValues(route).Observe(d.Seconds())
}

// ObserveRun implements api.Metrics.
func (m *Metrics) ObserveRun(route string, status boxer.Status, d time.Duration) {
	m.runDur.WithLabelValues(route, string(status)).Observe(d.Seconds())
}

// SetRuns implements api.Metrics.
func (m *Metrics) SetRuns(running, queued int) {
	m.running.Set(float64(running))
	m.queued.Set(float64(queued))
}

// Handler serves the metrics gathered from g in the Prometheus text format,
// for cmd/boxer to mount at /metrics if it wants them exposed.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// SessionStats are the figures of the sessions a scrape reports.
type SessionStats struct {
	Live, Busy                   int
	MemoryBytes, IdleMemoryBytes int64
}

// RegisterSessions has reg report the sessions' figures, read from stats
// once per scrape.
func RegisterSessions(reg prometheus.Registerer, stats func() SessionStats) error {
	return reg.Register(sessionCollector(stats))
}

type sessionCollector func() SessionStats

var (
	sessionsDesc = prometheus.NewDesc("boxer_sessions", "Live sessions, by state (busy: a cell is running).", []string{"state"}, nil)
	sessionMem   = prometheus.NewDesc("boxer_sessions_memory_bytes", "Memory the sessions' cgroups hold, by state (idle: no cell running).", []string{"state"}, nil)
)

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- sessionMem
}

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c()
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(st.Busy), "busy")
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(st.Live-st.Busy), "idle")
	ch <- prometheus.MustNewConstMetric(sessionMem, prometheus.GaugeValue, float64(st.MemoryBytes-st.IdleMemoryBytes), "busy")
	ch <- prometheus.MustNewConstMetric(sessionMem, prometheus.GaugeValue, float64(st.IdleMemoryBytes), "idle")
}

// RegisterCapacity registers what an autoscaler or an operator sizes a
// node by besides its runs: its run slots, and the warm sandboxes ready
// for a job now, by pool lane (ready reads them at each scrape).
func RegisterCapacity(reg prometheus.Registerer, slots int, ready func() map[string]int) error {
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "boxer_run_slots", Help: "Runs this node takes at once (--slots); boxer_runs_running of them are busy.",
	}, func() float64 { return float64(slots) })); err != nil {
		return err
	}
	return reg.Register(readyCollector(ready))
}

type readyCollector func() map[string]int

var readyDesc = prometheus.NewDesc("boxer_pool_ready", "Warm sandboxes ready for a job now, by pool lane.", []string{"lane"}, nil)

func (c readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- readyDesc }

func (c readyCollector) Collect(ch chan<- prometheus.Metric) {
	for lane, n := range c() {
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(n), lane)
	}
}
