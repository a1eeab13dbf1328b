package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestV2NewEnablesControllers(t *testing.T) {
	tests := []struct {
		name          string
		parentEnabled string
		wantParent    string // content of the parent's subtree_control after New
		wantWrites    []string
	}{
		{
			name:          "nothing enabled",
			parentEnabled: "\n",
			wantParent:    "cpu memory pids\n",
			wantWrites: []string{
				"/system.slice/boxer.service/cgroup.subtree_control=+cpu +memory +pids",
				"/system.slice/boxer.service/b/cgroup.subtree_control=+cpu +memory +pids",
			},
		},
		{
			name:          "some enabled",
			parentEnabled: "io memory\n",
			wantParent:    "cpu io memory pids\n",
			wantWrites: []string{
				"/system.slice/boxer.service/cgroup.subtree_control=+cpu +pids",
				"/system.slice/boxer.service/b/cgroup.subtree_control=+cpu +memory +pids",
			},
		},
		{
			name:          "all enabled: the parent is not written",
			parentEnabled: "cpu io memory pids\n",
			wantParent:    "cpu io memory pids\n",
			wantWrites: []string{
				"/system.slice/boxer.service/b/cgroup.subtree_control=+cpu +memory +pids",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(t)
			f.set(f.parent, "cgroup.subtree_control", tt.parentEnabled)
			m := f.newManager("b")
			if m.Version() != V2 {
				t.Errorf("Version = %v, want v2", m.Version())
			}
			if got := f.get(f.parent, "cgroup.subtree_control"); got != tt.wantParent {
				t.Errorf("parent cgroup.subtree_control = %q, want %q", got, tt.wantParent)
			}
			if got := f.get(f.parent+"/b", "cgroup.subtree_control"); got != "cpu memory pids\n" {
				t.Errorf("base cgroup.subtree_control = %q, want %q", got, "cpu memory pids\n")
			}
			assertEqualLists(t, "writes", f.written(), tt.wantWrites)
		})
	}
}

func TestV2NewNoInternalProcesses(t *testing.T) {
	tests := []struct {
		name    string
		parent  string // Options.Parent
		wantErr string
	}{
		{name: "own cgroup: boxer moves into a supervisor leaf"},
		{name: "other parent: boxer does not move", parent: "/system.slice", wantErr: "holds processes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(t)
			f.set("/system.slice", "cgroup.controllers", "cpu memory pids\n")
			parent := f.parent
			if tt.parent != "" {
				parent = tt.parent
			}
			// The kernel refuses to enable controllers in a cgroup while it
			// has processes: until boxer has moved out.
			moved := false
			f.onWrite = func(file, data string) error {
				switch file {
				case parent + "/cgroup.subtree_control":
					if !moved {
						return unix.EBUSY
					}
				case parent + "/b-supervisor/cgroup.procs":
					moved = true
				}
				return errSkip
			}
			opts := f.options("b")
			opts.Parent = tt.parent
			_, err := New(opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, unix.EBUSY) {
					t.Fatalf("New error = %v, want EBUSY and %q", err, tt.wantErr)
				}
				if _, err := os.Stat(f.dir(parent + "/b-supervisor")); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("supervisor cgroup made although boxer does not live in %s: %v", parent, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := f.get(parent+"/b-supervisor", "cgroup.procs"); got != "4242" {
				t.Errorf("supervisor cgroup.procs = %q, want boxer's pid 4242", got)
			}
			if got := f.get(parent, "cgroup.subtree_control"); got != "cpu memory pids\n" {
				t.Errorf("parent cgroup.subtree_control = %q", got)
			}
		})
	}
}

func TestV2NewControllersNotDelegated(t *testing.T) {
	f := newFakeV2(t)
	f.set(f.parent, "cgroup.controllers", "cpu io\n")
	_, err := New(f.options("b"))
	for _, want := range []string{"boxer needs the cpu, memory, pids controllers", `lists only "cpu io" (missing: memory, pids)`, "Delegate=yes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error = %v, want one containing %q", err, want)
		}
	}
}

