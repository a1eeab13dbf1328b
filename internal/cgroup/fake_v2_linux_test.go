package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeV2 is a cgroup v2 tree of plain files in t.TempDir(). New cgroups get
// the control files a kernel would make; writes are recorded, and a test can
// make a write fail or react to it the way the kernel would.
type fakeV2 struct {
	t      *testing.T
	root   string // stands in for /sys/fs/cgroup
	parent string // boxer's own cgroup, "/system.slice/boxer.service"
	// files are the control files of each new cgroup, with their content.
	files map[string]string

	mu sync.Mutex
	// writes are the writes made, "rel/path=data", in order.
	writes []string
	// onWrite, when set, runs instead of the write; returning errSkip lets
	// the write through.
	onWrite func(file, data string) error
}

var errSkip = errors.New("let the write through")

// kernelFiles are the control files of a non-root cgroup on Linux 6.x with
// the cpu, memory and pids controllers enabled.
func kernelFiles() map[string]string {
	return map[string]string{
		"cgroup.controllers":     "cpu memory pids\n",
		"cgroup.subtree_control": "\n",
		"cgroup.procs":           "",
		"cgroup.events":          "populated 0\nfrozen 0\n",
		"cgroup.freeze":          "0\n",
		"cgroup.kill":            "",
		"cpu.max":                "max 100000\n",
		"cpu.weight":             "100\n",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
		"memory.max":             "max\n",
		"memory.swap.max":        "max\n",
		"memory.peak":            "0\n",
		"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
		"pids.max":               "max\n",
		"pids.current":           "0\n",
	}
}

func newFakeV2(t *testing.T) *fakeV2 {
	t.Helper()
	f := &fakeV2{t: t, root: filepath.Join(t.TempDir(), "cgroup"), parent: "/system.slice/boxer.service", files: kernelFiles()}
	for _, dir := range []string{f.root, f.root + "/system.slice", f.dir(f.parent)} {
		if err := f.mkdir(dir); err != nil {
			t.Fatal(err)
		}
	}
	f.set(f.parent, "cgroup.controllers", "cpu io memory pids\n")
	f.set(f.parent, "cgroup.procs", "4242\n")
	f.set(f.parent, "cgroup.events", "populated 1\nfrozen 0\n")
	mountInfo := "25 1 0:22 / " + f.root + " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	f.writeAux("mountinfo", mountInfo)
	f.writeAux("self-cgroup", "0::"+f.parent+"\n")
	return f
}

func (f *fakeV2) writeAux(name, data string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(filepath.Dir(f.root), name), []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// options point New at the fake.
func (f *fakeV2) options(name string) Options {
	return Options{
		Root:           f.root,
		Name:           name,
		ProcSelfCgroup: filepath.Join(filepath.Dir(f.root), "self-cgroup"),
		MountInfo:      filepath.Join(filepath.Dir(f.root), "mountinfo"),
		hooks: hooks{
			mkdir:       f.mkdir,
			rmdir:       f.rmdir,
			write:       f.write,
			pid:         4242,
			killTimeout: time.Second,
		},
	}
}

func (f *fakeV2) newManager(name string) *v2Manager {
	f.t.Helper()
	m, err := New(f.options(name))
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return m.(*v2Manager)
}

// createRun creates the cgroup "run" with r under a manager named "b",
// destroyed when the test ends. Its path is f.parent+"/b/run".
func (f *fakeV2) createRun(r Resources) Cgroup {
	f.t.Helper()
	c, err := f.newManager("b").Create("run", r)
	if err != nil {
		f.t.Fatalf("Create: %v", err)
	}
	f.t.Cleanup(func() { destroy(f.t, c) })
	return c
}

// dir returns the fake directory of cgroup path p.
func (f *fakeV2) dir(p string) string { return filepath.Join(f.root, p) }

func (f *fakeV2) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for name, data := range f.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rmdir fails like the kernel's on a cgroup with children.
func (f *fakeV2) rmdir(dir string) error {
	subs, err := subdirs(dir)
	if err != nil {
		return err
	}
	if len(subs) > 0 {
		return unix.ENOTEMPTY
	}
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

func (f *fakeV2) write(file, data string) error {
	rel, err := filepath.Rel(f.root, file)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.writes = append(f.writes, "/"+rel+"="+data)
	hook := f.onWrite
	f.mu.Unlock()
	if hook != nil {
		if err := hook("/"+rel, data); err != errSkip {
			return err
		}
	}
	if filepath.Base(file) == "cgroup.subtree_control" {
		return subtreeControl(file, data)
	}
	return writeFile(file, data)
}

// subtreeControl applies "+ctl -ctl" to a subtree_control file and leaves it
// as the kernel shows it: the enabled controllers, sorted.
func subtreeControl(file, data string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	enabled := strings.Fields(string(b))
	for _, tok := range strings.Fields(data) {
		c := tok[1:]
		enabled = slices.DeleteFunc(enabled, func(e string) bool { return e == c })
		if tok[0] == '+' {
			enabled = append(enabled, c)
		}
	}
	slices.Sort(enabled)
	return os.WriteFile(file, []byte(strings.Join(enabled, " ")+"\n"), 0o644)
}

// written returns the writes made so far.
func (f *fakeV2) written() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

// set writes a control file of cgroup p as the kernel would.
func (f *fakeV2) set(p, name, data string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir(p), name), []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// get reads a control file of cgroup p.
func (f *fakeV2) get(p, name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir(p), name))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// events is a fake cgroup.events whose two keys the test and the fake
// kernel change from different goroutines.
type events struct {
	f   *fakeV2
	p   string
	mu  sync.Mutex
	pop int
	frz int
}

func (e *events) update(populated, frozen int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if populated >= 0 {
		e.pop = populated
	}
	if frozen >= 0 {
		e.frz = frozen
	}
	// Write and rename, so that a concurrent reader never sees the file
	// empty, as it never does on cgroupfs.
	file := filepath.Join(e.f.dir(e.p), "cgroup.events")
	data := "populated " + strconv.Itoa(e.pop) + "\nfrozen " + strconv.Itoa(e.frz) + "\n"
	if err := os.WriteFile(file+".tmp", []byte(data), 0o644); err != nil {
		e.f.t.Error(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		e.f.t.Error(err)
	}
}

// destroy is the cleanup of a test's cgroup.
func destroy(t *testing.T, c Cgroup) {
	t.Helper()
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy: %v", err)
	}
}

func assertEqualLists(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
