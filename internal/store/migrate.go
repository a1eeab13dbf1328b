package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations are SQLite's, applied in order, each once, each in its own
// transaction. migrations[i] brings the schema to version i+1. Append
// only: an edited migration never runs again on a database that has
// already applied it. pgMigrations are Postgres's, numbered on their own:
// Postgres came at SQLite's version 6, and its first migration makes that
// schema at once. A change to the schema appends to both.
var migrations = []string{
	// 1: job records, call log, nonces.
	`
CREATE TABLE jobs (
	job_id       TEXT    PRIMARY KEY,
	request_hash TEXT    NOT NULL,
	state        TEXT    NOT NULL CHECK (state IN ('running', 'done')),
	response     BLOB,
	created_at   INTEGER NOT NULL,
	finished_at  INTEGER,
	CHECK ((state = 'done') = (response IS NOT NULL AND finished_at IS NOT NULL))
);
CREATE INDEX jobs_done_finished ON jobs (finished_at) WHERE state = 'done';

CREATE TABLE calls (
	id          INTEGER PRIMARY KEY,
	at          INTEGER NOT NULL,
	route       TEXT    NOT NULL,
	status      INTEGER NOT NULL,
	ran         INTEGER NOT NULL CHECK (ran IN (0, 1)),
	duration_us INTEGER NOT NULL,
	payer       TEXT
);
CREATE INDEX calls_at ON calls (at);
CREATE INDEX calls_ran ON calls (ran, id);

-- call_totals keeps what pruning removes from calls, so that all-time
-- figures survive the 30-day window. It has exactly one row.
CREATE TABLE call_totals (
	id             INTEGER PRIMARY KEY CHECK (id = 1),
	runs           INTEGER NOT NULL,
	last_called_at INTEGER
);
INSERT INTO call_totals (id, runs, last_called_at) VALUES (1, 0, NULL);

CREATE TABLE nonces (
	payer   TEXT    NOT NULL,
	nonce   TEXT    NOT NULL,
	used_at INTEGER NOT NULL,
	PRIMARY KEY (payer, nonce)
) WITHOUT ROWID;
CREATE INDEX nonces_used_at ON nonces (used_at);
`,
	// 2: the HTTP status a job's stored response is sent with (410 for a
	// result too large to keep; see Finish).
	`ALTER TABLE jobs ADD COLUMN status INTEGER NOT NULL DEFAULT 200;`,
	// 3: API keys, and which key made each call. A key's secret is never
	// stored: only its SHA-256, looked up as a whole token arrives.
	`
CREATE TABLE api_keys (
	id              TEXT    PRIMARY KEY,
	name            TEXT    NOT NULL,
	hash            TEXT    NOT NULL UNIQUE,
	created_at      INTEGER NOT NULL,
	revoked_at      INTEGER,
	rate_per_minute INTEGER NOT NULL CHECK (rate_per_minute >= 0),
	calls           INTEGER NOT NULL DEFAULT 0,
	last_used_at    INTEGER
);
ALTER TABLE calls ADD COLUMN key_id TEXT;
`,
	// 4: calls.key_id was written and never read: a key's use is counted
	// in api_keys (calls, last_used_at), which outlives the call log's
	// 30 days.
	`ALTER TABLE calls DROP COLUMN key_id;`,
	// 5: sessions, so that a call to one this process does not hold can
	// tell a session lost with a restart (or ended) from an id never
	// given out.
	`
CREATE TABLE sessions (
	id         TEXT    PRIMARY KEY,
	owner      TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	ended_at   INTEGER,
	end_reason TEXT
);
CREATE INDEX sessions_ended_at ON sessions (ended_at);
`,
	// 6: which node runs a job and holds a session, for the databases many
	// nodes share (Postgres); on a SQLite file, always ''.
	`
ALTER TABLE jobs ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN node TEXT NOT NULL DEFAULT '';
`,
	// 7: the nodes sharing the database, each with when it was last seen:
	// one not seen for a while is dead, and what it held ends.
	`
CREATE TABLE nodes (
	name       TEXT    PRIMARY KEY,
	addr       TEXT    NOT NULL,
	started_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL
);
`,
	// 8: whose cap a session counts against (an API key, a payer), so
	// that nodes sharing the database count a caller's sessions together.
	`
ALTER TABLE sessions ADD COLUMN quota TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_open_quota ON sessions (quota) WHERE ended_at IS NULL;
`,
	// 9: x402 sign-in (SIWx). A challenge's nonce is stateless, MACed
	// with a key every node shares (secrets), so issuing one writes
	// nothing anyone could ask for; a nonce spent by a proof with a good
	// signature is kept, to refuse it again until it expires.
	`
CREATE TABLE used_signin_nonces (
	nonce      TEXT    PRIMARY KEY,
	expires_at INTEGER NOT NULL,
	used_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX used_signin_nonces_expires_at ON used_signin_nonces (expires_at);

CREATE TABLE secrets (
	name       TEXT    PRIMARY KEY,
	value      BLOB    NOT NULL,
	created_at INTEGER NOT NULL
);
`,
	// 10: x402 payment identifiers: one paid answer kept per payer and id,
	// for the retries that carry the id (see paymentids.go).
	`
CREATE TABLE payment_ids (
	payer       TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	state       TEXT    NOT NULL CHECK (state IN ('pending', 'done')),
	status      INTEGER NOT NULL,
	header      BLOB,
	body        BLOB,
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	node        TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (payer, id),
	CHECK ((state = 'done') = (body IS NOT NULL))
);
CREATE INDEX payment_ids_expires_at ON payment_ids (expires_at);
`,
}

