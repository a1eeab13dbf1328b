package observe

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Instance names one running boxer server on the host.
type Instance struct {
	PID        int    // the server process
	StateDir   string // its --state-dir
	CgroupName string // the directory that holds its runs' cgroups (sandbox.Config.CgroupName)
	IDBase     uint32 // the first host id of its block (sandbox.Config.IDBase)
	IDSpan     uint32 // how many ids the block holds (sandbox.Config.IDSpan)
	// DataDir holds the server's database, whose connection pool opens
	// and closes descriptors on its own schedule (idle connections close
	// after a while): descriptors on files below it are not counted.
	DataDir string
}

// Footprint is what an instance holds on the host at one moment: every
// mark a finished run could leave behind. Taken at a quiet point, two
// footprints of the same instance are equal; a difference is a leak, or a
// sandbox that is not settled yet.
type Footprint struct {
	Procs   int   // live sandbox processes: the instance's ids
	Roots   []int // sandbox processes the server started itself (the zygotes' pid 1s when quiet)
	Cgroups int   // cgroups below the instance's cgroup base, over every hierarchy, but spare ones
	// SpareCgroups counts the cgroups of warm slots that hold no process:
	// each kept for its slot's next child (internal/sandbox's keepCgroup),
	// at most one a slot. They are the pool's standing state, as its
	// ready children are, and grow with the slots used: Diff leaves them
	// out, and the server's descriptors to their files (held open, see
	// internal/cgroup's held) are not counted in FDs while the cgroup is
	// there. A descriptor to a cgroup that is gone is: that is a leak.
	SpareCgroups int
	// HeldNets counts the network namespaces the server holds for warm
	// slots (internal/sandbox's heldNet): a ready child's, and one a job
	// left untouched, kept for its slot's next child, at most one a slot.
	// Like spare cgroups they grow with the slots used: Diff leaves them
	// out, and the descriptors to them and to the /proc/PID/net files read
	// with them are not counted in FDs. internal/sandbox's
	// TestWarmNetnsKeptOnlyUntouched checks that none is left over.
	HeldNets int
	Mounts   int            // host mounts below the state dir
	RunDirs  int            // entries of the state dir's runs/
	FDs      map[string]int // the server's open descriptors by target, inode numbers cut ("pipe:[]"), but those below DataDir
}

// Snapshot reads in's footprint from /proc, /sys/fs/cgroup and the state
// dir. Root: it reads other users' /proc entries.
func Snapshot(in Instance) Footprint {
	f := Footprint{FDs: map[string]int{}}
	for _, pid := range LiveProcesses(in.IDBase, in.IDBase+in.IDSpan) {
		f.Procs++
		if parent(pid) == in.PID {
			f.Roots = append(f.Roots, pid)
		}
	}
	for _, dir := range RunCgroups(in.CgroupName) {
		if isWarm(dir) && empty(dir) {
			f.SpareCgroups++
		} else {
			f.Cgroups++
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		if fields := strings.Fields(l); len(fields) > 4 && strings.HasPrefix(fields[4], in.StateDir+"/") {
			f.Mounts++
		}
	}
	runs, _ := os.ReadDir(filepath.Join(in.StateDir, "runs"))
	f.RunDirs = len(runs)
	for _, t := range Descriptors(in.PID) {
		if in.DataDir != "" && strings.HasPrefix(t, in.DataDir+"/") {
			continue
		}
		if netHold(t) {
			if strings.HasPrefix(t, "net:[") {
				f.HeldNets++
			}
			continue
		}
		if pid, ok := procStatOf(t); ok {
			// A ready warm child's job process's stat file, held until
			// Destroy (internal/sandbox's exitOf): the pool's standing
			// state, counted by whether its process is there, not by pid.
			if _, err := os.Stat("/proc/" + pid); err == nil {
				t = "/proc/<live>/stat"
			} else {
				t = "/proc/<gone>/stat"
			}
		}
		if dir, ok := cgroupOf(t, in.CgroupName); ok {
			_, err := os.Stat(dir)
			switch {
			case err == nil && isWarm(dir):
				continue
			case isWarm(dir):
				t = "a removed warm cgroup"
			case err != nil:
				t = "a removed cgroup"
			default:
				// A zygote's cgroup (or a running cold run's). The pool
				// replaces a zygote after so many forks (RotateAfter), and
				// the fresh one's cgroup has a fresh id: the descriptors
				// are counted by hierarchy and file, not by id.
				t = filepath.Join(filepath.Dir(dir), "<id>") + strings.TrimPrefix(t, dir)
			}
		}
		f.FDs[fdKey(t)]++
	}
	return f
}

// isWarm reports whether the cgroup dir is a warm slot's (sandbox names
// them "w" and an id; a cold run's and a zygote's are hex ids).
func isWarm(dir string) bool { return strings.HasPrefix(filepath.Base(dir), "w") }

// empty reports whether the cgroup dir holds no process.
func empty(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return err == nil && len(strings.TrimSpace(string(b))) == 0
}

// cgroupOf returns the cgroup right below a directory named base (a warm
// slot's, a zygote's or a run's) that target, a descriptor's path, is or
// lies in.
func cgroupOf(target, base string) (string, bool) {
	if !strings.HasPrefix(target, "/sys/fs/cgroup/") {
		return "", false
	}
	parts := strings.Split(target, "/")
	for i := 1; i+1 < len(parts); i++ {
		if parts[i] == base {
			return strings.Join(parts[:i+2], "/"), true
		}
	}
	return "", false
}

// netHold reports whether target, a descriptor's, is a held network
// namespace ("net:[N]") or one of the /proc/PID/net files read with it.
func netHold(target string) bool {
	if strings.HasPrefix(target, "net:[") {
		return true
	}
	pid, rest, ok := strings.Cut(strings.TrimPrefix(target, "/proc/"), "/")
	_, err := strconv.Atoi(pid)
	return ok && err == nil && strings.HasPrefix(target, "/proc/") && strings.HasPrefix(rest, "net/")
}

// procStatOf returns the pid of target, a descriptor's, if it is a
// /proc/PID/stat.
func procStatOf(target string) (string, bool) {
	pid, ok := strings.CutSuffix(strings.TrimPrefix(target, "/proc/"), "/stat")
	if !ok || !strings.HasPrefix(target, "/proc/") {
		return "", false
	}
	_, err := strconv.Atoi(pid)
	return pid, err == nil
}

// Descriptors maps each open descriptor of process pid to what it refers
// to: a path, "pipe:[N]", "socket:[N]" and the like. One closed while the
// list is read is left out.
func Descriptors(pid int) map[int]string {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	m := make(map[int]string, len(ents))
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			m[fd] = t
		}
	}
	return m
}

