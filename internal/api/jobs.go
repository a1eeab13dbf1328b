package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"boxer"
	"boxer/internal/store"
)

// A job_id runs once. The store's Claim decides that across restarts and is
// atomic; inflight adds what the store cannot: a request that finds its
// job_id running in this process waits for that run's result instead of
// failing, and one with a different request learns of the conflict at once.

// inflight tracks the job_ids this process is claiming or running.
type inflight struct {
	mu   sync.Mutex
	jobs map[string]*flight
}

// flight is one job_id being claimed or run here. done is closed when it is
// finished, released or was never claimed; the store then has the answer.
// phase is what GET /v1/jobs says of it meanwhile: "queued" until its run
// has a slot, then "running".
type flight struct {
	hash  string
	done  chan struct{}
	phase atomic.Pointer[string]
}

var phaseQueued, phaseRunning = "queued", "running"

// lookup returns the flight of jobID in this process, if any.
func (in *inflight) lookup(jobID string) *flight {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.jobs[jobID]
}

// enter makes the caller the owner of jobID in this process, or returns the
// flight that owns it now (owner false).
func (in *inflight) enter(jobID, hash string) (f *flight, owner bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if f, ok := in.jobs[jobID]; ok {
		return f, false
	}
	f = &flight{hash: hash, done: make(chan struct{})}
	f.phase.Store(&phaseQueued)
	in.jobs[jobID] = f
	return f, true
}

// leave ends the owner's flight and wakes its waiters.
func (in *inflight) leave(jobID string, f *flight) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.jobs[jobID] == f {
		delete(in.jobs, jobID)
	}
	close(f.done)
}

func (s *Server) handleRunPython(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r, s.cfg.MaxRunBodyBytes, s.cfg.BodyTimeout)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	req, e := decodeRunPython(body)
	if e == nil && req.Async {
		e = s.checkAsync(r, req)
	}
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	if req.JobID == "" {
		s.runUnkept(w, r, req)
		return
	}
	jobID := req.JobID
	hash := req.hash()
	key := s.jobKey(r, jobID)

	for {
		f, owner := s.inflight.enter(key, hash)
		if !owner {
			if f.hash != hash {
				s.writeError(w, r, conflict(jobID))
				return
			}
			if req.Async { // the job is under way: say so at once
				stateOf(r).reused = true
				writeJSON(w, s.log, http.StatusAccepted, runningResponse{JobID: jobID, Status: *f.phase.Load()})
				return
			}
			if s.onWait != nil {
				s.onWait()
			}
			select {
			case <-f.done: // the owner is done: look again
				continue
			case <-r.Context().Done():
				s.writeError(w, r, boxer.Errorf(codeCanceled, "client went away while job %s ran for another request", jobID))
				return
			}
		}
		if !s.claim(w, r, jobID, key, hash, req.Async) {
			s.inflight.leave(key, f)
			return
		}
		if req.Async {
			s.startAsync(w, r, req, jobID, key, f)
			return
		}
		heldForPayment := false // then the payment's outcome ends the flight
		defer func() {
			if !heldForPayment {
				s.inflight.leave(key, f) // panics included
			}
		}()
		resp, answered, held, e := s.runKept(r, req, jobID, key, f)
		heldForPayment = held
		if e != nil {
			s.writeError(w, r, e)
			return
		}
		defer answered()
		writeBody(w, http.StatusOK, resp)
		return
	}
}

// checkAsync checks what an async request adds, and gives it a job_id if
// it has none: its result is kept, for GET /v1/jobs and the webhook.
func (s *Server) checkAsync(r *http.Request, req *runRequest) *boxer.Error {
	if streamOf(r) != nil {
		return fieldError("async", "answers 202 at once; ask for the result with GET /v1/jobs/{job_id}, not Accept: text/event-stream")
	}
	if req.WebhookURL != "" {
		if s.deps.Webhooks == nil {
			return fieldError("webhook_url", "this server sends no webhooks (its operator set no --webhook-secret)")
		}
		if err := s.deps.Webhooks.Check(req.WebhookURL); err != nil {
			return fieldError("webhook_url", "%v", err)
		}
	}
	if s.lim.refuses(jobBytes(req.job(s.cfg.RunLimits))) { // the queue's own rule, asked before the 202
		running, queued := s.lim.counts()
		return boxer.Errorf(boxer.ECodeBusy, "all %d run slots are taken and %d runs are waiting; retry later", running, queued)
	}
	if req.JobID == "" {
		req.JobID = "job_" + rand.Text()
	}
	return nil
}

