// Package boxer holds the domain types of the boxer service: what a caller asks
// to run (Job, Limits), what comes back (Result, Status, Artifact) and the
// error codes that cross the service's edge (Error). It does no I/O.
//
// The packages under internal/ implement the rest: the sandbox engine
// (internal/sandbox and its child side internal/sandbox/nsinit), cgroups
// (internal/cgroup), the syscall policy (internal/seccomp), the HTTP API
// (internal/api), the embedded store (internal/store) and x402 payments
// (internal/x402).
package boxer