// Diff lists, one line each, how f differs from base; nil when they are
// equal.
func (f Footprint) Diff(base Footprint) []string {
	var d []string
	for _, c := range []struct {
		what      string
		now, then int
	}{{"sandbox processes", f.Procs, base.Procs}, {"cgroups", f.Cgroups, base.Cgroups},
		{"mounts", f.Mounts, base.Mounts}, {"run dirs", f.RunDirs, base.RunDirs}} {
		if c.now != c.then {
			d = append(d, fmt.Sprintf("%s: %d, was %d", c.what, c.now, c.then))
		}
	}
	if !slices.Equal(f.Roots, base.Roots) {
		d = append(d, fmt.Sprintf("sandbox roots started by the server: %v, was %v", f.Roots, base.Roots))
	}
	for _, t := range slices.Sorted(maps.Keys(mergeKeys(f.FDs, base.FDs))) {
		if f.FDs[t] != base.FDs[t] {
			d = append(d, fmt.Sprintf("server descriptors to %s: %d, was %d", t, f.FDs[t], base.FDs[t]))
		}
	}
	return d
}

func mergeKeys(a, b map[string]int) map[string]int {
	m := maps.Clone(a)
	for k := range b {
		m[k] = 0
	}
	return m
}

// fdKey is what a descriptor's target counts as: which socket, pipe or
// run cgroup it is changes from run to run, how many there are must not.
// "socket:[123]" becomes "socket:[]", and on cgroup v2, where the server
// holds a directory fd of each warm child's cgroup (named at random each
// time one is prepared), ".../boxer/w1f2e" becomes ".../boxer/*".
func fdKey(target string) string {
	if strings.HasPrefix(target, "/sys/fs/cgroup/") {
		return filepath.Dir(target) + "/*"
	}
	return cutInode(target)
}

// cutInode turns "socket:[123]" into "socket:[]".
func cutInode(target string) string {
	i := strings.LastIndexByte(target, '[')
	if i < 0 || !strings.HasSuffix(target, "]") {
		return target
	}
	if _, err := strconv.ParseUint(target[i+1:len(target)-1], 10, 64); err != nil {
		return target // anon_inode:[pidfd] says what it is: keep it
	}
	return target[:i] + "[]"
}

// parent returns pid's parent pid, 0 if pid is gone.
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// RunCgroups lists the cgroups below every directory named name in the
// cgroup hierarchies (one per controller on v1, one on v2).
func RunCgroups(name string) []string {
	var found []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == name {
			subs, _ := os.ReadDir(p)
			for _, s := range subs {
				if s.IsDir() {
					found = append(found, filepath.Join(p, s.Name()))
				}
			}
			return filepath.SkipDir
		}
		if strings.Count(p, "/") > 8 {
			return filepath.SkipDir
		}
		return nil
	})
	return found
}
