package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The nodes sharing a Postgres database. Each records itself every few
// seconds (Heartbeat); a node not seen for long enough is dead, and the
// first live node to notice ends what it held (EndDeadNodes): its running
// jobs become done with a failure the caller chose, so that no job stays
// "running" and none runs twice, and its open sessions are lost.

// Shared reports whether the database is one many nodes may share
// (Postgres), rather than a file one process owns.
func (s *Store) Shared() bool { return s.dialect.name == "postgres" }

// Node is this process's name among the nodes (WithNode).
func (s *Store) Node() string { return s.node }

// Heartbeat records this node as seen now, reachable by the other nodes
// at addr (host:port).
func (s *Store) Heartbeat(ctx context.Context, addr string) error {
	now := unixMilli(s.now())
	if _, err := s.c().exec(ctx, `
INSERT INTO nodes (name, addr, started_at, seen_at) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET addr = excluded.addr, seen_at = excluded.seen_at`, s.node, addr, now, now); err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	return nil
}

// Ended is what ending a node's holdings ended.
type Ended struct {
	Nodes          []string
	Jobs, Sessions int64
}

// EndOwn ends what an earlier process of this node held: its running
// jobs become done with status and response, its open sessions lost.
// A node calls it as it starts, before it runs anything.
func (s *Store) EndOwn(ctx context.Context, status int, response []byte) (Ended, error) {
	return s.endNodes(ctx, []string{s.node}, false, status, response)
}

// EndDeadNodes ends what every other node not seen since before held, as
// EndOwn does, and forgets those nodes.
func (s *Store) EndDeadNodes(ctx context.Context, before time.Time, status int, response []byte) (Ended, error) {
	rows, err := s.c().query(ctx, `SELECT name FROM nodes WHERE seen_at < ? AND name != ?`, unixMilli(before), s.node)
	if err != nil {
		return Ended{}, fmt.Errorf("store: dead nodes: %w", err)
	}
	var dead []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return Ended{}, fmt.Errorf("store: dead nodes: %w", err)
		}
		dead = append(dead, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(dead) == 0 {
		return Ended{}, err
	}
	return s.endNodes(ctx, dead, true, status, response)
}

func (s *Store) endNodes(ctx context.Context, names []string, forget bool, status int, response []byte) (_ Ended, retErr error) {
	e := Ended{Nodes: names}
	tx, err := s.begin(ctx, nil)
	if err != nil {
		return e, fmt.Errorf("store: end nodes: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = tx.Rollback()
		}
	}()
	now := unixMilli(s.now())
	for _, n := range names {
		res, err := tx.exec(ctx, `UPDATE jobs SET state = 'done', response = ?, status = ?, finished_at = ? WHERE state = 'running' AND node = ?`,
			response, status, now, n)
		if err != nil {
			return e, fmt.Errorf("store: end node %s's jobs: %w", n, err)
		}
		jobs, _ := res.RowsAffected()
		res, err = tx.exec(ctx, `UPDATE sessions SET ended_at = ?, end_reason = ? WHERE ended_at IS NULL AND node = ?`, now, SessionLost, n)
		if err != nil {
			return e, fmt.Errorf("store: end node %s's sessions: %w", n, err)
		}
		sessions, _ := res.RowsAffected()
		e.Jobs, e.Sessions = e.Jobs+jobs, e.Sessions+sessions
		if forget {
			if _, err := tx.exec(ctx, `DELETE FROM nodes WHERE name = ?`, n); err != nil {
				return e, fmt.Errorf("store: forget node %s: %w", n, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return e, fmt.Errorf("store: end nodes: %w", err)
	}
	return e, nil
}

// SessionPlace says where session id lives: the node that holds it, that
// node's address if the database knows the node, and whether the session
// is open. found is false for an id never recorded.
func (s *Store) SessionPlace(ctx context.Context, id string) (node, addr string, open, found bool, err error) {
	err = s.c().queryRow(ctx, `
SELECT s.node, COALESCE(n.addr, ''), s.ended_at IS NULL FROM sessions s LEFT JOIN nodes n ON n.name = s.node WHERE s.id = ?`, id).
		Scan(&node, &addr, &open)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, false, nil
	}
	if err != nil {
		return "", "", false, false, fmt.Errorf("store: session place: %w", err)
	}
	return node, addr, open, true, nil
}
