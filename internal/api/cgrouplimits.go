package api

import (
	"math"
	"path"
	"strconv"
	"strings"
)

// cgroupLimits reads the CPU and memory limits that bound boxer's own
// cgroup v2 and its ancestors: a container's (docker --cpus, --memory), a
// pod's resources.limits, a systemd unit's CPUQuota= and MemoryMax=. The
// host's CPU count and memory overstate what such a process may use.
// selfCgroup is /proc/self/cgroup's text; read reads a file below root
// (/sys/fs/cgroup). cpus is 0 and memory 0 where no limit is found, and
// on cgroup v1, where the limits are not read.
func cgroupLimits(selfCgroup, root string, read func(string) ([]byte, error)) (cpus float64, memory uint64) {
	dir := ""
	for _, line := range strings.Split(selfCgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			dir = path.Clean("/" + p)
		}
	}
	if dir == "" {
		return 0, 0
	}
	for {
		if b, err := read(path.Join(root, dir, "cpu.max")); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
				quota, err1 := strconv.ParseFloat(f[0], 64)
				period, err2 := strconv.ParseFloat(f[1], 64)
				if err1 == nil && err2 == nil && period > 0 && (cpus == 0 || quota/period < cpus) {
					cpus = quota / period
				}
			}
		}
		if b, err := read(path.Join(root, dir, "memory.max")); err == nil {
			if m, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && (memory == 0 || m < memory) {
				memory = m
			}
		}
		if dir == "/" {
			return cpus, memory
		}
		dir = path.Dir(dir)
	}
}

// cpusBoundedBy is n CPUs, or a cgroup's CPU limit when it is lower,
// rounded up (a 1.5-CPU quota keeps two busy at times).
func cpusBoundedBy(n int, limit float64) int {
	if limit > 0 && limit < float64(n) {
		return max(1, int(math.Ceil(limit)))
	}
	return n
}
