package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"boxer/internal/sandbox/nsinit"
)

// Runtime is an interpreter as probed on the host, and what a sandbox must
// show of the host for it to run.
type Runtime struct {
	Name string // "python"
	// Path is the interpreter's real path (symlinks resolved); the
	// sandbox shows it at the same path.
	Path    string
	Version string   // "3.11.2"
	Aliases []string // argv[0] values that name this interpreter
	// Binds are the host directories and files the interpreter needs.
	Binds []string
}

// probeScript asks the interpreter where its stdlib, site-packages and
// configuration live. It runs on the host, once, with boxer's privileges,
// so it is a fixed script: never user input.
const probeScript = `import json, sys, sysconfig
print(json.dumps({"version": sys.version.split()[0], "path": sys.path,
  "multiarch": sysconfig.get_config_var("MULTIARCH") or "",
  "major_minor": "%d.%d" % sys.version_info[:2]}))`

// ProbePython runs the interpreter once and derives its runtime.
func ProbePython(ctx context.Context, python string, extra []string) (*Runtime, error) {
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return nil, fmt.Errorf("python runtime %s: %w", python, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// -I and an empty environment: only the interpreter's own paths, never
	// boxer's PYTHONPATH or root's user site-packages, which would
	// otherwise be bound into every sandbox.
	cmd := exec.CommandContext(ctx, real, "-I", "-c", probeScript)
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python runtime %s: probe: %w", python, err)
	}
	var p struct {
		Version    string   `json:"version"`
		Path       []string `json:"path"`
		Multiarch  string   `json:"multiarch"`
		MajorMinor string   `json:"major_minor"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("python runtime %s: probe output: %w", python, err)
	}
	want := []string{real}
	for _, d := range p.Path {
		if filepath.IsAbs(d) {
			want = append(want, d)
		}
	}
	if p.Multiarch != "" {
		want = append(want, "/usr/lib/"+p.Multiarch, "/lib/"+p.Multiarch)
	}
	want = append(want,
		"/usr/lib64", "/lib64", // the dynamic loader
		"/etc/ld.so.cache",
		"/etc/alternatives", // Debian's BLAS/LAPACK choice for numpy
		"/etc/python"+p.MajorMinor,
		"/etc/matplotlibrc",
		"/usr/share/matplotlib",
		"/usr/share/fonts",
		"/usr/share/zoneinfo",
	)
	want = append(want, extra...)
	return &Runtime{
		Name:    "python",
		Path:    real,
		Version: p.Version,
		Aliases: []string{"python", "python3", "python" + p.MajorMinor, filepath.Base(real)},
		Binds:   existing(want),
	}, nil
}

// existing resolves each path's symlinks, drops what does not exist and
// what another entry already covers, and sorts the rest.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		out = append(out, real)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	var kept []string
	for _, p := range out {
		if len(kept) > 0 && strings.HasPrefix(p, kept[len(kept)-1]+"/") {
			continue // inside the previous, already bound
		}
		kept = append(kept, p)
	}
	return kept
}

// Fixed identity of the sandbox.
const (
	Hostname = "sandbox"
	WorkDir  = "/work"
	UID      = 1000 // the program's uid and gid inside the sandbox
)

var etcFiles = []nsinit.File{
	{Path: "/etc/passwd", Mode: 0o644, Content: "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"sandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{Path: "/etc/group", Mode: 0o644, Content: "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"},
	{Path: "/etc/hosts", Mode: 0o644, Content: "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	// Names resolve from files only: there is no DNS to ask.
	{Path: "/etc/nsswitch.conf", Mode: 0o644, Content: "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n"},
	{Path: "/etc/hostname", Mode: 0o644, Content: Hostname + "\n"},
}

// hostSymlinks are top-level links a merged-/usr host has; a sandbox
// mirrors those the host has, so paths baked into binaries keep working.
var hostSymlinks = []string{"/bin", "/lib", "/lib64", "/sbin"}

// sysctls bound what a sandbox's user namespace may hold of budgets the
// kernel also charges to its creator, the host's root: inotify instances
// and watches, per uid. The seccomp policy refuses inotify outright (all
// sandboxes together would still spend root's 128 instances); the caps
// hold where seccomp is off.
var sysctls = map[string]string{
	"user/max_inotify_instances": "16",
	"user/max_inotify_watches":   "8192",
}

// devices are the host device nodes a sandbox's /dev holds.
var devices = []string{"null", "zero", "full", "random", "urandom"}

// setupTemplate is the part of a sandbox's Setup shared by every run.
func setupTemplate(rt *Runtime, tmpInodes int64) nsinit.Setup {
	s := nsinit.Setup{
		WorkDir:   WorkDir,
		Devices:   devices,
		TmpInodes: tmpInodes,
		Hostname:  Hostname,
		Files:     etcFiles,
		Sysctls:   sysctls,
	}
	for _, b := range rt.Binds {
		s.Binds = append(s.Binds, nsinit.Bind{Source: b, Target: b})
	}
	for _, l := range hostSymlinks {
		if target, err := os.Readlink(l); err == nil {
			s.Symlinks = append(s.Symlinks, nsinit.Symlink{Path: l, Target: target})
		}
	}
	dir := filepath.Dir(rt.Path)
	for _, a := range rt.Aliases {
		if p := filepath.Join(dir, a); p != rt.Path {
			s.Symlinks = append(s.Symlinks, nsinit.Symlink{Path: p, Target: filepath.Base(rt.Path)})
		}
	}
	s.Symlinks = append(s.Symlinks, nsinit.Symlink{Path: "/etc/localtime", Target: "/usr/share/zoneinfo/Etc/UTC"})
	return s
}

// programEnv is the program's whole environment: nothing of boxer's own.
func programEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		"USER=sandbox",
		"LOGNAME=sandbox",
		"LANG=C.UTF-8",
		// Output reaches the caller even when the run is killed at its
		// time limit, instead of dying in Python's buffer.
		"PYTHONUNBUFFERED=1",
		// No __pycache__ directories among the caller's files.
		"PYTHONDONTWRITEBYTECODE=1",
		"MPLBACKEND=Agg",
	}
}
