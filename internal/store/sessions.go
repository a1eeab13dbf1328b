package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SessionRecord is what the store keeps of a session: enough to answer a
// call to one that no process holds any more. The session itself (its
// interpreter, its files) lives only in the process that made it.
type SessionRecord struct {
	ID, Owner string
	Node      string // the node that holds it
	CreatedAt time.Time
	EndedAt   time.Time // zero while it is open
	EndReason string
}

// SessionLost is the end reason of a session whose process went away
// without ending it (a restart, a crash): LoseOpenSessions writes it.
const SessionLost = "lost"

// AddSession records a new open session, reached by owner and counted
// against quota's cap.
func (s *Store) AddSession(ctx context.Context, id, owner, quota string, created time.Time) error {
	if _, err := s.c().exec(ctx, `INSERT INTO sessions (id, owner, quota, created_at, node) VALUES (?, ?, ?, ?, ?)`,
		id, owner, quota, unixMilli(created), s.node); err != nil {
		return fmt.Errorf("store: add session: %w", err)
	}
	return nil
}

// EndSession records that session id ended at at, for reason; a session
// already ended keeps its first end.
func (s *Store) EndSession(ctx context.Context, id, reason string, at time.Time) error {
	if _, err := s.c().exec(ctx, `UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL`,
		unixMilli(at), reason, id); err != nil {
		return fmt.Errorf("store: end session: %w", err)
	}
	return nil
}

// Session returns session id's record; found is false if there is none.
func (s *Store) Session(ctx context.Context, id string) (_ SessionRecord, found bool, _ error) {
	var (
		r       = SessionRecord{ID: id}
		created int64
		ended   sql.NullInt64
		reason  sql.NullString
	)
	err := s.c().queryRow(ctx, `SELECT owner, created_at, ended_at, end_reason, node FROM sessions WHERE id = ?`, id).
		Scan(&r.Owner, &created, &ended, &reason, &r.Node)
	if errors.Is(err, sql.ErrNoRows) {
		return SessionRecord{}, false, nil
	}
	if err != nil {
		return SessionRecord{}, false, fmt.Errorf("store: session: %w", err)
	}
	r.CreatedAt = time.UnixMilli(created).UTC()
	if ended.Valid {
		r.EndedAt = time.UnixMilli(ended.Int64).UTC()
	}
	r.EndReason = reason.String
	return r, true, nil
}

// OpenSessions counts the open sessions counted against quota, on every
// node sharing the database.
func (s *Store) OpenSessions(ctx context.Context, quota string) (int, error) {
	var n int
	if err := s.c().queryRow(ctx, `SELECT COUNT(*) FROM sessions WHERE ended_at IS NULL AND quota = ?`, quota).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: open sessions: %w", err)
	}
	return n, nil
}

// LoseOpenSessions ends every session of this node's still open with
// SessionLost: called at start, when no session of an earlier process of
// the node can be alive.
func (s *Store) LoseOpenSessions(ctx context.Context, at time.Time) (int64, error) {
	q, args := s.mine(`UPDATE sessions SET ended_at = ?, end_reason = ? WHERE ended_at IS NULL`, unixMilli(at), SessionLost)
	res, err := s.c().exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("store: lose open sessions: %w", err)
	}
	return res.RowsAffected()
}

// PruneSessions deletes the records of sessions that ended before before.
func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.c().exec(ctx, `DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?`, unixMilli(before))
	if err != nil {
		return 0, fmt.Errorf("store: prune sessions: %w", err)
	}
	return res.RowsAffected()
}
