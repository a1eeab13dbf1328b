package cgroup

import (
	"math"
	"os"
	"path"
	"strconv"
	"strings"
)

// Limits reads the CPU and memory limits that bound this process's own
// cgroup v2 and its ancestors: a container's (docker --cpus, --memory), a
// pod's resources.limits, a systemd unit's CPUQuota= and MemoryMax=. The
// host's CPU count and memory overstate what such a process may use. The
// cgroup is found as New finds it (opts.Root, /proc/self/cgroup and the
// mount table, a cgroup namespace's root included). cpus is 0 and memory
// 0 where no limit is found, and on cgroup v1, where they are not read.
func Limits(opts Options) (cpus float64, memory uint64) {
	opts = opts.withDefaults()
	mountInfo, err1 := readFile(opts.MountInfo)
	self, err2 := readFile(opts.ProcSelfCgroup)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	l, err := detectLayout(opts.Root, "", mountInfo, self)
	if err != nil || l.version != V2 {
		return 0, 0
	}
	return limitsFrom(l.v2Self, opts.Root, os.ReadFile)
}

// limitsFrom is Limits from the cgroup directory dir up to root, reading
// files with read: the lowest cpu.max and memory.max on the way count.
func limitsFrom(dir, root string, read func(string) ([]byte, error)) (cpus float64, memory uint64) {
	for {
		if b, err := read(path.Join(dir, "cpu.max")); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
				quota, err1 := strconv.ParseFloat(f[0], 64)
				period, err2 := strconv.ParseFloat(f[1], 64)
				if err1 == nil && err2 == nil && period > 0 && (cpus == 0 || quota/period < cpus) {
					cpus = quota / period
				}
			}
		}
		if b, err := read(path.Join(dir, "memory.max")); err == nil {
			if m, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && (memory == 0 || m < memory) {
				memory = m
			}
		}
		if !under(dir, root) || dir == root {
			return cpus, memory
		}
		dir = path.Dir(dir)
	}
}

// CPUsBoundedBy is n CPUs, or a CPU limit (from Limits) when it is lower,
// rounded up: a 1.5-CPU quota keeps two busy at times.
func CPUsBoundedBy(n int, limit float64) int {
	if limit > 0 && limit < float64(n) {
		return max(1, int(math.Ceil(limit)))
	}
	return n
}