func TestV2Set(t *testing.T) {
	tests := []struct {
		name   string
		noSwap bool // a kernel without swap support has no memory.swap.max
		r      Resources
		want   map[string]string
	}{
		{
			name: "all limits",
			r:    Resources{CPUs: 0.5, MemoryBytes: 128 << 20, Pids: 32},
			want: map[string]string{"cpu.max": "50000 100000", "memory.max": "134217728", "memory.swap.max": "0", "pids.max": "32", "cpu.weight": "100"},
		},
		{
			name: "unlimited",
			r:    Resources{},
			want: map[string]string{"cpu.max": "max 100000", "memory.max": "max", "memory.swap.max": "0", "pids.max": "max"},
		},
		{
			name: "two cores, quota rounded",
			r:    Resources{CPUs: 2.0000004},
			want: map[string]string{"cpu.max": "200000 100000", "memory.max": "max", "memory.swap.max": "0", "pids.max": "max"},
		},
		{
			name: "tiny quota raised to the kernel minimum",
			r:    Resources{CPUs: 0.001, Pids: 1},
			want: map[string]string{"cpu.max": "1000 100000", "memory.max": "max", "memory.swap.max": "0", "pids.max": "1"},
		},
		{
			name: "low weight",
			r:    Resources{Weight: 10},
			want: map[string]string{"cpu.max": "max 100000", "cpu.weight": "10"},
		},
		{
			name:   "no swap file",
			noSwap: true,
			r:      Resources{MemoryBytes: 64 << 20},
			want:   map[string]string{"cpu.max": "max 100000", "memory.max": "67108864", "pids.max": "max"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(t)
			if tt.noSwap {
				delete(f.files, "memory.swap.max")
			}
			m := f.newManager("b")
			c, err := m.Create("run", tt.r)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			t.Cleanup(func() { destroy(t, c) })
			for name, want := range tt.want {
				if got := f.get(f.parent+"/b/run", name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if _, err := os.Stat(filepath.Join(c.Path(), "memory.swap.max")); tt.noSwap && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("memory.swap.max was created: %v", err)
			}
		})
	}
}

// A Set writes only the control files whose value changes, and a write
// that failed is tried again by the next Set.
func TestV2SetWritesOnlyChanges(t *testing.T) {
	f := newFakeV2(t)
	r := Resources{CPUs: 1, MemoryBytes: 64 << 20, Pids: 16, Weight: 10}
	c := f.createRun(r)
	run := f.parent + "/b/run/"
	steps := []struct {
		name    string
		r       Resources
		failing string // a control file whose write fails in this step
		want    []string
	}{
		{"same again", r, "", nil},
		{"the job's weight", Resources{CPUs: 1, MemoryBytes: 64 << 20, Pids: 16}, "", []string{run + "cpu.weight=100"}},
		{"pids fails", Resources{CPUs: 1, MemoryBytes: 64 << 20, Pids: 8}, "pids.max", []string{run + "pids.max=8"}},
		{"pids retried", Resources{CPUs: 1, MemoryBytes: 64 << 20, Pids: 8}, "", []string{run + "pids.max=8"}},
		{"memory and cpu", Resources{CPUs: 0.5, MemoryBytes: 32 << 20, Pids: 8}, "", []string{run + "cpu.max=50000 100000", run + "memory.max=33554432"}},
	}
	for _, st := range steps {
		before := len(f.written())
		f.onWrite = func(file, data string) error {
			if st.failing != "" && strings.HasSuffix(file, "/"+st.failing) {
				return unix.EIO
			}
			return errSkip
		}
		err := c.Set(st.r)
		if (err != nil) != (st.failing != "") {
			t.Errorf("%s: Set = %v, want failure %v", st.name, err, st.failing != "")
		}
		if got := f.written()[before:]; !slices.Equal(got, st.want) {
			t.Errorf("%s: wrote %q, want %q", st.name, got, st.want)
		}
	}
	if got := f.get(run, "pids.max"); got != "8" {
		t.Errorf("pids.max = %q, want 8", got)
	}
}

func TestV2SetInvalid(t *testing.T) {
	f := newFakeV2(t)
	c := f.createRun(Resources{})
	for _, r := range []Resources{{CPUs: -1}, {MemoryBytes: -1}, {Pids: -5}} {
		if err := c.Set(r); err == nil {
			t.Errorf("Set(%+v) succeeded, want an error", r)
		}
	}
	// A write the kernel rejects is reported with the file.
	f.onWrite = func(file, data string) error {
		if strings.HasSuffix(file, "/memory.max") {
			return unix.EINVAL
		}
		return errSkip
	}
	err := c.Set(Resources{MemoryBytes: 1})
	want := "cgroup: write " + c.Path() + "/memory.max: invalid argument"
	if err == nil || err.Error() != want || !errors.Is(err, unix.EINVAL) {
		t.Errorf("Set error = %v, want %q", err, want)
	}
}

func TestV2CreateName(t *testing.T) {
	f := newFakeV2(t)
	m := f.newManager("b")
	for _, name := range []string{"", ".", "..", "a/b", "../escape"} {
		if _, err := m.Create(name, Resources{}); err == nil {
			t.Errorf("Create(%q) succeeded, want an error", name)
		}
	}
	c, err := m.Create("dup", Resources{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { destroy(t, c) })
	if _, err := m.Create("dup", Resources{}); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "CleanupStale") {
		t.Errorf("second Create(dup) error = %v, want EEXIST mentioning CleanupStale", err)
	}
	if !isDir(c.Path()) {
		t.Errorf("failed second Create removed the first cgroup")
	}
}

func TestV2Stats(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string // written over kernelFiles; "" removes
		want    Stats
		wantErr string
	}{
		{
			name: "all files",
			files: map[string]string{
				"memory.peak":   "67108864\n",
				"memory.events": "low 0\nhigh 0\nmax 17\noom 2\noom_kill 2\noom_group_kill 0\n",
				"cpu.stat":      "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\nnr_periods 3\n",
			},
			want: Stats{MemoryPeak: 64 << 20, OOMKills: 2, CPU: 1234567 * time.Microsecond},
		},
		{
			name:  "kernel before 5.19: no memory.peak",
			files: map[string]string{"memory.peak": "", "cpu.stat": "usage_usec 5\n"},
			want:  Stats{CPU: 5 * time.Microsecond},
		},
		{
			name:    "cpu.stat without usage_usec",
			files:   map[string]string{"cpu.stat": "user_usec 1\n"},
			wantErr: `/b/run/cpu.stat: no "usage_usec" line`,
		},
		{
			name:    "garbled memory.peak",
			files:   map[string]string{"memory.peak": "lots\n"},
			wantErr: `/b/run/memory.peak: strconv.ParseInt`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeV2(t)
			c, err := f.newManager("b").Create("run", Resources{})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			t.Cleanup(func() { destroy(t, c) })
			for name, data := range tt.files {
				if data == "" {
					if err := os.Remove(filepath.Join(c.Path(), name)); err != nil {
						t.Fatal(err)
					}
					continue
				}
				f.set(f.parent+"/b/run", name, data)
			}
			got, err := c.Stats()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Stats error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			if got != tt.want {
				t.Errorf("Stats = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Tasks reads pids.current.
func TestV2Tasks(t *testing.T) {
	f := newFakeV2(t)
	c := f.createRun(Resources{})
	f.set(f.parent+"/b/run", "pids.current", "3\n")
	if n, err := c.Tasks(); err != nil || n != 3 {
		t.Errorf("Tasks = %d, %v; want 3", n, err)
	}
}

func TestV2Kill(t *testing.T) {
	t.Run("cgroup.kill", func(t *testing.T) {
		f := newFakeV2(t)
		c, err := f.newManager("b").Create("run", Resources{})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		ev := &events{f: f, p: f.parent + "/b/run"}
		ev.update(1, 0)
		f.onWrite = func(file, data string) error {
			if file == f.parent+"/b/run/cgroup.kill" && data == "1" {
				ev.update(0, -1)
			}
			return errSkip
		}
		if err := c.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		if got := f.get(f.parent+"/b/run", "cgroup.kill"); got != "1" {
			t.Errorf("cgroup.kill = %q, want 1", got)
		}
		if err := c.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		if isDir(c.Path()) {
			t.Errorf("%s still exists after Destroy", c.Path())
		}
		if fd, ok := c.FD(); ok || fd != -1 {
			t.Errorf("FD after Destroy = %d, %v; want -1, false", fd, ok)
		}
		if err := c.Destroy(); err != nil {
			t.Errorf("second Destroy: %v", err)
		}
	})

	t.Run("never empties", func(t *testing.T) {
		f := newFakeV2(t)
		opts := f.options("b")
		opts.hooks.killTimeout = 20 * time.Millisecond
		m, err := New(opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		c, err := m.Create("run", Resources{})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		f.set(f.parent+"/b/run", "cgroup.events", "populated 1\nfrozen 0\n")
		if err := c.Kill(); err == nil || !strings.Contains(err.Error(), "still populated") {
			t.Errorf("Kill error = %v, want one saying the cgroup is still populated", err)
		}
		if err := c.Destroy(); err == nil {
			t.Errorf("Destroy of a populated cgroup succeeded")
		}
		if !isDir(c.Path()) {
			t.Errorf("Destroy removed a populated cgroup")
		}
	})

	t.Run("freezer fallback before Linux 5.14", func(t *testing.T) {
		f := newFakeV2(t)
		delete(f.files, "cgroup.kill")
		c, err := f.newManager("b").Create("run", Resources{})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		t.Cleanup(func() { destroy(t, c) })
		// A real process stands in for the run; the fake kernel reports
		// the cgroup empty once it has died.
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.set(f.parent+"/b/run", "cgroup.procs", strconv.Itoa(cmd.Process.Pid)+"\n")
		ev := &events{f: f, p: f.parent + "/b/run"}
		ev.update(1, 0)
		f.onWrite = func(file, data string) error {
			if file == f.parent+"/b/run/cgroup.freeze" {
				ev.update(-1, map[string]int{"1": 1, "0": 0}[data])
			}
			return errSkip
		}
		waited := make(chan error, 1)
		go func() {
			err := cmd.Wait()
			ev.update(0, -1)
			waited <- err
		}()
		if err := c.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		if err := <-waited; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("sleep ended with %v, want killed", err)
		}
		if got := f.get(f.parent+"/b/run", "cgroup.freeze"); got != "0" {
			t.Errorf("cgroup.freeze = %q after Kill, want 0 (thawed)", got)
		}
		w := f.written()
		if !slices.Contains(w, f.parent+"/b/run/cgroup.freeze=1") {
			t.Errorf("writes %q never froze the cgroup", w)
		}
	})
}

func TestV2CleanupStale(t *testing.T) {
	f := newFakeV2(t)
	old := f.newManager("b")
	for _, name := range []string{"run1", "run2"} {
		if _, err := old.Create(name, Resources{Pids: 4}); err != nil {
			t.Fatalf("Create(%s): %v", name, err)
		}
	}
	if err := f.mkdir(f.dir(f.parent + "/b/run1/nested")); err != nil {
		t.Fatal(err)
	}
	if err := f.mkdir(f.dir(f.parent + "/b-supervisor")); err != nil {
		t.Fatal(err)
	}
	ev := &events{f: f, p: f.parent + "/b"}
	ev.update(1, 0)
	f.onWrite = func(file, data string) error {
		if file == f.parent+"/b/cgroup.kill" {
			ev.update(0, -1)
		}
		return errSkip
	}

	m := f.newManager("b")
	if err := m.CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	if subs, _ := subdirs(m.base); len(subs) != 0 {
		t.Errorf("base still holds %v", subs)
	}
	if !isDir(m.base) || !isDir(f.dir(f.parent+"/b-supervisor")) {
		t.Errorf("CleanupStale removed the base or the supervisor leaf")
	}
	if !slices.Contains(f.written(), f.parent+"/b/cgroup.kill=1") {
		t.Errorf("CleanupStale did not kill the base's subtree")
	}
}

func TestV2Check(t *testing.T) {
	f := newFakeV2(t)
	m := f.newManager("b")
	if err := m.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if subs, _ := subdirs(m.base); len(subs) != 0 {
		t.Errorf("Check left %v behind", subs)
	}
	f.set(f.parent+"/b", "cgroup.subtree_control", "cpu memory\n")
	if err := m.Check(); err == nil || !strings.Contains(err.Error(), "pids controller is not enabled") {
		t.Errorf("Check error = %v, want one about pids", err)
	}
	f.set(f.parent, "cgroup.controllers", "memory\n")
	if err := m.Check(); err == nil || !strings.Contains(err.Error(), "Delegate=yes") {
		t.Errorf("Check error = %v, want one explaining delegation", err)
	}
}

func TestV2FD(t *testing.T) {
	f := newFakeV2(t)
	c, err := f.newManager("b").Create("run", Resources{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { destroy(t, c) })
	fd, ok := c.FD()
	if !ok {
		t.Fatal("FD() = false on v2")
	}
	var st, want unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(c.Path(), &want); err != nil {
		t.Fatal(err)
	}
	if st.Ino != want.Ino || st.Dev != want.Dev {
		t.Errorf("FD refers to inode %d, want %s (%d)", st.Ino, c.Path(), want.Ino)
	}
}
