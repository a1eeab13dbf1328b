package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TakeKeyCall counts a call of API key id in the minute at holds, on every
// node sharing the database, and reports whether it is within perMinute;
// if not, it is not counted, and wait says how long until the next
// minute. A shared database only: on a SQLite file the one process counts
// a key's calls itself.
func (s *Store) TakeKeyCall(ctx context.Context, id string, perMinute int, at time.Time) (wait time.Duration, ok bool, err error) {
	minute := at.Unix() / 60
	var calls int64
	err = s.c().queryRow(ctx, `
INSERT INTO key_minutes (key_id, minute, calls) VALUES (?, ?, 1)
ON CONFLICT (key_id, minute) DO UPDATE SET calls = key_minutes.calls + 1
WHERE key_minutes.calls < ?
RETURNING calls`, id, minute, perMinute).Scan(&calls)
	if errors.Is(err, sql.ErrNoRows) {
		// The row is at the rate already: the update's WHERE refused it.
		return time.Unix((minute+1)*60, 0).Sub(at), false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: count a key's call: %w", err)
	}
	return 0, true, nil
}

// PruneKeyMinutes deletes the counts of minutes before before.
func (s *Store) PruneKeyMinutes(ctx context.Context, before time.Time) (int64, error) {
	if !s.Shared() {
		return 0, nil
	}
	res, err := s.c().exec(ctx, `DELETE FROM key_minutes WHERE minute < ?`, before.Unix()/60)
	if err != nil {
		return 0, fmt.Errorf("store: prune key minutes: %w", err)
	}
	return res.RowsAffected()
}
