package cgroup

import (
	"io/fs"
	"testing"
)

// The limits of boxer's cgroup and of each ancestor bound it; the lowest
// of each counts, "max" is no limit, a missing file none.
func TestCgroupLimits(t *testing.T) {
	files := map[string]string{
		"/sys/fs/cgroup/kubepods.slice/cpu.max":                      "max 100000\n",
		"/sys/fs/cgroup/kubepods.slice/memory.max":                   "17179869184\n",
		"/sys/fs/cgroup/kubepods.slice/pod1/cpu.max":                 "200000 100000\n",
		"/sys/fs/cgroup/kubepods.slice/pod1/memory.max":              "max\n",
		"/sys/fs/cgroup/kubepods.slice/pod1/boxer/cpu.max":           "max 100000\n",
		"/sys/fs/cgroup/kubepods.slice/pod1/boxer/memory.max":        "8589934592\n",
		"/sys/fs/cgroup/cpu.max":                                     "150000 100000\n", // a cgroup namespace's root: the container's own
		"/sys/fs/cgroup/memory.max":                                  "max\n",
		"/sys/fs/cgroup/system.slice/boxer.service/memory.max":       "max\n",
		"/sys/fs/cgroup/system.slice/boxer.service/cpu.max":          "max 100000\n",
		"/sys/fs/cgroup/system.slice/boxer.service/pids.max":         "max\n",
		"/sys/fs/cgroup/system.slice/boxer.service/boxer/cpu.max":    "50000 100000\n",
		"/sys/fs/cgroup/system.slice/boxer.service/boxer/memory.max": "1073741824\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	for _, c := range []struct {
		dir    string
		cpus   float64
		memory uint64
	}{
		{"/sys/fs/cgroup/kubepods.slice/pod1/boxer", 1.5, 8 << 30}, // the root's 1.5 counts too: an ancestor
		{"/sys/fs/cgroup", 1.5, 0},
		{"/sys/fs/cgroup/system.slice/boxer.service", 1.5, 0}, // its child's limits do not bind it
		{"/sys/fs/cgroup/none", 1.5, 0},
	} {
		cpus, memory := limitsFrom(c.dir, "/sys/fs/cgroup", read)
		if cpus != c.cpus || memory != c.memory {
			t.Errorf("%s: %v CPUs, %d bytes; want %v, %d", c.dir, cpus, memory, c.cpus, c.memory)
		}
	}
	for _, c := range []struct {
		n     int
		limit float64
		want  int
	}{{64, 2, 2}, {64, 1.5, 2}, {64, 0.25, 1}, {4, 8, 4}, {4, 0, 4}} {
		if got := CPUsBoundedBy(c.n, c.limit); got != c.want {
			t.Errorf("CPUsBoundedBy(%d, %v) = %d, want %d", c.n, c.limit, got, c.want)
		}
	}
}
