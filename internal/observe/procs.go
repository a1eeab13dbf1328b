package observe

import (
	"os"
	"strconv"
	"strings"
)

// LiveProcesses lists the host's live processes whose real uid is in
// [lo, hi): a boxer instance's sandbox ids. Zombies are not counted: they
// hold nothing, and a sandbox's pid 1 whose supervisor was killed is one
// until the host's init reaps it.
func LiveProcesses(lo, hi uint32) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var uid uint64
		zombie := false
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "Uid:":
				uid, _ = strconv.ParseUint(f[1], 10, 32)
			case "State:":
				zombie = f[1] == "Z"
			}
		}
		if !zombie && uint32(uid) >= lo && uint32(uid) < hi {
			pids = append(pids, pid)
		}
	}
	return pids
}
