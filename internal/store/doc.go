// Package store is boxer's database: one SQLite file in the data dir
// (modernc.org/sqlite, pure Go, so the binary stays static) by default, or
// a Postgres server (pgx) that many nodes share. The queries are written
// once, in SQLite's spelling, and rebound for Postgres (db.go); each has
// its own migrations, and every test of the package runs on both.
//
// Among what it holds, each in its own file:
//
//   - jobs.go: records for /v1/run-python's job_id idempotency key. A job is
//     claimed (state "running") before its run starts and finished (state
//     "done", with the response bytes) after. The store never looks inside a
//     response: it is opaque JSON owned by internal/api.
//   - calls.go: one row per API call, for GET /v1/health's figures (runs
//     total, success rate, p50 duration, calls and unique payers in 30 days).
//   - nonces.go: x402 payment nonces already used, so a signed payment is
//     accepted once, across restarts too.
//   - signin.go: x402 sign-in: the key that MACs challenge nonces (made
//     once per database, in secrets) and the nonces spent by signed
//     proofs, each kept until it expires. Issuing a challenge writes
//     nothing.
//   - paymentids.go: x402 payment identifiers, one per payer and id, claimed
//     ("pending", with a lease) before the request is served and "done"
//     with the paid answer after, until their retention ends. Like a job's
//     response, the answer is opaque to the store.
//
// The schema is changed only by appending to the numbered migrations in
// migrate.go; schema_version records which have run. The database runs in
// WAL mode so health queries do not block writers.
//
// A Store is safe for concurrent use. One process owns a database file, and
// Open enforces it with a lock file: Open releases every job left
// "running", which is only correct when no other process is running jobs
// against the same file. On Postgres each process is a node with a name
// (WithNode): jobs and sessions record their node, and a node's Open
// releases only its own.
package store
