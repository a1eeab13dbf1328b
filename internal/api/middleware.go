package api

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"boxer"
	"boxer/internal/store"
)

// reqState is what the layers of one request tell each other: the handler
// sets the outcome, the payment hook the payer, the outermost layer logs
// and records it all. Only the request's own goroutine touches it.
type reqState struct {
	id       string
	route    string // the route's pattern, "" when none matched
	outcome  string // a Result.Status, "replay", or an error code
	ran      bool   // a sandbox ran the program
	reused   bool   // the answer is an earlier request's work: see Reused
	canceled bool   // the client went away before the response
	payer    string
	key      string // the id of the API key the request came with
	// onRun, if set, is called when the request's run gets its slot.
	onRun func()
	// deferred: the call is recorded by its background run, not here;
	// forwarded: by the node it was forwarded to (forward.go).
	deferred, forwarded bool
	// settlement, set by a payment layer that settles after the handler
	// returns, has f told whether the payment settled (SetSettlement).
	settlement func(f func(settled bool))
}

type stateKey struct{}

// stateOf returns the request's state. Every request that reaches a handler
// went through the outermost layer, which put it there; the fallback only
// keeps a handler called directly from a test from crashing.
func stateOf(r *http.Request) *reqState {
	if st, ok := r.Context().Value(stateKey{}).(*reqState); ok {
		return st
	}
	return &reqState{}
}

// SetPayer records the address that paid for the request, for the access log
// and GET /v1/health's unique payers. The payment hook calls it after it has
// verified a payment.
func SetPayer(r *http.Request, payer string) {
	stateOf(r).payer = payer
}

// SetSettlement tells the handler of a paid request how to learn whether
// its payment settled: register has f called once with the answer, after
// the handler returns and before the answer is released. A payment layer
// that settles after the handler (x402) calls it in front of the handler.
// What the handler keeps for the payer (a job's result, a session) it keeps
// for good only once paid; see afterPayment.
func SetSettlement(r *http.Request, register func(f func(settled bool))) {
	stateOf(r).settlement = register
}

// afterPayment has f told whether the request's payment settled, once the
// payment layer knows; without a payment to settle (a free route, an API
// key), f is not called and afterPayment reports false, so the caller
// does at once what paid would do.
func afterPayment(r *http.Request, f func(paid bool)) bool {
	reg := stateOf(r).settlement
	if reg == nil {
		return false
	}
	reg(f)
	return true
}

// Reused reports whether r was answered with work an earlier request
// asked for: a job_id's kept result, or word that its run is under way.
// The payment hook does not charge such an answer; the earlier request was.
func Reused(r *http.Request) bool {
	return stateOf(r).reused
}

// RequestID returns the request id boxer assigned to r ("" outside a
// request served by a Server).
func RequestID(r *http.Request) string {
	return stateOf(r).id
}

// statusWriter remembers the status sent, for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP is the outermost layer: request id, panic recovery, access log,
// metrics and the call record, around the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	st := &reqState{id: requestID(r.Header.Get("X-Request-Id"))}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	w.Header().Set("X-Request-Id", st.id)
	sw := &statusWriter{ResponseWriter: w}

	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p) // the server's way to abort a response; not ours to eat
			}
			s.log.Error("panic", slog.String("request_id", st.id), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			if sw.status == 0 {
				s.writeError(sw, r, boxer.Errorf(boxer.ECodeInternal, "internal error; request id %s", st.id))
			}
		}
		s.finishRequest(r, sw, st, start)
	}()
	s.mux.ServeHTTP(sw, r)
}

// finishRequest logs, counts and records one request after its handler.
func (s *Server) finishRequest(r *http.Request, sw *statusWriter, st *reqState, start time.Time) {
	d := s.now().Sub(start)
	status := sw.status
	switch {
	case st.canceled:
		status = statusClientClosed
	case status == 0:
		status = http.StatusOK // the handler wrote nothing; net/http sends 200
	}
	if st.outcome == "" {
		st.outcome = http.StatusText(status)
	}
	// The client has its response before the access log and the call
	// record are written: flushed first, neither costs the caller latency.
	if !st.deferred && !st.canceled {
		http.NewResponseController(sw).Flush()
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.String("outcome", st.outcome),
		slog.Duration("duration", d),
		slog.String("request_id", st.id),
	}
	if st.payer != "" {
		attrs = append(attrs, slog.String("payer", st.payer))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)

	route := st.route
	if route == "" {
		route = "other"
	}
	s.metrics.ObserveRequest(route, status, d)

	if st.deferred {
		return
	}
	s.recordCall(r, st, start, status, d)
}

// recordCall records a call to a run route, for /v1/health. A 402 is
// x402's first step of nearly every paid call, not a call; a 401 is a
// caller boxer does not serve.
func (s *Server) recordCall(r *http.Request, st *reqState, start time.Time, status int, d time.Duration) {
	if !s.isRunRoute(st.route) || st.forwarded || status == http.StatusPaymentRequired || status == http.StatusUnauthorized {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	err := s.deps.Store.RecordCall(ctx, store.Call{
		At: start, Route: st.route, Status: status, Ran: st.ran, Duration: d, Payer: st.payer, Key: st.key,
	})
	if err != nil {
		s.log.Error("record call", slog.String("request_id", st.id), slog.String("error", err.Error()))
	}
}

// requestID returns the caller's id when it is sane, else a new random one.
// Sane means short and made of characters that need no quoting in a log or
// a header: the id ends up in both.
func requestID(incoming string) string {
	if n := len(incoming); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n && ok; i++ {
			c := incoming[i]
			ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
				c == '-' || c == '_' || c == '.' || c == ':'
		}
		if ok {
			return incoming
		}
	}
	return rand.Text()
}
