package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"boxer"
	"boxer/internal/api"
	"boxer/internal/api/prommetrics"
	"boxer/internal/mcpserver"
	"boxer/internal/pool"
	"boxer/internal/sandbox"
	"boxer/internal/sandbox/warm"
	"boxer/internal/session"
	"boxer/internal/store"
	"boxer/internal/web"
	"boxer/internal/webhook"
	"boxer/internal/x402"

	"github.com/prometheus/client_golang/prometheus"
)

const serveUsage = `usage: boxer serve [flags]

Serves boxer's HTTP API: POST /v1/exec, POST /v1/run-python,
GET /v1/jobs/{job_id}, GET /v1/health, /healthz, /readyz, MCP at /mcp,
a web playground at / (and /metrics with --metrics). Every flag can also be given as the environment variable
named in its description; a flag wins.

Before serving, boxer runs the same isolation self-test as 'boxer doctor'
and refuses to start if any protection it is configured for is not in force.
`

// serveConfig is everything boxer serve is configured with.
type serveConfig struct {
	Addr          string
	DataDir       string
	Database      string
	Node          string
	Advertise     string
	LogLevel      string
	Metrics       bool
	MCP           bool
	CORSOrigins   []string
	AllowAnon     bool
	AllowedHosts  []string
	ShutdownGrace time.Duration
	MaxConns      int
	Engine        *sandbox.Config
	Pool          pool.Config
	API           api.Config
	Payments      x402.Config
	PriceExec     string
	PriceRun      string
	PriceSession  string
	PriceCell     string
	Sessions      session.Config
	WebhookSecret string
	WebhookLocal  bool
	RotateAfter   int
	ResultBudget  int64
	DebugAddr     string

	// SignInNetworks are the chains a payer may sign in with (x402
	// sign-in-with-x); none: the payment network.
	SignInNetworks []string
}