// runUnkept runs a request without a job_id: nothing asks for its result
// again, so none is stored. Its response still names the run with an id
// of its own, which GET /v1/jobs does not know.
func (s *Server) runUnkept(w http.ResponseWriter, r *http.Request, req *runRequest) {
	res, answered, e := s.run(r, req.job(s.cfg.RunLimits))
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	defer answered()
	resp, err := marshal(NewRunResponse("job_"+rand.Text(), res))
	if err != nil {
		s.internalError(w, r, "encode response", err)
		return
	}
	writeBody(w, http.StatusOK, resp)
}

// jobKey is where a job_id is kept. Each API key, and with payments on
// each payer, has job ids of its own: one caller's job_id never returns
// another's result, nor conflicts with it (job ids are the callers' own
// and easily guessed).
func (s *Server) jobKey(r *http.Request, jobID string) string {
	st := stateOf(r)
	switch {
	case st.key != "":
		return "key:" + st.key + "/" + jobID // a job_id has no "/"; a payer no "key:"
	case st.payer != "":
		return payerID(st.payer) + "/" + jobID
	}
	return jobID
}

// payerID is how a payer's address is compared: an EVM address in lower
// case (its EIP-55 capitals are a checksum, not part of it), a Solana one
// as written (base58 is case-sensitive: two spellings are two keys).
func payerID(addr string) string {
	if strings.HasPrefix(addr, "0x") || strings.HasPrefix(addr, "0X") {
		return strings.ToLower(addr)
	}
	return addr
}

// claim has the store give this request jobID's run, or answers with
// what the store has (the kept result, a conflict, an error) and reports
// false. The caller owns jobID's flight.
func (s *Server) claim(w http.ResponseWriter, r *http.Request, jobID, key, hash string, async bool) bool {
	rec, claimed, err := s.deps.Store.Claim(r.Context(), key, hash)
	switch {
	case err != nil || claimed || rec.State != store.JobRunning:
	case s.elsewhere(rec):
		// Another node runs it: wait for its answer, as a request here
		// waits for this node's own flight.
		if async {
			stateOf(r).reused = true
			writeJSON(w, s.log, http.StatusAccepted, runningResponse{JobID: jobID, Status: phaseRunning})
			return false
		}
		rec, claimed, err = s.awaitElsewhere(r.Context(), key, hash)
	default:
		// Running, yet this process has no flight for it, and the claim
		// is this node's (on a SQLite file, which store.Open locks, every
		// claim is): it was left by a run that never released it. Take
		// it over.
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "taking over a stale job claim",
			slog.String("request_id", stateOf(r).id), slog.String("job_id", jobID))
		s.releaseJob(r, key)
		rec, claimed, err = s.deps.Store.Claim(r.Context(), key, hash)
	}
	switch {
	case errors.Is(err, store.ErrJobConflict):
		s.writeError(w, r, conflict(jobID))
	case err != nil && r.Context().Err() != nil:
		s.writeError(w, r, boxer.Errorf(codeCanceled, "client went away"))
	case err != nil:
		s.internalError(w, r, "claim job", err)
	case !claimed && rec.State == store.JobDone:
		stateOf(r).outcome, stateOf(r).reused = "replay", true
		writeBody(w, rec.Status, rec.Response)
	case !claimed:
		s.internalError(w, r, "claim job", fmt.Errorf("job %q still running after taking over its claim", jobID))
	default:
		return true
	}
	return false
}

