package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// obeyKernel makes the fake keep the rules of cgroup.procs and
// cgroup.subtree_control that placement is about: a process is in exactly
// one cgroup; a cgroup can enable for its children only the controllers its
// parent enabled for it (cgroup.controllers); and a cgroup other than the
// real root cannot enable controllers while it holds processes. join, when
// set, runs after each move, e.g. to let another process arrive.
func (f *fakeV2) obeyKernel(realRoot bool, join func()) {
	f.onWrite = func(file, data string) error {
		dir := filepath.Dir(file)
		switch filepath.Base(file) {
		case "cgroup.subtree_control":
			have := strings.Fields(f.get(dir, "cgroup.controllers"))
			for _, tok := range strings.Fields(data) {
				if !slices.Contains(have, tok[1:]) {
					return unix.ENOENT
				}
			}
			if (dir != "/" || !realRoot) && strings.TrimSpace(f.get(dir, "cgroup.procs")) != "" {
				return unix.EBUSY
			}
			if err := subtreeControl(filepath.Join(f.dir(dir), "cgroup.subtree_control"), data); err != nil {
				return err
			}
			subs, err := subdirs(f.dir(dir))
			if err != nil {
				return err
			}
			for _, sub := range subs {
				f.set(filepath.Join(dir, sub), "cgroup.controllers", f.get(dir, "cgroup.subtree_control"))
			}
			return nil
		case "cgroup.procs":
			f.move(data, dir)
			if join != nil {
				join()
			}
			return nil
		}
		return errSkip
	}
}