func serveFlags(ef *envFlags) *serveConfig {
	c := &serveConfig{API: api.Config{}, Payments: x402.DefaultConfig()}
	ef.str(&c.Addr, "addr", "BOXER_ADDR", "127.0.0.1:8080", "address to listen on")
	ef.str(&c.DataDir, "data-dir", "BOXER_DATA_DIR", "boxer-data", "directory for the database (job records, health figures, used payments)")
	ef.str(&c.Database, "database", "BOXER_DATABASE", "", "a Postgres URL (postgres://user:password@host/db) to share one database among many nodes; empty: a SQLite file in --data-dir")
	ef.str(&c.Advertise, "advertise", "BOXER_ADVERTISE", "", "host:port where the other nodes sharing --database reach this one; empty: the address it listens on")
	ef.duration(&c.API.NodeTimeout, "node-timeout", "BOXER_NODE_TIMEOUT", api.DefaultNodeTimeout, "with --database: how long a node goes unseen before the others end its running jobs (run_lost) and its sessions (session_lost)")
	ef.str(&c.Node, "node", "BOXER_NODE", defaultNode(), "this node's name among those sharing --database: in logs and metrics, and on the jobs and sessions it holds; unique to each node")
	ef.str(&c.LogLevel, "log-level", "BOXER_LOG_LEVEL", "info", "debug, info, warn or error")
	ef.boolean(&c.Metrics, "metrics", "BOXER_METRICS", false, "serve Prometheus metrics at /metrics")
	ef.boolean(&c.MCP, "mcp", "BOXER_MCP", true, "serve the MCP tools (run_python, exec) at /mcp, streamable HTTP")
	ef.boolean(&c.AllowAnon, "allow-anonymous", "BOXER_ALLOW_ANONYMOUS", false, "with payments off, serve callers without an API key even when keys exist or the address is not loopback")
	ef.list(&c.AllowedHosts, "allowed-hosts", "BOXER_ALLOWED_HOSTS", "", "host names a reverse proxy on this machine forwards in Host (requests over loopback must name localhost or one of these: DNS rebinding), comma-separated")
	ef.list(&c.CORSOrigins, "cors-origins", "BOXER_CORS_ORIGINS", "", "web origins (https://app.example.com, or *) whose pages may call boxer from a browser, comma-separated; none: CORS off")
	ef.str(&c.DebugAddr, "debug-addr", "BOXER_DEBUG_ADDR", "", "serve Go's profiles (/debug/pprof/) on this address, apart from the API; keep it on loopback")
	ef.integer(&c.MaxConns, "max-conns", "BOXER_MAX_CONNS", 1024, "most client connections open at once; more wait to be accepted")
	ef.duration(&c.ShutdownGrace, "shutdown-grace", "BOXER_SHUTDOWN_GRACE", 35*time.Second, "on SIGTERM, how long runs in flight may finish before they are killed")
	c.Engine = engineFlags(ef)

	ef.integer(&c.Pool.Min, "pool-min", "BOXER_POOL_MIN", 2, "warm sandboxes kept ready when idle, by each zygote; 0 turns the warm pool off")
	ef.integer(&c.Pool.Max, "pool-max", "BOXER_POOL_MAX", 16, "most warm sandboxes at once, ready or running, by each zygote")
	ef.list(&c.Pool.PreImports, "pool-preimport", "BOXER_POOL_PREIMPORT", "numpy,pandas,matplotlib.pyplot,pytest", "modules imported once and shared by every warm run (and matplotlib's font cache built once); a job goes to them when its code or its -m module names one")
	ef.list(&c.Pool.LeanPreImports, "pool-lean-preimport", "BOXER_POOL_LEAN_PREIMPORT", "json", "modules every zygote imports, the lean one too: cheap to hold and imported by much of what agents run (json brings re, enum and collections)")
	ef.boolean(&c.Pool.Lean, "pool-lean", "BOXER_POOL_LEAN", true, "also keep a zygote without the pre-imports, for runs whose code names none of them (cheaper per run)")
	ef.list(&c.Pool.OwnLanes, "pool-own-lane", "BOXER_POOL_OWN_LANE", "pytest,matplotlib.pyplot", "pre-imports that get a zygote of their own with --pool-lean, whose children copy the pages the module's first use writes before their run (a pytest run, a chart; each child holds that much more memory); one of "+strings.Join(warm.Samples, ", "))
	ef.integer(&c.RotateAfter, "pool-rotate-after", "BOXER_POOL_ROTATE_AFTER", 1000, "replace each of the warm pool's zygotes after this many sandboxes (fresh hash seed, stack canary, address layout); 0: never")
	ef.boolean(&c.Pool.KeepNetns, "pool-keep-netns", "BOXER_POOL_KEEP_NETNS", true, "keep a warm slot's network namespace for its next job when the last made no IP socket and left it untouched (about 15% more throughput); false: a new namespace for every job")
	ef.bytes(&c.Pool.ZygoteMemoryBytes, "pool-zygote-memory", "BOXER_POOL_ZYGOTE_MEMORY", 1<<30, "memory limit of each of the warm pool's zygotes (the pre-imports)")

	a := &c.API
	exec, run := api.DefaultExecLimits(), api.DefaultRunLimits()
	ef.float(&a.ExecLimits.CPUs, "exec-cpus", "BOXER_EXEC_CPUS", exec.CPUs, "CPU limit of /v1/exec runs, in cores")
	ef.bytes(&a.ExecLimits.MemoryBytes, "exec-memory", "BOXER_EXEC_MEMORY", exec.MemoryBytes, "memory limit of /v1/exec runs")
	ef.duration(&a.ExecLimits.WallTime, "exec-timeout", "BOXER_EXEC_TIMEOUT", exec.WallTime, "wall-clock limit of /v1/exec runs")
	ef.float(&a.RunLimits.CPUs, "run-cpus", "BOXER_RUN_CPUS", run.CPUs, "CPU limit of /v1/run-python runs that do not ask for one")
	ef.bytes(&a.RunLimits.MemoryBytes, "run-memory", "BOXER_RUN_MEMORY", run.MemoryBytes, "memory limit of /v1/run-python runs that do not ask for one")
	ef.duration(&a.RunLimits.WallTime, "run-timeout", "BOXER_RUN_TIMEOUT", run.WallTime, "wall-clock limit of /v1/run-python runs that do not ask for one")
	ef.integer(&a.MaxCodeBytes, "max-code-bytes", "BOXER_MAX_CODE_BYTES", api.DefaultMaxCodeBytes, "largest /v1/exec code, in bytes")
	ef.bytes(&a.MaxExecBodyBytes, "max-exec-body", "BOXER_MAX_EXEC_BODY", api.DefaultMaxExecBodyBytes, "largest /v1/exec request body")
	ef.bytes(&a.MaxRunBodyBytes, "max-run-body", "BOXER_MAX_RUN_BODY", api.DefaultMaxRunBodyBytes, "largest /v1/run-python request body")
	ef.duration(&a.BodyTimeout, "body-timeout", "BOXER_BODY_TIMEOUT", api.DefaultBodyTimeout, "longest a request body may take to arrive (then 408 request_timeout)")
	ef.integer(&a.Slots, "slots", "BOXER_SLOTS", api.DefaultSlots(), "runs at once (default: four a CPU, at most one a GiB of memory, at least one a CPU; CPUs and memory within a container's or pod's cgroup limits)")
	ef.duration(&a.MaxQueueWait, "max-queue-wait", "BOXER_MAX_QUEUE_WAIT", api.DefaultMaxQueueWait, "a run waits for a slot if its expected wait (the runs ahead over the slots, times a run's recent time) is at most this; else 503 busy")
	ef.integer(&a.Queue, "queue", "BOXER_QUEUE", api.DefaultQueue, "most runs that may wait for a slot, whatever their expected wait; beyond, 503 busy")
	ef.bytes(&a.QueueBytes, "queue-bytes", "BOXER_QUEUE_BYTES", api.DefaultQueueBytes, "most bytes of jobs (files, stdin, code) that may wait for a slot")
	ef.duration(&a.QueueTimeout, "queue-timeout", "BOXER_QUEUE_TIMEOUT", api.DefaultQueueTimeout, "longest wait for a slot")
	ef.duration(&a.RetryAfter, "retry-after", "BOXER_RETRY_AFTER", api.DefaultRetryAfter, "Retry-After sent with 503 busy")
	ef.duration(&a.JobRetention, "job-retention", "BOXER_JOB_RETENTION", api.DefaultJobRetention, "how long /v1/run-python results are kept for job_id replay")
	ef.bytes(&a.MaxKeptResultBytes, "max-kept-result", "BOXER_MAX_KEPT_RESULT", api.DefaultMaxKeptResult, "largest job_id result kept for replay; a larger one is sent once and replays as 410 result_not_kept")
	ef.bytes(&a.AnswerBudgetBytes, "answer-budget", "BOXER_ANSWER_BUDGET", api.DefaultAnswerBudget, "memory the answers in flight may hold (results being encoded and sent); past it, finished runs wait")
	ef.bytes(&c.ResultBudget, "result-budget", "BOXER_RESULT_BUDGET", store.DefaultResultBudget, "bytes of job_id results kept in all; past it the oldest are deleted")
	ef.duration(&a.PruneInterval, "prune-interval", "BOXER_PRUNE_INTERVAL", api.DefaultPruneInterval, "how often expired records are pruned")
	ef.integer(&a.HealthRecentRuns, "health-recent-runs", "BOXER_HEALTH_RECENT_RUNS", api.DefaultHealthRecentRuns, "runs behind /v1/health's p50 duration")

	p := &c.Payments
	ef.str(&p.Mode, "payments", "BOXER_PAYMENTS", x402.ModeOff, "off (free) or x402 (priced routes answer 402 until paid)")
	ef.str(&p.PayTo, "x402-pay-to", "BOXER_X402_PAY_TO", "", "address that receives payments")
	ef.str(&p.FacilitatorURL, "x402-facilitator-url", "BOXER_X402_FACILITATOR_URL", "", "x402 facilitator base URL (/verify and /settle are appended)")
	ef.str(&p.FacilitatorAuthHeader, "x402-facilitator-auth-header", "BOXER_X402_FACILITATOR_AUTH_HEADER", "", `header sent to the facilitator, "Name: value"`)
	ef.duration(&p.FacilitatorTimeout, "x402-facilitator-timeout", "BOXER_X402_FACILITATOR_TIMEOUT", p.FacilitatorTimeout, "bound on one facilitator call")
	ef.str(&p.Network, "x402-network", "BOXER_X402_NETWORK", p.Network, "CAIP-2 network of the payments")
	ef.str(&p.Asset, "x402-asset", "BOXER_X402_ASSET", p.Asset, "EIP-3009 token contract")
	ef.str(&p.AssetName, "x402-asset-name", "BOXER_X402_ASSET_NAME", p.AssetName, "the token's EIP-712 domain name")
	ef.str(&p.AssetVersion, "x402-asset-version", "BOXER_X402_ASSET_VERSION", p.AssetVersion, "the token's EIP-712 domain version")
	ef.integer(&p.AssetDecimals, "x402-asset-decimals", "BOXER_X402_ASSET_DECIMALS", p.AssetDecimals, "the token's decimals")
	ef.integer(&p.MaxTimeoutSeconds, "x402-max-timeout-seconds", "BOXER_X402_MAX_TIMEOUT_SECONDS", p.MaxTimeoutSeconds, "payment validity offered to clients")
	ef.duration(&p.ValidityMargin, "x402-validity-margin", "BOXER_X402_VALIDITY_MARGIN", p.ValidityMargin, "how long a payment must still be valid when it arrives")
	ef.str(&p.Solana.PayTo, "x402-solana-pay-to", "BOXER_X402_SOLANA_PAY_TO", "", "Solana address that receives payments; set, Solana (exact on SVM) is offered beside the EVM network")
	ef.str(&p.Solana.Network, "x402-solana-network", "BOXER_X402_SOLANA_NETWORK", p.Solana.Network, "CAIP-2 Solana network of the Solana payments")
	ef.str(&p.Solana.Asset, "x402-solana-asset", "BOXER_X402_SOLANA_ASSET", p.Solana.Asset, "SPL token mint of the Solana payments")
	ef.integer(&p.Solana.AssetDecimals, "x402-solana-asset-decimals", "BOXER_X402_SOLANA_ASSET_DECIMALS", p.Solana.AssetDecimals, "the Solana token's decimals")
	ef.str(&p.PublicURL, "x402-public-url", "BOXER_X402_PUBLIC_URL", "", "externally visible base URL; default: derived from each request")
	ef.str(&c.PriceExec, "x402-price-exec", "BOXER_X402_PRICE_EXEC", "0.02", "USD per /v1/exec call")
	ef.str(&c.PriceRun, "x402-price-run-python", "BOXER_X402_PRICE_RUN_PYTHON", "0.01", "USD per /v1/run-python call")
	ef.str(&c.PriceSession, "x402-price-session", "BOXER_X402_PRICE_SESSION", "0.01", "USD per session started (POST /v1/sessions) or forked (POST /v1/sessions/{id}/fork)")
	ef.list(&c.SignInNetworks, "x402-sign-in-networks", "BOXER_X402_SIGN_IN_NETWORKS", "", "CAIP-2 chains (eip155:<id>, solana:<genesis hash>) a payer may sign in with (x402 sign-in-with-x) to fetch its jobs and reach its sessions without paying again, comma-separated; default: the payment networks. Sign-in needs --x402-public-url")
	ef.str(&c.PriceCell, "x402-price-session-exec", "BOXER_X402_PRICE_SESSION_EXEC", "0.005", "USD per cell run in a session (POST /v1/sessions/{id}/exec)")

	ef.str(&c.WebhookSecret, "webhook-secret", "BOXER_WEBHOOK_SECRET", "", "secret (16 bytes or more) that signs the webhooks of async runs (X-Boxer-Signature); none: webhook_url is refused")
	ef.boolean(&c.WebhookLocal, "webhook-allow-private", "BOXER_WEBHOOK_ALLOW_PRIVATE", false, "let webhooks reach loopback and private addresses (a receiver on this host or network)")

	ss := &c.Sessions
	ef.integer(&ss.Max, "max-sessions", "BOXER_MAX_SESSIONS", 16, "sessions (live interpreters, /v1/sessions) kept at once; 0 turns sessions off")
	ef.integer(&ss.MaxPerOwner, "max-sessions-per-caller", "BOXER_MAX_SESSIONS_PER_CALLER", 4, "sessions one API key or payer may hold (keyless callers without payments share one count)")
	ef.duration(&ss.IdleTimeout, "session-idle-timeout", "BOXER_SESSION_IDLE_TIMEOUT", session.DefaultIdleTimeout, "a session ends after this long without a call, unless its creator asks otherwise")
	ef.duration(&ss.MaxLifetime, "session-max-lifetime", "BOXER_SESSION_MAX_LIFETIME", session.DefaultMaxLifetime, "a session ends this long after it began, unless its creator asks otherwise")
	ef.bytes(&ss.Limits.MemoryBytes, "session-memory", "BOXER_SESSION_MEMORY", run.MemoryBytes, "memory limit of a session that does not ask for one")
	ef.bytes(&ss.MaxLimits.MemoryBytes, "session-max-memory", "BOXER_SESSION_MAX_MEMORY", 2<<30, "the most memory a session may ask for (a default above it is cut to it)")
	ef.float(&ss.Limits.CPUs, "session-cpus", "BOXER_SESSION_CPUS", boxer.DefaultLimits().CPUs, "CPU limit of a session that does not ask for one, in cores")
	return c
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ef := newEnvFlags("serve", serveUsage, stderr)
	cfg := serveFlags(ef)
	if !ef.parse(args) {
		return 2
	}
	log, err := jsonLogger(cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "boxer serve:", err)
		return 2
	}
	if cfg.Database != "" { // one of many nodes: every line says which
		log = log.With("node", cfg.Node)
	}
	m := &Main{cfg: cfg, log: log}
	if err := m.Run(ctx); err != nil {
		log.Error("boxer serve", "err", err)
		m.Close()
		return 1
	}
	<-ctx.Done()
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	if err := m.Close(); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// jsonLogger is the log of boxer serve and boxer mcp: JSON lines on w, at
// level ("debug", "info", "warn" or "error").
func jsonLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Main is a running boxer service: the parts, wired, and how to stop them.
type Main struct {
	cfg *serveConfig
	log *slog.Logger

	store    *store.Store
	engine   *sandbox.Engine
	pool     *pool.Pool
	sessions *session.Manager
	api      *api.Server
	mcp      *mcpserver.Server
	http     *http.Server
	listener net.Listener
	served   chan error
	debug    *http.Server
}