// runKept runs a claimed job and keeps its response in the store (or, if
// it is too large, an error in its place), and returns the response. On
// an error the claim is released, so that a retry can run, unless the job
// is async: its caller is not there to retry, and learns of the error from
// GET /v1/jobs, where it is kept. The caller must call answered once the
// response is written.
//
// A paid run's response is kept only once its payment settles, and the
// job's flight lasts until then (heldForPayment: the caller must not end
// it): a payment that never settles leaves nothing a payer could fetch
// without paying (GET /v1/jobs serves a signed-in payer its jobs), and
// frees the job_id for a paid retry.
func (s *Server) runKept(r *http.Request, req *runRequest, jobID, key string, f *flight) (resp []byte, answered func(), heldForPayment bool, _ *boxer.Error) {
	// Unless the result is stored, the claim is dropped on the way out,
	// panics included, so that a retry can run.
	stored := false
	defer func() {
		if !stored {
			s.releaseJob(r, key)
		}
	}()
	stateOf(r).onRun = func() { f.phase.Store(&phaseRunning) }
	res, answered, e := s.run(r, req.job(s.cfg.RunLimits))
	if e != nil {
		if req.Async {
			if body, err := marshal(errorBody{Error: e}); err == nil {
				stored = s.keep(r, jobID, key, httpStatus(e.Code), body)
			}
		}
		return nil, nil, false, e
	}
	resp, err := marshal(NewRunResponse(jobID, res))
	if err != nil {
		answered()
		return nil, nil, false, s.internalErrorOf(r, "encode response", err)
	}
	// The run happened; store its response even if the client has gone,
	// so that its retry gets this result instead of a second run. One too
	// large to keep leaves an error in its place (see MaxKeptResultBytes).
	kept, status := resp, http.StatusOK
	if int64(len(resp)) > s.cfg.MaxKeptResultBytes {
		e := boxer.Errorf(boxer.ECodeResultNotKept, "job %s ran; its response, %d bytes, was larger than the %d bytes kept per job, and was sent once only",
			jobID, len(resp), s.cfg.MaxKeptResultBytes)
		if kept, err = marshal(errorBody{Error: e}); err != nil {
			answered()
			return nil, nil, false, s.internalErrorOf(r, "encode response", err)
		}
		status = httpStatus(e.Code)
	}
	if !req.Async && afterPayment(r, func(paid bool) {
		if !paid || !s.keep(r, jobID, key, status, kept) {
			s.releaseJob(r, key)
		}
		s.inflight.leave(key, f)
	}) {
		stored = true // or released, once paid or not
		return resp, answered, true, nil
	}
	stored = s.keep(r, jobID, key, status, kept)
	return resp, answered, false, nil
}

// keep stores a job's answer; false if the store failed (logged).
func (s *Server) keep(r *http.Request, jobID, key string, status int, body []byte) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := s.deps.Store.Finish(ctx, key, status, body); err != nil {
		// The caller still gets its result; a retry would run again.
		s.log.LogAttrs(r.Context(), slog.LevelError, "store job result", slog.String("request_id", stateOf(r).id),
			slog.String("job_id", jobID), slog.String("error", err.Error()))
		return false
	}
	return true
}

// startAsync answers 202 for a claimed job and runs it in the background,
// with a request context of its own that the caller's leaving does not
// cancel (Shutdown's grace does). Its answer is kept as a synchronous
// run's is, and so is an error that stopped it (busy, shutting down): GET
// /v1/jobs/{job_id} shows queued, running, then that answer. The call is
// recorded once it is done, with its outcome.
//
// A paid job starts only once its payment settles (the 202 is what is
// paid for): one that does not settle runs nothing, keeps nothing and
// calls no webhook, and its job_id is free again.
func (s *Server) startAsync(w http.ResponseWriter, r *http.Request, req *runRequest, jobID, key string, f *flight) {
	st := stateOf(r)
	st.deferred = true
	if !afterPayment(r, func(paid bool) {
		if paid {
			s.launchAsync(r, req, jobID, key, f)
			return
		}
		s.releaseJob(r, key)
		s.inflight.leave(key, f)
		st.deferred = false // the 402 is recorded as any call is
	}) {
		s.launchAsync(r, req, jobID, key, f)
	}
	writeJSON(w, s.log, http.StatusAccepted, runningResponse{JobID: jobID, Status: *f.phase.Load()})
}