var pgMigrations = []string{
	// 1: SQLite's schema at version 6. Times are BIGINT milliseconds.
	`
CREATE TABLE jobs (
	job_id       TEXT    PRIMARY KEY,
	request_hash TEXT    NOT NULL,
	state        TEXT    NOT NULL CHECK (state IN ('running', 'done')),
	response     BYTEA,
	status       INTEGER NOT NULL DEFAULT 200,
	created_at   BIGINT  NOT NULL,
	finished_at  BIGINT,
	node         TEXT    NOT NULL DEFAULT '',
	CHECK ((state = 'done') = (response IS NOT NULL AND finished_at IS NOT NULL))
);
CREATE INDEX jobs_done_finished ON jobs (finished_at) WHERE state = 'done';
CREATE INDEX jobs_running_node ON jobs (node) WHERE state = 'running';

CREATE TABLE calls (
	id          BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at          BIGINT  NOT NULL,
	route       TEXT    NOT NULL,
	status      INTEGER NOT NULL,
	ran         INTEGER NOT NULL CHECK (ran IN (0, 1)),
	duration_us BIGINT  NOT NULL,
	payer       TEXT
);
CREATE INDEX calls_at ON calls (at);
CREATE INDEX calls_ran ON calls (ran, id);

CREATE TABLE call_totals (
	id             INTEGER PRIMARY KEY CHECK (id = 1),
	runs           BIGINT  NOT NULL,
	last_called_at BIGINT
);
INSERT INTO call_totals (id, runs, last_called_at) VALUES (1, 0, NULL);

CREATE TABLE nonces (
	payer   TEXT   NOT NULL,
	nonce   TEXT   NOT NULL,
	used_at BIGINT NOT NULL,
	PRIMARY KEY (payer, nonce)
);
CREATE INDEX nonces_used_at ON nonces (used_at);

CREATE TABLE api_keys (
	id              TEXT    PRIMARY KEY,
	name            TEXT    NOT NULL,
	hash            TEXT    NOT NULL UNIQUE,
	created_at      BIGINT  NOT NULL,
	revoked_at      BIGINT,
	rate_per_minute INTEGER NOT NULL CHECK (rate_per_minute >= 0),
	calls           BIGINT  NOT NULL DEFAULT 0,
	last_used_at    BIGINT
);

CREATE TABLE sessions (
	id         TEXT   PRIMARY KEY,
	owner      TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	ended_at   BIGINT,
	end_reason TEXT,
	node       TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX sessions_ended_at ON sessions (ended_at);
`,
	// 2: SQLite's 7.
	`
CREATE TABLE nodes (
	name       TEXT   PRIMARY KEY,
	addr       TEXT   NOT NULL,
	started_at BIGINT NOT NULL,
	seen_at    BIGINT NOT NULL
);
`,
	// 3: SQLite's 8.
	`
ALTER TABLE sessions ADD COLUMN quota TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_open_quota ON sessions (quota) WHERE ended_at IS NULL;
`,
	// 4: each API key's calls in each minute, counted by every node, so
	// that a key's rate holds across the nodes (Postgres only: a SQLite
	// file's one process counts in memory).
	`
CREATE TABLE key_minutes (
	key_id TEXT   NOT NULL,
	minute BIGINT NOT NULL,
	calls  BIGINT NOT NULL,
	PRIMARY KEY (key_id, minute)
);
`,
	// 5: SQLite's 9.
	`
CREATE TABLE used_signin_nonces (
	nonce      TEXT   PRIMARY KEY,
	expires_at BIGINT NOT NULL,
	used_at    BIGINT NOT NULL
);
CREATE INDEX used_signin_nonces_expires_at ON used_signin_nonces (expires_at);

CREATE TABLE secrets (
	name       TEXT   PRIMARY KEY,
	value      BYTEA  NOT NULL,
	created_at BIGINT NOT NULL
);
`,
	// 6: SQLite's 10.
	`
CREATE TABLE payment_ids (
	payer       TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	state       TEXT    NOT NULL CHECK (state IN ('pending', 'done')),
	status      INTEGER NOT NULL,
	header      BYTEA,
	body        BYTEA,
	created_at  BIGINT  NOT NULL,
	expires_at  BIGINT  NOT NULL,
	node        TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (payer, id),
	CHECK ((state = 'done') = (body IS NOT NULL))
);
CREATE INDEX payment_ids_expires_at ON payment_ids (expires_at);
`,
}

