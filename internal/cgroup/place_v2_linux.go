package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// placeV2 finds the home: the cgroup under which boxer may create the base
// and enable the cpu, memory and pids controllers for it. On return the
// controllers are enabled in the home's cgroup.subtree_control, and boxer
// sits where the kernel's "no internal processes" rule allows that: a
// cgroup that holds processes cannot enable controllers for its children
// (the root cgroup excepted).
//
// The first way that applies is taken:
//
//   - Options.Parent: that cgroup, which must hold no process but boxer.
//   - boxer's own cgroup, when enabling works there (the host's root
//     cgroup, or a cgroup already set up by an earlier boxer).
//   - boxer's own cgroup, when boxer is its only process (a systemd unit
//     with Delegate=yes, a container whose entrypoint is boxer): boxer
//     moves into the leaf <home>/<name>-supervisor.
//   - boxer's own cgroup, when it is the root of a cgroup namespace (a
//     container with an init beside boxer, as with docker run --init):
//     every process of the container moves into the supervisor leaf, as
//     docker-in-docker's entrypoint does. They are the container's own.
//   - a systemd transient scope <name>-<pid>.scope with Delegate=yes, made
//     through systemd's D-Bus API, when systemd runs and boxer shares its
//     cgroup with other processes (a login shell's session-N.scope). boxer
//     alone moves into the scope, then into its supervisor leaf.
//   - without systemd, a cgroup <name> that boxer creates beside its own,
//     moving only itself into its supervisor leaf.
//
// Without systemd, boxer also enables the controllers in the cgroups above
// its home where they are not (a hand-made slice without cpu, say): no one
// else would.
//
// The other processes of boxer's cgroup are never moved, except in a
// cgroup namespace's root. The returned sentence says which way was taken.
func placeV2(f fsys, l layout, opts Options) (home, how string, err error) {
	name := opts.Name
	if l.v2Parent != l.v2Self {
		if err := available(l.v2Parent); err != nil {
			return "", "", err
		}
		err := enableControllers(f, l.v2Parent)
		if errors.Is(err, unix.EBUSY) {
			return "", "", fmt.Errorf("%w: %s (--cgroup-parent) holds processes, and a cgroup with processes cannot enable controllers for its children; name an empty cgroup, or none and let boxer find its own", err, l.v2Parent)
		}
		return l.v2Parent, "the cgroup named by --cgroup-parent", err
	}
	self := l.v2Self
	// A second Manager in one process (doctor's probe, then the engine;
	// tests) finds boxer in the leaf the first one moved it to.
	if up := filepath.Dir(self); strings.HasSuffix(self, "-supervisor") && enabled(up) {
		return up, "the cgroup above " + filepath.Base(self) + ", which boxer had already moved into", nil
	}
	err = enableControllers(f, self)
	if err == nil {
		return self, "boxer's own cgroup: the host's root cgroup, or one whose controllers were already enabled", nil
	}
	// EBUSY: self holds processes. ENOENT: the cgroup above does not hand
	// the controllers down to self.
	if !errors.Is(err, unix.EBUSY) && !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	others, err := otherProcs(f, self)
	if err != nil {
		return "", "", err
	}
	nsRoot := self == filepath.Clean(opts.Root)
	systemd := f.systemd()
	switch {
	case len(others) == 0 || nsRoot:
		// Without systemd, nothing above would hand the controllers down
		// to a cgroup it made by hand; systemd's units are for systemd to
		// configure (Delegate=yes), and a namespace has no above.
		if !systemd && !nsRoot {
			if err := handDown(f, opts.Root, self); err != nil {
				return "", "", err
			}
		}
		if err := available(self); err != nil {
			return "", "", err
		}
		if err := settle(f, self, name, append(others, f.h.pid), nsRoot); err != nil {
			return "", "", err
		}
		if nsRoot && len(others) > 0 {
			return self, fmt.Sprintf("the root of boxer's cgroup namespace (a container's); its %d processes moved into %s-supervisor", len(others)+1, name), nil
		}
		return self, "boxer's own cgroup, which held no other process; boxer moved into " + name + "-supervisor", nil
	case systemd:
		unit := name + "-" + strconv.Itoa(f.h.pid) + ".scope"
		if err := f.startScope(unit); err != nil {
			return "", "", fmt.Errorf("%w; boxer's cgroup %s holds %d other processes, so boxer asked systemd for a scope of its own. Run boxer as a systemd service with Delegate=yes (deploy/systemd/boxer.service), or start it with systemd-run -p Delegate=yes", err, self, len(others))
		}
		scope, err := selfV2(opts)
		if err != nil {
			return "", "", err
		}
		if err := settle(f, scope, name, []int{f.h.pid}, false); err != nil {
			return "", "", err
		}
		return scope, fmt.Sprintf("the systemd transient scope %s (Delegate=yes): boxer's cgroup %s held %d other processes", unit, self, len(others)), nil
	}
	beside := filepath.Join(filepath.Dir(self), name)
	if err := handDown(f, opts.Root, beside); err != nil {
		return "", "", err
	}
	if err := f.mkdir(beside); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", "", err
	}
	if err := settle(f, beside, name, []int{f.h.pid}, false); err != nil {
		return "", "", err
	}
	return beside, fmt.Sprintf("a cgroup boxer made beside its own: %s held %d other processes", self, len(others)), nil
}

