// Package observe reads a boxer host from outside, for the tests and the
// benchmarks that start the real binary: which sandbox processes are alive,
// where a starting server listens, and a server's footprint on the host
// (processes, cgroups, mounts, run dirs, descriptors) to compare before and
// after a load.
package observe
