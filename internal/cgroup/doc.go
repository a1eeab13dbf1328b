// Package cgroup gives each sandbox run its own cgroup: limits (CPU
// bandwidth, memory without a swap escape, number of tasks), usage (peak
// memory, OOM kills, CPU time) and a kill that leaves nothing behind.
//
// # Shape
//
// New detects the cgroup version once, from /proc/self/mountinfo, and returns
// a Manager; Create returns a Cgroup. Both are interfaces with a v1 and a v2
// implementation behind them, so the sandbox engine never branches on the
// version. The only place the difference shows is Cgroup.FD: on v2 the engine
// starts the child directly inside the cgroup (clone3 CLONE_INTO_CGROUP via
// SysProcAttr.UseCgroupFD), on v1 it must call Add before the child execs the
// untrusted program.
//
// # Where the cgroups live
//
//	<home>/<Name>/<run>
//
// On v1, <home> is the cgroup boxer runs in (per controller, read from
// /proc/self/cgroup) or Options.Parent. On v2 the kernel's "no internal
// processes" rule forbids enabling controllers for the children of a cgroup
// that holds processes (the root cgroup excepted), so New first finds boxer
// a home it may use, whichever way boxer was started (see placeV2):
//
//   - a systemd unit with Delegate=yes, or a container whose entrypoint is
//     boxer: its own cgroup, boxer moving into the leaf
//     <home>/<Name>-supervisor;
//   - a container with an init beside boxer, at its cgroup namespace's
//     root: the same, with the container's processes;
//   - a login shell's session scope, or any cgroup shared with processes
//     not boxer's: a transient scope <Name>-<pid>.scope with Delegate=yes,
//     asked of systemd over D-Bus, or where systemd is not running a cgroup
//     <Name> made beside boxer's own; boxer alone moves;
//   - Options.Parent: that cgroup, which must hold no other process.
//
// Manager.Placement says which, for `boxer doctor`. <home>/<Name> is the
// base: it never holds a process, only runs, which is what lets
// CleanupStale remove everything under it after a kill -9.
//
// # Killing
//
// A run may fork, double-fork into a new session, or ignore signals, so a
// Kill is of the cgroup, never of a process tree: on v2 one write to
// cgroup.kill; on v1 (and v2 before Linux 5.14) rounds of freeze, SIGKILL
// every listed pid, thaw, until the cgroup is empty. Freezing first stops
// a fork bomb from outrunning the kills and keeps pids from being reused
// while they are read. Every wait is bounded and ends in an error.
//
// # Reuse
//
// A warm pool's slot runs one job after another; its cgroup is made once
// and Reset between them instead of made and removed per job (on v1 five
// directories, about 1.3 ms of the machine's CPU). Reset kills what is
// left, reclaims the memory the last run left charged, and restarts the
// figures Stats reports; where the kernel cannot reset memory.peak (v2
// before Linux 6.12) it says so and the caller makes a new cgroup. See
// reset_linux.go.
//
// # Files and errors
//
// Everything is done with plain reads and writes of cgroupfs files, the
// few a run's path uses again and again held open (held_linux.go); errors
// name the operation and the file ("cgroup: write <path>: invalid
// argument") and unwrap to the errno. The filesystem is reached through
// Options.Root, Options.MountInfo and Options.ProcSelfCgroup, so the v2 code
// is unit-tested against a fake tree of plain files; the v1 code is tested
// for real on v1 hosts.
//
// There is no package-level state: a Manager is safe for concurrent use, and
// so is a Cgroup.
package cgroup