// pricePayments gives the payment configuration its priced routes and
// checks it. The bazaar extension describes the routes as /openapi.json
// and /llms.txt do: from the API's own description.
func (c *serveConfig) pricePayments() error {
	described, err := api.PricedRoutes()
	if err != nil {
		return err
	}
	c.Payments.Routes = nil
	for _, d := range described {
		price := map[string]string{"/v1/exec": c.PriceExec, "/v1/run-python": c.PriceRun,
			"/v1/sessions": c.PriceSession, "/v1/sessions/{session_id}/fork": c.PriceSession,
			"/v1/sessions/{session_id}/exec": c.PriceCell}[d.Path]
		c.Payments.Routes = append(c.Payments.Routes, x402.Route{Path: d.Path, Price: price, Description: d.Description,
			Method: d.Method, InputExample: d.InputExample, BodySchema: d.Input, OutputExample: d.OutputExample})
	}
	return c.Payments.Validate() // its errors say "payments: ..."
}

// Run checks the configuration, opens the store, starts the engine and
// the pool, proves isolation with the self-test, and starts serving.
func (m *Main) Run(ctx context.Context) error {
	c := m.cfg
	err := c.pricePayments()
	if err != nil {
		return err
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("--max-conns %d must be positive", c.MaxConns)
	}
	c.Pool.RotateAfter = int64(c.RotateAfter)
	if err := c.Pool.Validate(); err != nil {
		return err
	}
	c.API.Version = version
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if m.store, err = store.Open(databaseDSN(c.Database, c.DataDir), store.WithResultBudget(c.ResultBudget), store.WithNode(c.Node)); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := m.keyPolicy(ctx); err != nil {
		return err
	}
	c.Engine.Logger = m.log
	if m.engine, err = sandbox.New(ctx, *c.Engine); err != nil {
		return fmt.Errorf("sandbox engine: %w", err)
	}
	if err := m.selfTest(ctx); err != nil {
		return err
	}
	if m.pool, err = pool.New(ctx, m.engine, c.Pool, m.log); err != nil {
		return fmt.Errorf("warm pool: %w", err)
	}
	c.Sessions.PreImports, c.Sessions.ZygoteMemoryBytes = c.Pool.AllPreImports(), c.Pool.ZygoteMemoryBytes
	c.Sessions.MaxLimits.CPUs = float64(runtime.NumCPU())
	if m.sessions, err = session.New(m.engine, m.store, c.Sessions, m.log); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	payments, err := x402.New(c.Payments, x402.Deps{Nonces: m.store, PaymentIDs: paymentIDs{m.store}, Logger: m.log})
	if err != nil {
		return fmt.Errorf("payments: %w", err)
	}
	// A facilitator that answers it settles none of our payments is a
	// mistake to fix now; one that does not answer may be down for a while:
	// serve, unready, and ask again.
	if err = payments.CheckFacilitator(ctx); errors.Is(err, x402.ErrUnsupported) {
		return fmt.Errorf("payments: %w", err)
	} else if err != nil {
		m.log.Warn("x402 facilitator: runs cannot be paid for; not ready until it answers", "err", err)
	}
	go payments.WatchFacilitator(ctx)
	reg := prometheus.NewRegistry()
	var node prometheus.Registerer = reg
	if c.Database != "" { // one of many nodes: every series says which
		node = prometheus.WrapRegistererWith(prometheus.Labels{"node": c.Node}, reg)
	}
	prom, err := prommetrics.New(node)
	if err != nil {
		return err
	}
	if err := prommetrics.RegisterCapacity(node, c.API.WithDefaults().Slots, m.pool.Ready); err != nil {
		return err
	}
	if err := prommetrics.RegisterSessions(node, func() prommetrics.SessionStats {
		st := m.sessions.Stats()
		return prommetrics.SessionStats{Live: st.Live, Busy: st.Busy, MemoryBytes: st.MemoryBytes, IdleMemoryBytes: st.IdleMemoryBytes}
	}); err != nil {
		return err
	}
	metrics := &idleRelease{Metrics: prom}
	// Ready while a sandbox can start and, when runs are priced, the
	// facilitator's last answer listed our payment.
	ready := func(ctx context.Context) error {
		if err := payments.Ready(); err != nil {
			return boxer.Errorf(boxer.ECodeUnavailable, "not ready: runs cannot be paid for now (the x402 facilitator does not answer as configured; the server's log says why)")
		}
		return m.engine.Ready(ctx)
	}
	deps := api.Deps{
		Runner:        m.pool,
		Store:         m.store,
		Logger:        m.log,
		Metrics:       metrics,
		Ready:         ready,
		Sessions:      m.sessions,
		PythonVersion: m.engine.Runtime().Version,
	}
	if payments.Enabled() {
		deps.Doc = api.DocInfo{Prices: map[string]string{}, Network: c.Payments.Network, Asset: c.Payments.Asset}
		if sol := c.Payments.Solana; sol.PayTo != "" {
			deps.Doc.AlsoPaidOn = []string{fmt.Sprintf("%s (asset %s)", sol.Network, sol.Asset)}
		}
		for _, r := range c.Payments.Routes {
			deps.Doc.Prices[r.Path] = strings.TrimPrefix(r.Price, "$")
		}
		deps.Payment = func(route string, next http.Handler, fail api.ErrorWriter) http.Handler {
			return payments.Wrap(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.SetPayer(r, x402.PayerOf(r))
				api.SetSettlement(r, func(f func(bool)) { x402.AfterSettlement(r, f) })
				next.ServeHTTP(w, r)
				if api.Reused(r) { // a kept job_id result: paid for once already
					x402.Waive(r)
				}
			}), fail)
		}
		priced := time.Now()
		deps.Discovery = func(r *http.Request) (any, bool) { return payments.Discovery(r, "/llms.txt", priced) }
		if deps.SignIn, err = signInHook(ctx, c, m); err != nil {
			return err
		}
		deps.Doc.SignIn = deps.SignIn != nil
	}
	if c.WebhookSecret != "" {
		if deps.Webhooks, err = webhook.New(webhook.Config{Secret: []byte(c.WebhookSecret), AllowPrivate: c.WebhookLocal}, m.log); err != nil {
			return fmt.Errorf("--webhook-secret: %w", err)
		}
	}
	// Listening before the API starts tells it its address (port 0 is
	// common in tests), which the other nodes reach it at.
	var ln net.Listener
	if c.Addr != "" {
		if ln, err = net.Listen("tcp", c.Addr); err != nil {
			return err
		}
		defer func() {
			if m.listener == nil {
				ln.Close()
			}
		}()
		c.API.NodeAddr = cmp.Or(c.Advertise, ln.Addr().String())
		if host, _, _ := net.SplitHostPort(c.API.NodeAddr); c.Database != "" && net.ParseIP(host).IsUnspecified() {
			// 0.0.0.0 reaches, from another node, that node itself.
			return fmt.Errorf("--addr %s listens on every address: say with --advertise (BOXER_ADVERTISE) the host:port the other nodes reach this one at", c.Addr)
		}
	}
	if m.api, err = api.New(c.API, deps); err != nil {
		return err
	}
	// The answers in flight are most of what the heap can hold (see
	// --answer-budget): a soft limit a little above them has the collector
	// run before garbage doubles them. GOMEMLIMIT, when set, wins.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(c.API.AnswerBudgetBytes + 256<<20)
	}
	m.mcp, err = mcpserver.New(mcpserver.Config{API: m.api, Version: version, Logger: m.log, Priced: payments.Enabled()})
	if err != nil {
		return err
	}
	if c.Addr == "" { // boxer mcp: stdio only
		return nil
	}
	mux := http.NewServeMux()
	if c.Metrics {
		mux.Handle("GET /metrics", prommetrics.Handler(reg))
	}
	if c.MCP {
		// A tool call carries at most a /v1/run-python body, inside its
		// JSON-RPC envelope.
		limit := c.API.MaxRunBodyBytes + 64<<10
		mux.Handle("/mcp", m.mcp.HTTPHandler(mcpserver.HTTPOptions{MaxBody: limit, Logger: m.log,
			Before: func(h http.Handler) http.Handler { return m.api.BodyFirst(limit, h) }}))
	}
	mux.Handle("GET /{$}", web.Handler()) // the playground
	mux.Handle("/", m.api)
	cors, err := api.NewCORS(c.CORSOrigins)
	if err != nil {
		return fmt.Errorf("--cors-origins: %w", err)
	}
	m.http = &http.Server{Handler: api.HostGuard(c.AllowedHosts, cors.Handler(mux)), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if c.DebugAddr != "" {
		if err := m.serveDebug(c.DebugAddr); err != nil {
			return err
		}
	}
	m.listener = newConnLimit(ln, c.MaxConns)
	m.served = make(chan error, 1)
	go func() { m.served <- m.http.Serve(m.listener) }()
	m.log.Info("serving", "addr", "http://"+m.listener.Addr().String(), "version", version,
		"python", m.engine.Runtime().Version, "cgroup", m.engine.CgroupVersion().String(),
		"cgroup_base", m.engine.CgroupPlacement().Base, "cgroup_how", m.engine.CgroupPlacement().How,
		"pool_min", c.Pool.Min, "preimports", c.Pool.PreImports, "lean_preimports", c.Pool.LeanPreImports, "pool_lean", c.Pool.Lean, "payments", c.Payments.Mode)
	return nil
}