// handDown enables the controllers in every cgroup from root down to dir's
// parent, so that dir gets them. Those cgroups must hold no process (the
// root excepted): they are slices, never leaves.
func handDown(f fsys, root, dir string) error {
	root = filepath.Clean(root)
	var chain []string
	for p := filepath.Dir(dir); under(p, root); p = filepath.Dir(p) {
		chain = append([]string{p}, chain...)
		if p == root {
			break
		}
	}
	for _, p := range chain {
		if err := enableControllers(f, p); err != nil {
			return fmt.Errorf("%w (enabling them down to %s)", err, dir)
		}
	}
	return nil
}

// settle moves pids into the leaf <home>/<name>-supervisor and enables the
// controllers in home. With all, every process of home is to move: they may
// fork while they are moved, so it goes round while enabling still finds
// home busy, a bounded number of times. Without it, a process that joined
// home meanwhile is not boxer's to move, and home stays busy.
func settle(f fsys, home, name string, pids []int, all bool) error {
	leaf := filepath.Join(home, name+"-supervisor")
	if err := f.mkdir(leaf); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	for range 5 {
		for _, pid := range pids {
			// A process that exited meanwhile is gone: ESRCH is not a
			// failure.
			if err := f.write(procs, strconv.Itoa(pid)); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
		err := enableControllers(f, home)
		if !errors.Is(err, unix.EBUSY) {
			return err
		}
		if !all {
			return fmt.Errorf("%w: %s holds processes other than boxer, and a cgroup with processes cannot enable controllers for its children", err, home)
		}
		if pids, err = readPids(filepath.Join(home, "cgroup.procs")); err != nil {
			return err
		}
	}
	return fmt.Errorf("cgroup: %s still holds processes after moving them into %s: something keeps starting new ones there", home, leaf)
}

// otherProcs lists the processes of cgroup dir other than boxer.
func otherProcs(f fsys, dir string) ([]int, error) {
	pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(pids, func(p int) bool { return p == f.h.pid }), nil
}

// selfV2 detects boxer's own v2 cgroup directory again, after systemd moved
// it.
func selfV2(opts Options) (string, error) {
	mountInfo, err := readFile(opts.MountInfo)
	if err != nil {
		return "", err
	}
	self, err := readFile(opts.ProcSelfCgroup)
	if err != nil {
		return "", err
	}
	l, err := detectLayout(opts.Root, "", mountInfo, self)
	if err != nil {
		return "", err
	}
	return l.v2Self, nil
}
