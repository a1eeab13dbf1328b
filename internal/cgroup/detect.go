package cgroup

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// v1Controllers are the v1 hierarchies a run is placed in: cpu for the
// quota, cpuacct for CPU time, memory, pids, and freezer so that Kill can
// stop a fork bomb before killing it.
var v1Controllers = []string{"cpu", "cpuacct", "memory", "pids", "freezer"}

// v2Controllers are enabled in the subtree of the base; cpu.stat, freeze
// and kill are core files that need no controller.
var v2Controllers = []string{"cpu", "memory", "pids"}

// layout is what detection found: the version and the parent cgroup's
// directory in each hierarchy used.
type layout struct {
	version Version
	// v1Parents maps each of v1Controllers to the parent's directory in that
	// controller's hierarchy. Co-mounted controllers share a directory.
	v1Parents map[string]string
	// v2Parent is the parent's directory; v2Self is this process's own
	// cgroup directory, the only one New may move the process out of.
	v2Parent, v2Self string
}

// mount is one cgroup line of /proc/self/mountinfo.
type mount struct {
	root   string // the hierarchy path mounted, "/" unless in a container
	point  string // where it is mounted
	fstype string // "cgroup" or "cgroup2"
	opts   []string
}

// parseMountInfo returns the cgroup and cgroup2 mounts in mountinfo. See
// proc_pid_mountinfo(5) for the format.
func parseMountInfo(data string) ([]mount, error) {
	var mounts []mount
	for line := range strings.Lines(data) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		sep := slices.Index(fields, "-")
		if sep < 6 || len(fields) < sep+4 {
			return nil, fmt.Errorf("cgroup: parse mountinfo: malformed line %q", strings.TrimSpace(line))
		}
		fstype := fields[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		mounts = append(mounts, mount{
			root:   unescapeMountPath(fields[3]),
			point:  unescapeMountPath(fields[4]),
			fstype: fstype,
			opts:   strings.Split(fields[sep+3], ","),
		})
	}
	return mounts, nil
}

// unescapeMountPath undoes the kernel's octal escapes (\040 for a space, and
// so on) in a mountinfo path.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroup maps each controller in /proc/self/cgroup to this
// process's cgroup path in its hierarchy. The v2 line ("0::/path") is under
// the key "". Co-mounted controllers ("cpu,cpuacct") each get an entry.
func parseProcCgroup(data string) (map[string]string, error) {
	paths := make(map[string]string)
	for line := range strings.Lines(data) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		// hierarchy-id:controller-list:path; the path may contain ':'.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("cgroup: parse /proc/self/cgroup: malformed line %q", line)
		}
		if parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	return paths, nil
}

// detectLayout decides the version and finds the parent cgroup. Only mounts
// at or below root count. v2 wins when it is mounted at root itself (a pure
// v2 host); otherwise v1 wins when any v1 controller hierarchy exists (a
// hybrid host, where the cgroup2 mount at root/unified has no controllers);
// a cgroup2 mount below root is the last resort.
//
// parent, when not empty, replaces this process's own cgroup path.
func detectLayout(root, parent, mountInfo, procSelfCgroup string) (layout, error) {
	root = path.Clean(root)
	mounts, err := parseMountInfo(mountInfo)
	if err != nil {
		return layout{}, err
	}
	self, err := parseProcCgroup(procSelfCgroup)
	if err != nil {
		return layout{}, err
	}
	var v1, v2 []mount
	for _, m := range mounts {
		if !under(m.point, root) {
			continue
		}
		switch {
		case m.fstype == "cgroup2":
			v2 = append(v2, m)
		case slices.ContainsFunc(m.opts, func(o string) bool { return slices.Contains(v1Controllers, o) }):
			v1 = append(v1, m)
		}
	}
	if i := slices.IndexFunc(v2, func(m mount) bool { return m.point == root }); i >= 0 {
		return detectV2(v2[i], parent, self)
	}
	if len(v1) > 0 {
		return detectV1(v1, root, parent, self)
	}
	if len(v2) > 0 {
		return detectV2(v2[0], parent, self)
	}
	return layout{}, fmt.Errorf("cgroup: no cgroup filesystem is mounted at or under %s", root)
}

func detectV2(m mount, parent string, self map[string]string) (layout, error) {
	selfPath, ok := self[""]
	if !ok {
		return layout{}, fmt.Errorf("cgroup: /proc/self/cgroup has no cgroup v2 line (0::/path) although cgroup2 is mounted at %s", m.point)
	}
	selfDir, err := dirIn(m, selfPath)
	if err != nil {
		return layout{}, err
	}
	l := layout{version: V2, v2Parent: selfDir, v2Self: selfDir}
	if parent != "" {
		if l.v2Parent, err = dirIn(m, parent); err != nil {
			return layout{}, err
		}
	}
	return l, nil
}

func detectV1(mounts []mount, root, parent string, self map[string]string) (layout, error) {
	l := layout{version: V1, v1Parents: make(map[string]string)}
	var missing []string
	for _, c := range v1Controllers {
		i := slices.IndexFunc(mounts, func(m mount) bool { return slices.Contains(m.opts, c) })
		if i < 0 {
			missing = append(missing, c)
			continue
		}
		p := parent
		if p == "" {
			var ok bool
			if p, ok = self[c]; !ok {
				return layout{}, fmt.Errorf("cgroup: /proc/self/cgroup has no line for the v1 %s controller mounted at %s", c, mounts[i].point)
			}
		}
		dir, err := dirIn(mounts[i], p)
		if err != nil {
			return layout{}, err
		}
		l.v1Parents[c] = dir
	}
	if len(missing) > 0 {
		return layout{}, fmt.Errorf("cgroup: cgroup v1 controllers not mounted under %s: %s; boxer needs %s (cpu and cpuacct may share a mount)",
			root, strings.Join(missing, ", "), strings.Join(v1Controllers, ", "))
	}
	return l, nil
}

// dirIn returns the directory of cgroup p (a path as /proc/self/cgroup shows
// it) in mount m. Without a cgroup namespace a container's mount shows only
// part of the hierarchy (m.root), and p must lie inside it.
func dirIn(m mount, p string) (string, error) {
	if !under(p, m.root) {
		return "", fmt.Errorf("cgroup: cgroup %s is outside the part of the hierarchy mounted at %s (%s); set Options.Parent", p, m.point, m.root)
	}
	rel := strings.TrimPrefix(p, m.root)
	return path.Join(m.point, rel), nil
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
