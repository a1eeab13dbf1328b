// Package observe reads a boxer host from outside, for the tests and the
// benchmarks that start the real binary: which sandbox processes are alive,
// and where a starting server listens.
package observe