// launchAsync runs startAsync's job in the background.
func (s *Server) launchAsync(r *http.Request, req *runRequest, jobID, key string, f *flight) {
	st := stateOf(r)
	bg := &reqState{id: st.id, route: st.route, payer: st.payer, key: st.key}
	ctx := context.WithValue(context.WithoutCancel(r.Context()), stateKey{}, bg)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.killRuns, cancel)
	br := r.WithContext(ctx)
	s.async.Add(1)
	go func() {
		defer s.async.Done()
		defer s.inflight.leave(key, f)
		defer stop()
		defer cancel()
		start := s.now()
		resp, answered, _, e := s.runKept(br, req, jobID, key, f)
		status := http.StatusOK
		if e != nil {
			bg.outcome, status = e.Code, httpStatus(e.Code)
			resp, _ = marshal(errorBody{Error: e})
			s.log.LogAttrs(ctx, slog.LevelInfo, "async job failed", slog.String("request_id", bg.id),
				slog.String("job_id", jobID), slog.String("code", e.Code))
		} else {
			answered() // the answer is in the store and in resp
		}
		s.recordCall(br, bg, start, status, s.now().Sub(start))
		if req.WebhookURL != "" {
			s.deps.Webhooks.Deliver(ctx, req.WebhookURL, jobID, resp)
		}
	}()
}

func (s *Server) releaseJob(r *http.Request, jobID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := s.deps.Store.Release(ctx, jobID); err != nil {
		s.log.LogAttrs(r.Context(), slog.LevelError, "release job",
			slog.String("request_id", stateOf(r).id), slog.String("job_id", jobID), slog.String("error", err.Error()))
	}
}

func conflict(jobID string) *boxer.Error {
	return boxer.Errorf(boxer.ECodeJobIDConflict, "job_id %q was already used with a different request", jobID)
}

// handleGetJob serves GET /v1/jobs/{job_id}: the stored response of a done
// job (the same bytes its POST returned), 202 while it runs, 404 otherwise.
func (s *Server) handleGetJob(w http.ResponseWriter, r *http.Request) {
	jobID := r.PathValue("job_id")
	if st := stateOf(r); s.deps.Payment != nil && st.payer == "" && st.key == "" {
		// A paid result is the payer's: a GET that names no payer (one
		// signed in, Deps.SignIn) is not served. Replaying the POST with
		// the same job_id returns the stored result without running again.
		s.writeError(w, r, boxer.Errorf(boxer.ECodeNotFound,
			"job records are served by GET, when payments are on, to the payer signed in with x402 sign-in-with-x; POST /v1/run-python again with the same job_id to get the stored result"))
		return
	}
	if why := checkJobID(jobID); why != "" {
		s.writeError(w, r, boxer.Errorf(boxer.ECodeNotFound, "no job %q: a job_id %s", jobID, why))
		return
	}
	rec, err := s.deps.Store.Get(r.Context(), s.jobKey(r, jobID))
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.writeError(w, r, boxer.Errorf(boxer.ECodeNotFound, "no job %q (never run, run without a job_id, which is not kept, or older than the retention of %s)", jobID, s.cfg.JobRetention))
	case err != nil:
		s.internalError(w, r, "get job", err)
	case rec.State == store.JobDone:
		stateOf(r).outcome = "done"
		writeBody(w, rec.Status, rec.Response)
	default:
		phase := phaseRunning
		if f := s.inflight.lookup(s.jobKey(r, jobID)); f != nil {
			phase = *f.phase.Load()
		}
		stateOf(r).outcome = phase
		writeJSON(w, s.log, http.StatusAccepted, runningResponse{JobID: jobID, Status: phase})
	}
}