// schemaVersionTable is where each dialect records its migrations.
var schemaVersionTable = map[string]string{
	"sqlite":   `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
	"postgres": `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`,
}

// migrationsOf are d's migrations.
func migrationsOf(d dialect) []string {
	if d.name == "postgres" {
		return pgMigrations
	}
	return migrations
}

// migrationLock is the Postgres advisory lock every migration holds, so
// that nodes starting at once on an empty database apply each once.
const migrationLock = 0x626f786572 // "boxer"

// migrate brings db to the newest schema version this build knows.
func migrate(ctx context.Context, db *sql.DB, d dialect, now time.Time) error {
	for {
		done, err := migrateOne(ctx, db, d, now)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration, if any, reporting done when the
// schema is current. The transaction is the database's alone for writing
// (SQLite's, from its start) or holds migrationLock (Postgres's), so two
// processes opening one new database at once apply each migration once.
func migrateOne(ctx context.Context, db *sql.DB, d dialect, now time.Time) (done bool, retErr error) {
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	tx := conn{sqlTx, d}
	defer func() {
		if retErr != nil {
			sqlTx.Rollback()
		}
	}()
	if d.name == "postgres" {
		if _, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, migrationLock); err != nil {
			return false, fmt.Errorf("lock for migrations: %w", err)
		}
	}
	if _, err := tx.exec(ctx, schemaVersionTable[d.name]); err != nil {
		return false, fmt.Errorf("create schema_version: %w", err)
	}
	migrations := migrationsOf(d)
	var version int
	if err := tx.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case version > len(migrations):
		return false, fmt.Errorf("database schema version %d is newer than this build of boxer knows (%d)", version, len(migrations))
	case version == len(migrations):
		return true, sqlTx.Commit()
	}
	next := version + 1
	if _, err := tx.exec(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("migration %d: %w", next, err)
	}
	if _, err := tx.exec(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, next, unixMilli(now)); err != nil {
		return false, fmt.Errorf("record migration %d: %w", next, err)
	}
	if err := sqlTx.Commit(); err != nil {
		return false, fmt.Errorf("commit migration %d: %w", next, err)
	}
	return false, nil
}

// SchemaVersion reports the version of the schema the database is at.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.c().queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v)
	return v, err
}