// idleRelease passes measurements on, and gives the Go heap's freed pages
// back to the OS a little after the service goes idle. A burst (output
// floods, many responses in flight) grows the heap; the runtime would
// return the pages only slowly, and on a sandbox host memory is for the
// sandboxes.
type idleRelease struct {
	api.Metrics
	mu    sync.Mutex
	timer *time.Timer
}

func (m *idleRelease) SetRuns(running, queued int) {
	m.Metrics.SetRuns(running, queued)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	if running == 0 && queued == 0 {
		m.timer = time.AfterFunc(2*time.Second, debug.FreeOSMemory)
	}
}

// keyPolicy decides who may call without an API key (boxer keys). With
// payments on, such a caller pays. With payments off, nobody once a key
// exists (api.Config.KeysRequired: a key added while serving counts);
// anybody on loopback before that; and boxer refuses to serve the network
// for free to anybody, unless told to (--allow-anonymous).
func (m *Main) keyPolicy(ctx context.Context) error {
	c := m.cfg
	n, err := m.store.ActiveKeys(ctx)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if c.Payments.Mode != x402.ModeOff || c.AllowAnon || c.Addr == "" {
		// boxer mcp's own sandboxes (no address) serve one client.
		c.API.ListKeylessSessions = c.Addr == ""
		m.log.Info("api keys", "active", n, "required", false)
		return nil
	}
	if n == 0 && !isLoopback(c.Addr) {
		where := "--data-dir " + c.DataDir
		if c.Database != "" {
			where = "--database with this node's URL"
		}
		return fmt.Errorf("refusing to serve %s with payments off and no API key: anyone who reaches it could run code here. "+
			"Add a key (boxer keys add --name NAME %s), turn payments on, or pass --allow-anonymous", c.Addr, where)
	}
	c.API.KeysRequired = true // from the first key on, even one added while serving
	// Keyless callers here are the host's own (loopback, nothing to pay):
	// one tenant, who may list the sessions made without a key.
	c.API.ListKeylessSessions = isLoopback(c.Addr)
	m.log.Info("api keys", "active", n, "required", n > 0)
	return nil
}

