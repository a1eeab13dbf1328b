// Package api is boxer's HTTP API: the routes, their handlers, and the one
// table that maps an error code to an HTTP status (errors.go).
//
// Routes:
//
//	POST /v1/exec           seed 000/001: {"code","language"} -> {"success","result"}
//	POST /v1/run-python     seed 004: files, command, limits -> snake_case result
//	GET  /v1/jobs/{job_id}  a stored /v1/run-python result
//	GET  /v1/health         marketplace-style health record
//	GET  /healthz           alive
//	GET  /readyz            a run could start now
//
// A request passes through these layers, outermost first:
//
//	ServeHTTP (middleware.go)  request id, panic recovery, access log,
//	                           metrics, call record for /v1/health
//	mux + handle (server.go)   route match, method check (405 + Allow)
//	Deps.Payment               optional x402 hook on the two run routes
//	handler                    read the body under a cap (body.go), parse
//	                           it strictly (jsonparse.go), check fields
//	                           (fields.go, paths.go), run (run.go)
//
// Bodies are parsed by a strict reader of its own, not encoding/json, which
// would accept case-variant and duplicate keys and turn invalid UTF-8 into
// U+FFFD without a word. Every check names the field, the problem and what
// is allowed.
//
// Runs go through a limiter (limiter.go): Config.Slots at once; a run that
// finds them taken waits if its expected wait is within
// Config.MaxQueueWait and the queue's hard bounds (Queue runs, QueueBytes
// of jobs) hold, and is refused with 503 busy and Retry-After otherwise.
// A run's context is its request's, so a client that disconnects cancels
// it, queued or running.
//
// A /v1/run-python job_id runs once (jobs.go): internal/store's Claim is the
// atomic decision, and an in-memory table lets a concurrent request with the
// same job_id wait for the first one's result instead of failing.
//
// Errors a caller sees carry a code from the boxer package and a message
// meant for them; internal failures are logged with the request id, and the
// caller gets only that id.
package api
