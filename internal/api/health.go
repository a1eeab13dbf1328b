package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"boxer"
)

// readyTimeout bounds Deps.Ready, which may start a sandbox.
const readyTimeout = 10 * time.Second

type statusBody struct {
	Status string `json:"status"`
}

// handleHealthz: the process is alive and serving HTTP. Nothing else is
// checked, so that a supervisor does not restart a busy but healthy server.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.log, http.StatusOK, statusBody{Status: "ok"})
}

// handleReadyz: a run could start now. A load balancer stops sending traffic
// while it fails, and it fails from the start of a shutdown.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.lim.isDraining() {
		s.writeError(w, r, boxer.Errorf(boxer.ECodeUnavailable, "the server is shutting down"))
		return
	}
	if s.deps.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := s.deps.Ready(ctx); err != nil {
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "not ready",
				slog.String("request_id", stateOf(r).id), slog.String("error", err.Error()))
			// A reason meant for callers comes as a *boxer.Error; any other
			// is the engine's, whose details stay in the log.
			var be *boxer.Error
			if !errors.As(err, &be) {
				be = boxer.Errorf(boxer.ECodeUnavailable, "not ready: the sandbox engine cannot start a sandbox now")
			}
			s.writeError(w, r, be)
			return
		}
	}
	writeJSON(w, s.log, http.StatusOK, statusBody{Status: "ready"})
}

// healthBody is GET /v1/health, in the camelCase of the marketplaces' health
// records (calls30d, uniquePayers30d, lastCalledAt). Figures without data are
// null, not 0: a success rate of 0 would claim every run failed.
type healthBody struct {
	Status          string   `json:"status"` // "ok" or "draining"
	Version         string   `json:"version"`
	PythonVersion   string   `json:"pythonVersion"`
	StartedAt       string   `json:"startedAt"`
	UptimeSeconds   int64    `json:"uptimeSeconds"`
	RunsTotal       int64    `json:"runsTotal"`
	SuccessRate     *float64 `json:"successRate"`
	P50DurationMs   *int64   `json:"p50DurationMs"`
	RecentRuns      int      `json:"recentRuns"` // how many runs p50DurationMs covers
	Calls30d        int64    `json:"calls30d"`
	UniquePayers30d int64    `json:"uniquePayers30d"`
	LastCalledAt    *string  `json:"lastCalledAt"`
	Slots           int      `json:"slots"`
	Running         int      `json:"running"`
	Queued          int      `json:"queued"`
	// Sessions is null when sessions are off.
	Sessions *healthSessions `json:"sessions"`
}

// healthSessions is what the sessions hold: how many, and the memory of
// their cgroups, with the part held by those idle (no cell running).
type healthSessions struct {
	Live            int   `json:"live"`
	Busy            int   `json:"busy"`
	Max             int   `json:"max"`
	MemoryBytes     int64 `json:"memoryBytes"`
	IdleMemoryBytes int64 `json:"idleMemoryBytes"`
}

// timeFormat is the marketplaces' timestamp: "2026-09-02T21:46:45.571Z".
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	stats, err := s.deps.Store.Stats(r.Context(), now.Add(-statsWindow), s.cfg.HealthRecentRuns)
	if err != nil {
		s.internalError(w, r, "health stats", err)
		return
	}
	running, queued := s.lim.counts()
	body := healthBody{
		Status:          "ok",
		Version:         s.cfg.Version,
		PythonVersion:   s.deps.PythonVersion,
		StartedAt:       s.started.UTC().Format(timeFormat),
		UptimeSeconds:   int64(now.Sub(s.started) / time.Second),
		RunsTotal:       stats.RunsTotal,
		RecentRuns:      stats.P50Sample,
		Calls30d:        stats.Calls,
		UniquePayers30d: stats.UniquePayers,
		Slots:           s.cfg.Slots,
		Running:         running,
		Queued:          queued,
	}
	if s.lim.isDraining() {
		body.Status = "draining"
	}
	if m := s.deps.Sessions; m != nil && m.Enabled() {
		st := m.Stats()
		body.Sessions = &healthSessions{Live: st.Live, Busy: st.Busy, Max: st.Max, MemoryBytes: st.MemoryBytes, IdleMemoryBytes: st.IdleMemoryBytes}
	}
	if stats.RateSample > 0 {
		body.SuccessRate = &stats.SuccessRate
	}
	if stats.P50Sample > 0 {
		ms := stats.P50.Milliseconds()
		body.P50DurationMs = &ms
	}
	if !stats.LastCalledAt.IsZero() {
		t := stats.LastCalledAt.UTC().Format(timeFormat)
		body.LastCalledAt = &t
	}
	writeJSON(w, s.log, http.StatusOK, body)
}
