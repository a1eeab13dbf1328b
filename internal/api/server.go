package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"boxer"
	"boxer/internal/session"
	"boxer/internal/store"
	"boxer/internal/webhook"
)

// ErrorWriter answers a request with an error: its envelope, and the HTTP
// status of the one table (httpStatus).
type ErrorWriter = func(w http.ResponseWriter, r *http.Request, e *boxer.Error)

// Deps are what the API runs on. Runner and Store are required.
type Deps struct {
	Runner boxer.Runner
	Store  *store.Store
	// Logger receives the access log and error details. Nil: discarded.
	Logger *slog.Logger
	// Metrics receives measurements. Nil: none are taken.
	Metrics Metrics
	// Payment wraps each priced route's handler ("/v1/exec",
	// "/v1/run-python"); it runs after the method check and before the
	// body is read, and answers its own failures through fail, the api's
	// error writer. Nil: every route is free. A payment layer that has
	// verified a payment should call SetPayer.
	Payment func(route string, next http.Handler, fail ErrorWriter) http.Handler
	// SignIn wraps, when payments are on, each route that serves what a
	// payer already paid for and takes no payment (GET /v1/jobs/{job_id},
	// the unpriced session routes), for callers without an API key: x402's
	// sign-in-with-x, after which the request is the signed-in payer's. A
	// sign-in layer that has verified a proof should call SetPayer. Nil:
	// those routes serve a keyless caller as no one in particular (no job
	// record; a session by its id alone).
	SignIn func(route string, next http.Handler, fail ErrorWriter) http.Handler
	// Ready reports whether a run could start now (GET /readyz), for
	// example by starting a sandbox. Nil: always ready.
	Ready func(ctx context.Context) error
	// Discovery is GET /.well-known/x402, the priced routes and what each
	// asks for, as seen by r; ok false (or a nil Discovery): nothing is
	// priced, and the route answers 404.
	Discovery func(r *http.Request) (doc any, ok bool)
	// Doc is what GET /openapi.json and /llms.txt say of prices (Version
	// and KeysRequired come from the Config).
	Doc DocInfo
	// Sessions keeps the sessions (/v1/sessions). Nil: sessions are off.
	Sessions *session.Manager
	// Webhooks delivers async jobs' results. Nil: webhook_url is refused.
	Webhooks *webhook.Sender
	// PythonVersion is reported by GET /v1/health ("3.11.2").
	PythonVersion string
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Run routes: each call to them is recorded for GET /v1/health, and each may
// be priced.
const (
	routeExec      = "/v1/exec"
	routeRunPython = "/v1/run-python"
)

// Server is the HTTP API. It is an http.Handler; cmd/boxer puts it in an
// http.Server and calls Shutdown before that server's Shutdown returns.
type Server struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	metrics  Metrics
	now      func() time.Time
	started  time.Time
	mux      *http.ServeMux
	byMethod map[string]map[string]http.Handler // pattern -> method -> handler (see handle)
	lim      *limiter
	answers  *answers
	inflight inflight
	keyRates keyRates
	keyCount keyCount

	// killRuns is cancelled when Shutdown's grace period ends: every run
	// still going is cancelled with it.
	killRuns    context.Context
	cancelRuns  context.CancelFunc
	async       sync.WaitGroup // async jobs' background runs and webhooks
	stopJanitor chan struct{}
	janitorDone chan struct{}
	clusterDone chan struct{} // closed when the heartbeat has stopped (cluster.go)
	shutdown    sync.Once

	// onWait, when set by a test, is called when a request starts waiting
	// for another request's run of the same job_id.
	onWait func()
}

// New returns the API server for cfg (defaults applied, then validated) on
// deps. It starts a goroutine that prunes old records every
// cfg.PruneInterval; Shutdown stops it.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if deps.Runner == nil || deps.Store == nil {
		return nil, errors.New("api: Deps.Runner and Deps.Store are required")
	}
	s := &Server{
		cfg:         cfg,
		deps:        deps,
		log:         deps.Logger,
		metrics:     deps.Metrics,
		now:         deps.Now,
		mux:         http.NewServeMux(),
		inflight:    inflight{jobs: make(map[string]*flight)},
		stopJanitor: make(chan struct{}),
		janitorDone: make(chan struct{}),
		clusterDone: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.started = s.now()
	s.killRuns, s.cancelRuns = context.WithCancel(context.Background())
	s.lim = newLimiter(limits{slots: cfg.Slots, queue: cfg.Queue, queueBytes: cfg.QueueBytes,
		maxWait: cfg.QueueTimeout, maxExpected: cfg.MaxQueueWait}, s.metrics.SetRuns)
	s.answers = newAnswers(cfg.AnswerBudgetBytes)
	s.routes()
	if err := s.startCluster(); err != nil {
		return nil, fmt.Errorf("api: join the cluster: %w", err)
	}
	go s.janitor()
	return s, nil
}

