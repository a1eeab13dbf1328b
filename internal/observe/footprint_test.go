package observe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestCutInode(t *testing.T) {
	for in, want := range map[string]string{
		"socket:[12345]":     "socket:[]",
		"pipe:[7]":           "pipe:[]",
		"anon_inode:[pidfd]": "anon_inode:[pidfd]",
		"/run/boxer/lock":    "/run/boxer/lock",
		"/tmp/odd[1]":        "/tmp/odd[]",
	} {
		if got := cutInode(in); got != want {
			t.Errorf("cutInode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFDKey(t *testing.T) {
	for in, want := range map[string]string{
		"socket:[12345]": "socket:[]",
		"/sys/fs/cgroup/system.slice/boxer.service/boxer/w330aae9a64f50ee7": "/sys/fs/cgroup/system.slice/boxer.service/boxer/*",
		"/run/boxer/lock": "/run/boxer/lock",
	} {
		if got := fdKey(in); got != want {
			t.Errorf("fdKey(%q) = %q, want %q", in, got, want)
		}
	}
	a, b := Footprint{FDs: map[string]int{fdKey("/sys/fs/cgroup/b/w1"): 1}}, Footprint{FDs: map[string]int{fdKey("/sys/fs/cgroup/b/w2"): 1}}
	if d := a.Diff(b); len(d) != 0 {
		t.Errorf("two warm children's cgroup fds differ: %v", d)
	}
}

func TestParent(t *testing.T) {
	if got := parent(os.Getpid()); got != os.Getppid() {
		t.Fatalf("parent of this process: %d, want %d", got, os.Getppid())
	}
	if got := parent(1 << 30); got != 0 {
		t.Fatalf("parent of no process: %d", got)
	}
}

// A snapshot of this test process as if it were a server: a new run dir, a
// new descriptor and a new cgroup each show as a difference, and undoing
// them makes the footprints equal again.
func TestSnapshotDiff(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "runs"), 0o700); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	in := Instance{PID: os.Getpid(), StateDir: state, CgroupName: fmt.Sprintf("observe-test-%d", os.Getpid()), IDBase: 4_000_000_000, DataDir: data}
	base := Snapshot(in)
	if d := Snapshot(in).Diff(base); d != nil {
		t.Fatalf("two snapshots of an idle process differ: %v", d)
	}

	run := filepath.Join(state, "runs", "r1")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.Create(filepath.Join(data, "boxer.db")) // not counted
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := []string{"run dirs: 1, was 0", "server descriptors to " + run + ": 1, was 0"}
	cg := fakeCgroupBase(t, in.CgroupName)
	if cg != "" {
		if err := os.Mkdir(filepath.Join(cg, "r1"), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(cg, "r1"))
		want = slices.Insert(want, 0, "cgroups: 1, was 0")
	}
	if d := Snapshot(in).Diff(base); !slices.Equal(d, want) {
		t.Fatalf("diff %q, want %q", d, want)
	}
	f.Close()
	os.Remove(run)
	if cg != "" {
		os.Remove(filepath.Join(cg, "r1"))
	}
	if d := Snapshot(in).Diff(base); d != nil {
		t.Fatalf("after cleaning up: %v", d)
	}
	// A warm slot's empty cgroup, and a descriptor held to its files, are
	// the pool's standing state; once the cgroup is gone, the descriptor
	// is a leak.
	if cg == "" {
		return
	}
	spare := filepath.Join(cg, "wslot")
	if err := os.Mkdir(spare, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(spare)
	held, err := os.Open(filepath.Join(spare, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	now := Snapshot(in)
	if d := now.Diff(base); d != nil || now.SpareCgroups != 1 {
		t.Fatalf("with a spare cgroup: diff %v, %d spare", d, now.SpareCgroups)
	}
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	want = []string{"server descriptors to a removed warm cgroup: 1, was 0"}
	if d := Snapshot(in).Diff(base); !slices.Equal(d, want) {
		t.Fatalf("diff %q, want %q", d, want)
	}
}

// fakeCgroupBase makes an empty cgroup named name in one hierarchy and
// returns it, or "" when this process may not (not root).
func fakeCgroupBase(t *testing.T, name string) string {
	t.Helper()
	root := "/sys/fs/cgroup/pids" // v1
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root = "/sys/fs/cgroup" // v2
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		t.Logf("no cgroup check: %v", err)
		return ""
	}
	t.Cleanup(func() { os.Remove(dir) })
	return dir
}

// A zygote's cgroup replaced by a fresh one's (the pool rotates zygotes)
// is no difference, with as many descriptors held to each; a descriptor
// held to a zygote's cgroup that is gone is.
func TestSnapshotZygoteRotated(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "runs"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := Instance{PID: os.Getpid(), StateDir: state, CgroupName: fmt.Sprintf("observe-test-z-%d", os.Getpid()), IDBase: 4_000_000_000}
	cg := fakeCgroupBase(t, in.CgroupName)
	if cg == "" {
		t.Fatal("no cgroup of its own: run as root")
	}
	// zygote makes the cgroup of a zygote with id and holds its
	// cgroup.procs open, as internal/cgroup's held does.
	zygote := func(id string) (string, *os.File) {
		dir := filepath.Join(cg, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
		f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return dir, f
	}
	oldDir, old := zygote("1f2e3d4c5b6a7980")
	base := Snapshot(in)
	old.Close()
	if err := os.Remove(oldDir); err != nil {
		t.Fatal(err)
	}
	newDir, _ := zygote("0a1b2c3d4e5f6071")
	if d := Snapshot(in).Diff(base); d != nil {
		t.Fatalf("a rotated zygote's cgroup: %v", d)
	}
	stale, err := os.Open(filepath.Join(newDir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	if err := os.Remove(newDir); err != nil {
		t.Fatal(err)
	}
	want := []string{"cgroups: 0, was 1", "server descriptors to " + filepath.Join(cg, "<id>") + "/*: 0, was 1",
		"server descriptors to a removed cgroup: 2, was 0"}
	if d := Snapshot(in).Diff(base); !slices.Equal(d, want) {
		t.Fatalf("diff %q, want %q", d, want)
	}
}

// A descriptor to a process's /proc/PID/stat (a ready warm child's job
// process, see internal/sandbox's exitOf) counts as one to a live
// process's, whichever process it is; held past the process's end, it is
// a leak.
func TestSnapshotProcStat(t *testing.T) {
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "runs"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := Instance{PID: os.Getpid(), StateDir: state, CgroupName: fmt.Sprintf("observe-test-s-%d", os.Getpid()), IDBase: 4_000_000_000}
	// child starts a process and holds its stat file open.
	child := func() (*exec.Cmd, *os.File) {
		cmd := exec.Command("sleep", "100")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		f, err := os.Open(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return cmd, f
	}
	firstCmd, first := child()
	base := Snapshot(in)
	first.Close()
	firstCmd.Process.Kill()
	firstCmd.Wait()
	second, _ := child()
	if d := Snapshot(in).Diff(base); d != nil {
		t.Fatalf("one process's stat file for another's: %v", d)
	}
	second.Process.Kill()
	second.Wait()
	// (Wait closed the pidfd exec.Cmd held, which base counted.)
	want := []string{"server descriptors to /proc/<gone>/stat: 1, was 0", "server descriptors to /proc/<live>/stat: 0, was 1",
		"server descriptors to anon_inode:[pidfd]: 0, was 1"}
	if d := Snapshot(in).Diff(base); !slices.Equal(d, want) {
		t.Fatalf("diff %q, want %q", d, want)
	}
}
