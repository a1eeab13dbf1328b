package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"boxer"
	"boxer/internal/store"
)

// Many nodes, one service. On a shared store (Postgres) this node records
// itself six times a Config.NodeTimeout; one not seen for NodeTimeout is dead, and
// the first live node to notice ends what it held: its running jobs
// become done with run_lost, so that none stays "running" and none runs
// again under its job_id, and its sessions are lost. A node ends its own
// the same way as it starts, since they died with its earlier process.
// A job_id running on another node is waited for (claim), never run twice.

const (
	// elsewherePoll is how often a request waiting for a job another node
	// runs looks at the store.
	elsewherePoll = 100 * time.Millisecond
)

// runLostBody is the stored answer of a job whose node died under it.
func runLostBody() (int, []byte) {
	e := boxer.Errorf(boxer.ECodeRunLost, "the node running this job stopped before it finished: the job did not complete, and its job_id will not run it again; send it with a new job_id")
	b, _ := marshal(errorBody{Error: e})
	return httpStatus(e.Code), b
}

// startCluster ends what this node's earlier process held and starts the
// heartbeat; on a store one process owns, it does nothing.
func (s *Server) startCluster() error {
	st := s.deps.Store
	if !st.Shared() {
		close(s.clusterDone)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, body := runLostBody()
	e, err := st.EndOwn(ctx, status, body)
	if err != nil {
		return err
	}
	if e.Jobs+e.Sessions > 0 {
		s.log.Warn("ended what this node's earlier process left", slog.Int64("jobs", e.Jobs), slog.Int64("sessions", e.Sessions))
	}
	if err := st.Heartbeat(ctx, s.cfg.NodeAddr); err != nil {
		return err
	}
	go s.heartbeat()
	return nil
}

func (s *Server) heartbeat() {
	defer close(s.clusterDone)
	every := s.cfg.NodeTimeout / 6
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.stopJanitor:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := s.deps.Store.Heartbeat(ctx, s.cfg.NodeAddr); err != nil {
			s.log.Error("heartbeat", slog.String("error", err.Error()))
		}
		status, body := runLostBody()
		e, err := s.deps.Store.EndDeadNodes(ctx, s.now().Add(-s.cfg.NodeTimeout), status, body)
		cancel()
		if err != nil {
			s.log.Error("end dead nodes", slog.String("error", err.Error()))
		} else if len(e.Nodes) > 0 {
			s.log.Warn("nodes not seen for "+s.cfg.NodeTimeout.String()+" ended", slog.Any("nodes", e.Nodes),
				slog.Int64("jobs", e.Jobs), slog.Int64("sessions", e.Sessions))
		}
	}
}

// awaitElsewhere waits for the job key, which another node runs, to be
// done, and returns its record; if that node gives it up (its run failed
// before a result), this request claims it in its turn.
func (s *Server) awaitElsewhere(ctx context.Context, key, hash string) (*store.JobRecord, bool, error) {
	t := time.NewTicker(elsewherePoll)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		rec, err := s.deps.Store.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rec, claimed, err := s.deps.Store.Claim(ctx, key, hash)
			if err != nil || claimed || rec.State == store.JobDone {
				return rec, claimed, err
			}
		case err != nil:
			return nil, false, err
		case rec.State == store.JobDone:
			return rec, false, nil
		}
	}
}

// elsewhere reports whether rec, a running job, runs on another node.
func (s *Server) elsewhere(rec *store.JobRecord) bool {
	return s.deps.Store.Shared() && rec.Node != s.deps.Store.Node()
}