// selfTest refuses to serve with weaker isolation than configured.
func (m *Main) selfTest(ctx context.Context) error {
	var failed []string
	for _, ch := range m.engine.SelfTest(ctx) {
		if !ch.OK {
			failed = append(failed, ch.Name+": "+ch.Detail)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("isolation self-test failed, refusing to serve (run 'boxer doctor'): %v", failed)
	}
	if !m.engine.SeccompEnabled() {
		m.log.Warn("seccomp is OFF: programs run without the syscall filter")
	}
	return nil
}

// serveDebug serves the Go runtime's profiles on addr, on a listener and
// mux of their own: nothing of the API is there, and nothing of them on the
// API's address.
func (m *Main) serveDebug(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m.debug = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.debug.Serve(ln) }()
	m.log.Info("debug", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}

// Close stops accepting, lets runs in flight finish within the grace
// period, kills the rest and releases everything. It is safe on a Main
// whose Run failed part way.
func (m *Main) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownGrace)
	defer cancel()
	var errs []error
	if m.http != nil {
		done := make(chan error, 1)
		go func() { done <- m.api.Shutdown(ctx) }()
		for _, err := range []error{m.http.Shutdown(ctx), <-done} {
			if errors.Is(err, context.DeadlineExceeded) {
				// Killing what outlives the grace period is the plan, not
				// a failure: the pool and engine below kill the rest.
				m.log.Warn("runs still going at the end of the grace period were killed")
				continue
			}
			errs = append(errs, err)
		}
	}
	if m.debug != nil {
		m.debug.Close()
	}
	if m.sessions != nil {
		m.sessions.Close()
	}
	if m.pool != nil {
		m.pool.Close()
	}
	if m.engine != nil {
		errs = append(errs, m.engine.Close())
	}
	if m.store != nil {
		errs = append(errs, m.store.Close())
	}
	return errors.Join(errs...)
}

