package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"boxer"
)

// run takes a run slot, runs job and returns its result, or the error to send
// the caller. It is the only place the Runner is called. The caller must
// call answered once the result's response is written: it gives back the
// answer's share of memory (see answers).
//
// The run's context is the request's, so a client that disconnects cancels
// its queued or running job; Shutdown's deadline cancels it too.
func (s *Server) run(r *http.Request, job *boxer.Job) (_ *boxer.Result, answered func(), _ *boxer.Error) {
	st := stateOf(r)
	ctx := r.Context()
	queueStart := s.now()
	release, e := s.acquire(ctx, jobBytes(job))
	if e != nil {
		return nil, nil, e
	}
	defer release()
	queued := s.now().Sub(queueStart)
	if st.onRun != nil {
		st.onRun()
	}

	// Shutdown cancels runs still going when its grace period ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.killRuns, cancel)
	defer stop()

	job.Output = streamOf(r)
	res, err := s.deps.Runner.Run(ctx, job)
	if err != nil {
		if r.Context().Err() != nil {
			return nil, nil, boxer.Errorf(codeCanceled, "client went away during the run")
		}
		if s.killRuns.Err() != nil {
			return nil, nil, boxer.Errorf(boxer.ECodeUnavailable, "the server shut down before the run finished; retry")
		}
		return nil, nil, s.runnerError(r, err)
	}
	if res == nil {
		return nil, nil, s.runnerError(r, errors.New("runner returned neither a result nor an error"))
	}
	if res.Status == boxer.StatusInternalError {
		return nil, nil, s.runnerError(r, fmt.Errorf("engine lost track of the run (exit code %d, signal %q)", res.ExitCode, res.Signal))
	}
	// The answer's share of memory is taken with the run slot still held
	// (see answers).
	answered, err = s.answers.take(r.Context(), res)
	if err != nil {
		return nil, nil, boxer.Errorf(codeCanceled, "client went away while its answer waited for memory")
	}
	res.Timing.Queue += queued
	st.ran = true
	st.outcome = string(res.Status)
	s.metrics.ObserveRun(st.route, res.Status, res.Wall)
	return res, answered, nil
}

// acquire takes a run slot for a call holding size bytes of request, or
// returns the error to send its caller.
func (s *Server) acquire(ctx context.Context, size int64) (release func(), _ *boxer.Error) {
	release, err := s.lim.acquire(ctx, size)
	switch {
	case errors.Is(err, errBusy):
		running, queued := s.lim.counts()
		wait := ""
		if d := s.lim.expected(); d > 0 {
			wait = fmt.Sprintf(" (the next would wait about %s)", d.Round(time.Millisecond))
		}
		return nil, boxer.Errorf(boxer.ECodeBusy, "all %d run slots are taken and %d runs are waiting%s; retry later", running, queued, wait)
	case errors.Is(err, errDraining):
		return nil, boxer.Errorf(boxer.ECodeUnavailable, "the server is shutting down; retry later")
	case err != nil:
		return nil, boxer.Errorf(codeCanceled, "client went away while waiting for a run slot")
	}
	return release, nil
}

// jobBytes is what a waiting job holds in memory: its files, stdin and
// command.
func jobBytes(job *boxer.Job) int64 {
	n := int64(len(job.Stdin))
	for _, f := range job.Files {
		n += int64(len(f.Path) + len(f.Content))
	}
	for _, a := range job.Argv {
		n += int64(len(a))
	}
	return n
}

// runnerError logs why boxer failed to run a job and returns what the caller
// may know. An engine's busy or unavailable passes through as that code,
// with a message of the API's own: the engine's text is for the log.
func (s *Server) runnerError(r *http.Request, err error) *boxer.Error {
	st := stateOf(r)
	s.log.LogAttrs(r.Context(), slog.LevelError, "run failed",
		slog.String("request_id", st.id), slog.String("error", err.Error()))
	var be *boxer.Error
	if errors.As(err, &be) {
		switch be.Code {
		case boxer.ECodeBusy:
			return boxer.Errorf(boxer.ECodeBusy, "no sandbox is free; retry later")
		case boxer.ECodeUnavailable:
			return boxer.Errorf(boxer.ECodeUnavailable, "the sandbox engine is unavailable; retry later")
		}
	}
	return boxer.Errorf(boxer.ECodeInternal, "internal error; request id %s", st.id)
}