// move takes pid out of every cgroup's cgroup.procs and adds it to dir's.
func (f *fakeV2) move(pid, dir string) {
	f.t.Helper()
	err := filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		pids := slices.DeleteFunc(strings.Fields(string(b)), func(s string) bool { return s == pid })
		if filepath.Dir(p) == f.dir(dir) {
			pids = append(pids, pid)
		}
		return os.WriteFile(p, []byte(strings.Join(pids, "\n")), 0o644)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// mkdirObeying makes a cgroup whose cgroup.controllers are what its
// parent's subtree_control enables, as the kernel does.
func (f *fakeV2) mkdirObeying(dir string) error {
	if err := f.mkdir(dir); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.controllers"), b, 0o644)
}

// mkdirs makes cgroup p and those above it that are missing.
func (f *fakeV2) mkdirs(p string) {
	f.t.Helper()
	for _, q := range ancestors(p) {
		if err := f.mkdir(f.dir(q)); err != nil && !errors.Is(err, fs.ErrExist) {
			f.t.Fatal(err)
		}
	}
}

func ancestors(p string) []string {
	var out []string
	for q := p; q != "/"; q = filepath.Dir(q) {
		out = append([]string{q}, out...)
	}
	return out
}

var errAccessDenied = errors.New("access denied")

func TestV2Placement(t *testing.T) {
	const session = "/user.slice/user-0.slice/session-1.scope"
	tests := []struct {
		name      string
		self      string // boxer's cgroup
		procs     string // its processes when boxer starts
		realRoot  bool   // self is the host's root cgroup, not a namespace's
		noSystemd bool   // systemd is not running
		systemd   error  // what the fake systemd answers; nil: it starts the scope
		slices    string // what the slices above self enable ("": all three)
		parent    string // Options.Parent
		joiner    bool   // another process joins self while boxer moves
		enabled   string // a cgroup whose controllers are enabled already

		wantHome   string
		wantHow    string
		wantErr    string
		wantErrIs  error             // default EBUSY
		wantProcs  map[string]string // cgroup.procs of cgroups after New
		wantAbsent []string          // cgroups that must not exist
	}{
		{
			name: "delegated unit: boxer alone moves into its supervisor leaf",
			self: "/system.slice/boxer.service", procs: "4242",
			wantHome: "/system.slice/boxer.service", wantHow: "held no other process",
			wantProcs: map[string]string{"/system.slice/boxer.service/b-supervisor": "4242", "/system.slice/boxer.service": ""},
		},
		{
			name: "login shell under systemd: a delegated transient scope",
			self: session, procs: "1000\n1001\n4242",
			wantHome: "/system.slice/b-4242.scope", wantHow: "systemd transient scope b-4242.scope",
			wantProcs:  map[string]string{session: "1000\n1001", "/system.slice/b-4242.scope/b-supervisor": "4242", "/system.slice/b-4242.scope": ""},
			wantAbsent: []string{"/user.slice/user-0.slice/b"},
		},
		{
			name: "login shell under systemd, whose slices lack cpu: the scope has it",
			self: session, procs: "1000\n4242", slices: "memory pids",
			wantHome: "/system.slice/b-4242.scope", wantHow: "systemd transient scope b-4242.scope",
			wantProcs: map[string]string{session: "1000", "/system.slice/b-4242.scope/b-supervisor": "4242"},
		},
		{
			name: "login shell without systemd: a cgroup beside its own",
			self: session, procs: "1000\n4242", noSystemd: true,
			wantHome: "/user.slice/user-0.slice/b", wantHow: "a cgroup boxer made beside its own",
			wantProcs: map[string]string{session: "1000", "/user.slice/user-0.slice/b/b-supervisor": "4242"},
		},
		{
			name: "without systemd, slices lacking cpu: boxer enables it down to its cgroup",
			self: session, procs: "1000\n4242", noSystemd: true, slices: "memory pids",
			wantHome: "/user.slice/user-0.slice/b", wantHow: "a cgroup boxer made beside its own",
			wantProcs: map[string]string{session: "1000", "/user.slice/user-0.slice/b/b-supervisor": "4242"},
		},
		{
			name: "systemd refuses the scope: an error that says what to do, nothing moved",
			self: session, procs: "1000\n4242", systemd: errAccessDenied,
			wantErr: "Delegate=yes", wantErrIs: errAccessDenied,
			wantProcs:  map[string]string{session: "1000\n4242"},
			wantAbsent: []string{"/user.slice/user-0.slice/b"},
		},
		{
			name: "container with an init: the namespace's processes move",
			self: "/", procs: "1\n4242",
			wantHome: "/", wantHow: "root of boxer's cgroup namespace",
			wantProcs: map[string]string{"/": "", "/b-supervisor": "1\n4242"},
		},
		{
			name: "host's root cgroup: nothing moves",
			self: "/", procs: "1\n4242", realRoot: true,
			wantHome: "/", wantHow: "boxer's own cgroup",
			wantProcs:  map[string]string{"/": "1\n4242"},
			wantAbsent: []string{"/b-supervisor"},
		},
		{
			name: "a second manager in one process: boxer stays in its leaf",
			self: "/system.slice/boxer.service/a-supervisor", procs: "4242", enabled: "/system.slice/boxer.service",
			wantHome: "/system.slice/boxer.service", wantHow: "above a-supervisor, which boxer had already moved into",
			wantProcs:  map[string]string{"/system.slice/boxer.service/a-supervisor": "4242"},
			wantAbsent: []string{"/system.slice/boxer.service/a-supervisor/b-supervisor", "/system.slice/boxer.service/b-supervisor"},
		},
		{
			name: "--cgroup-parent with processes: refused, nothing moves",
			self: session, procs: "1000\n4242", parent: "/system.slice/busy.service",
			wantErr:    "holds processes",
			wantProcs:  map[string]string{session: "1000\n4242"},
			wantAbsent: []string{"/system.slice/busy.service/b-supervisor", "/system.slice/busy.service/b"},
		},
		{
			name: "a process joins boxer's cgroup as it moves out: refused, not moved",
			self: "/system.slice/boxer.service", procs: "4242", joiner: true,
			wantErr:   "holds processes other than boxer",
			wantProcs: map[string]string{"/system.slice/boxer.service": "555", "/system.slice/boxer.service/b-supervisor": "4242"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(t)
			slices := tt.slices
			if slices == "" {
				slices = "cpu memory pids"
			}
			f.set("/", "cgroup.subtree_control", "cpu memory pids\n")
			for _, p := range []string{"/system.slice", "/user.slice", "/user.slice/user-0.slice"} {
				f.mkdirs(p)
				f.set(p, "cgroup.subtree_control", slices+"\n")
			}
			f.set("/system.slice", "cgroup.subtree_control", "cpu memory pids\n")
			f.mkdirs(tt.self)
			if tt.self == "/" && !tt.realRoot {
				// A namespace's root holds processes: nothing is enabled.
				f.set("/", "cgroup.subtree_control", "\n")
			}
			if tt.self != "/" {
				f.set(tt.self, "cgroup.controllers", f.get(filepath.Dir(tt.self), "cgroup.subtree_control"))
			}
			f.mkdirs("/system.slice/busy.service")
			f.set("/system.slice/busy.service", "cgroup.procs", "900")
			f.set(f.parent, "cgroup.procs", "")
			f.set(tt.self, "cgroup.procs", tt.procs)
			if tt.enabled != "" {
				f.set(tt.enabled, "cgroup.subtree_control", "cpu memory pids\n")
			}
			f.writeAux("self-cgroup", "0::"+tt.self+"\n")
			joined := false
			f.obeyKernel(tt.realRoot, func() {
				if tt.joiner && !joined {
					joined = true
					f.set(tt.self, "cgroup.procs", f.get(tt.self, "cgroup.procs")+"555")
				}
			})
			opts := f.options("b")
			opts.Parent = tt.parent
			opts.hooks.mkdir = f.mkdirObeying
			opts.hooks.noSystemd = tt.noSystemd
			opts.hooks.startScope = func(unit string, pid int) error {
				if tt.systemd != nil {
					return tt.systemd
				}
				scope := "/system.slice/" + unit
				f.mkdirs(scope)
				f.move(strconv.Itoa(pid), scope)
				f.writeAux("self-cgroup", "0::"+scope+"\n")
				return nil
			}
			m, err := New(opts)
			if tt.wantErr != "" {
				is := tt.wantErrIs
				if is == nil {
					is = unix.EBUSY
				}
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, is) {
					t.Fatalf("New error = %v, want %v and %q", err, is, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				p := m.Placement()
				if want := filepath.Join(f.dir(tt.wantHome), "b"); p.Base != want {
					t.Errorf("Base = %s, want %s", p.Base, want)
				}
				if !strings.Contains(p.How, tt.wantHow) {
					t.Errorf("How = %q, want it to contain %q", p.How, tt.wantHow)
				}
				if got := f.get(tt.wantHome+"/b", "cgroup.subtree_control"); got != "cpu memory pids\n" {
					t.Errorf("base's subtree_control = %q", got)
				}
			}
			for cg, want := range tt.wantProcs {
				if got := f.get(cg, "cgroup.procs"); got != want {
					t.Errorf("%s cgroup.procs = %q, want %q", cg, got, want)
				}
			}
			for _, cg := range tt.wantAbsent {
				if _, err := os.Stat(f.dir(cg)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s exists (%v); boxer should not have made it", cg, err)
				}
			}
		})
	}
}