func (s *Server) routes() {
	s.handle(http.MethodPost, routeExec, s.guard(routeExec, s.streamable(s.handleExec), true))
	s.handle(http.MethodPost, routeRunPython, s.guard(routeRunPython, s.streamable(s.handleRunPython), true))
	s.handle(http.MethodGet, "/v1/jobs/{job_id}", s.guard("/v1/jobs/{job_id}", s.handleGetJob, false))
	s.handle(http.MethodGet, "/v1/health", http.HandlerFunc(s.handleHealth))
	s.handle(http.MethodGet, "/healthz", http.HandlerFunc(s.handleHealthz))
	s.handle(http.MethodGet, "/readyz", http.HandlerFunc(s.handleReadyz))
	s.handle(http.MethodGet, "/openapi.json", http.HandlerFunc(s.handleOpenAPI))
	s.handle(http.MethodGet, "/llms.txt", http.HandlerFunc(s.handleLLMsTxt))
	s.handle(http.MethodGet, routeDiscovery, http.HandlerFunc(s.handleDiscovery))
	s.sessionRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, boxer.Errorf(boxer.ECodeNotFound, "no route %s", r.URL.Path))
	})
}

// handle registers h for one method on a path pattern. The method is checked
// here rather than in the mux pattern so that a 405 is the JSON error
// envelope with an Allow header, not the mux's plain text. GET routes also
// answer HEAD.
//
// A pattern may be registered for several methods, one call each.
func (s *Server) handle(method, pattern string, h http.Handler) {
	if s.byMethod == nil {
		s.byMethod = map[string]map[string]http.Handler{}
	}
	methods, seen := s.byMethod[pattern]
	if !seen {
		methods = map[string]http.Handler{}
		s.byMethod[pattern] = methods
	}
	methods[method] = h
	if method == http.MethodGet {
		methods[http.MethodHead] = h
	}
	if seen {
		return
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		stateOf(r).route = pattern
		h, ok := methods[r.Method]
		if !ok {
			allow := slices.Sorted(maps.Keys(methods))
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, r, boxer.Errorf(boxer.ECodeMethodNotAllowed, "%s %s is not allowed; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isRunRoute reports whether route runs code, and so is a call for
// /v1/health (and may be priced): the two run routes, a session's start
// (or fork) and its cells.
func (s *Server) isRunRoute(route string) bool {
	return route == routeExec || route == routeRunPython || route == routeSessions || route == routeSessionExec || route == routeSessionFork
}

// Shutdown drains the server: new runs and runs still waiting for a slot
// are refused with 503 unavailable at once, and runs in flight may finish
// until ctx is done. Then they are cancelled (the engine kills their
// sandboxes) and Shutdown waits for them to return, and reports ctx's
// error. GET /readyz fails from the start. Call it once the listener stops
// accepting, typically alongside http.Server.Shutdown:
//
//	go func() { errc <- httpServer.Shutdown(ctx) }()
//	apiServer.Shutdown(ctx) // runs finish or are killed by ctx's deadline
//	<-errc
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdown.Do(func() {
		close(s.stopJanitor)
		s.lim.drain()
		idle := s.lim.idle()
		select {
		case <-idle:
		case <-ctx.Done():
			err = ctx.Err()
			running, _ := s.lim.counts()
			s.log.Warn("grace period over: cancelling runs in flight", slog.Int("runs", running))
			s.cancelRuns()
			<-idle
		}
		<-s.janitorDone
		<-s.clusterDone
		s.async.Wait() // done: their runs are over or cancelled, their webhooks too
	})
	return err
}

// janitor deletes what is past its retention: finished jobs, calls older
// than the health window, used payment nonces (kept as long as calls, far
// beyond any x402 payment's validity).
func (s *Server) janitor() {
	defer close(s.janitorDone)
	t := time.NewTicker(s.cfg.PruneInterval)
	defer t.Stop()
	for {
		s.prune()
		select {
		case <-t.C:
		case <-s.stopJanitor:
			return
		}
	}
}

// signInPruneMargin is how long past its expiry a spent sign-in nonce is
// kept: far more than the clocks of nodes sharing a database disagree by.
const signInPruneMargin = time.Minute

func (s *Server) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := s.now()
	var errs []string
	jobs, err := s.deps.Store.PruneJobs(ctx, now.Add(-s.cfg.JobRetention))
	if err != nil {
		errs = append(errs, err.Error())
	}
	calls, err := s.deps.Store.PruneCalls(ctx, now.Add(-statsWindow))
	if err != nil {
		errs = append(errs, err.Error())
	}
	nonces, err := s.deps.Store.PruneNonces(ctx, now.Add(-statsWindow))
	if err != nil {
		errs = append(errs, err.Error())
	}
	// A spent sign-in nonce is kept until no node can take it for open:
	// its expiry, plus a margin for a node whose clock is behind this one's
	// (forgotten, it would be fresh again there).
	signIns, err := s.deps.Store.PruneSignInNonces(ctx, now.Add(-signInPruneMargin))
	if err != nil {
		errs = append(errs, err.Error())
	}
	nonces += signIns
	// An ended session's record tells a late caller why it is gone; past
	// the job retention, not_found says enough.
	sessions, err := s.deps.Store.PruneSessions(ctx, now.Add(-s.cfg.JobRetention))
	if err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := s.deps.Store.PruneKeyMinutes(ctx, now.Add(-2*time.Minute)); err != nil {
		errs = append(errs, err.Error())
	}
	// x402 payment ids carry their own expiry (their retention or lease).
	if _, err := s.deps.Store.PrunePaymentIDs(ctx, now); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		s.log.Error("prune", slog.String("error", strings.Join(errs, "; ")))
		return
	}
	if jobs+calls+nonces+sessions > 0 {
		s.log.Info("pruned", slog.Int64("jobs", jobs), slog.Int64("calls", calls), slog.Int64("nonces", nonces), slog.Int64("sessions", sessions))
	}
}