// signInHook is the payer's way back to what it paid for (x402
// sign-in-with-x): a signed-in address is the request's payer.
//
// It is off without --x402-public-url: a proof names the origin it signs
// in to, and without one boxer would take the request's Host for its own,
// which the caller picks. A phishing site could then have its visitors sign
// in to it, as the wallet shows, and relay the proofs here.
func signInHook(ctx context.Context, c *serveConfig, m *Main) (func(string, http.Handler, api.ErrorWriter) http.Handler, error) {
	if c.Payments.PublicURL == "" {
		m.log.Warn("x402 sign-in is off: it needs --x402-public-url (BOXER_X402_PUBLIC_URL), the origin payers sign in to; payers' jobs are not served by GET")
		return nil, nil
	}
	networks := c.SignInNetworks
	if len(networks) == 0 {
		networks = []string{c.Payments.Network}
		if c.Payments.Solana.PayTo != "" {
			networks = append(networks, c.Payments.Solana.Network)
		}
	}
	// The key that MACs sign-in nonces is the database's, so that every
	// node sharing it accepts the others' challenges. Never logged.
	key, err := m.store.SignInKey(ctx)
	if err != nil {
		return nil, err
	}
	si, err := x402.NewSignIn(x402.SignInConfig{PublicURL: c.Payments.PublicURL, Networks: networks},
		x402.SignInDeps{Nonces: m.store, Key: key, Logger: m.log})
	if err != nil {
		return nil, fmt.Errorf("--x402-sign-in-networks: %w", err)
	}
	return func(_ string, next http.Handler, fail api.ErrorWriter) http.Handler {
		return si.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			api.SetPayer(r, x402.SignedInAs(r))
			next.ServeHTTP(w, r)
		}), fail)
	}, nil
}
