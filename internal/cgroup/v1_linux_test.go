package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests create real cgroups, so they need root on a cgroup v1 host.
// Each test's base is named after the test and this process, so tests of
// other packages and other engineers running on the same machine never see
// each other's cgroups.

const python = "/usr/bin/python3"

// newV1Manager returns a Manager with a base of the test's own, removed at
// the end, or skips the test when this host cannot run it.
func newV1Manager(t *testing.T) *v1Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	mountInfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	l, err := detectLayout("/sys/fs/cgroup", "", string(mountInfo), string(self))
	if err != nil {
		t.Skipf("no usable cgroup v1 hierarchies: %v", err)
	}
	if l.version != V1 {
		t.Skipf("host is cgroup %v; the v1 tests need a v1 (or hybrid) host", l.version)
	}
	m := newV1ManagerNamed(t, baseName(t))
	t.Cleanup(func() {
		if err := m.CleanupStale(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, dir := range distinct(m.bases) {
			if err := m.fs.rmdir(dir); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return m
}

func newV1ManagerNamed(t *testing.T, name string) *v1Manager {
	t.Helper()
	m, err := New(Options{Name: name})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if m.Version() != V1 {
		t.Fatalf("Version = %v, want v1", m.Version())
	}
	return m.(*v1Manager)
}

func baseName(t *testing.T) string {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("cgroup-test-%d-%s", os.Getpid(), name)
}

// start starts a command and kills and reaps it at the end of the test.
// When gate is true the command's stdin is returned open, for a script that
// waits for a line before doing anything (so that it is in its cgroup
// first), and so is its stdout.
func start(t *testing.T, gate bool, name string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var (
		stdin io.WriteCloser
		out   *bufio.Reader
		err   error
	)
	if gate {
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		out = bufio.NewReader(stdout)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin, out
}

func create(t *testing.T, m Manager, name string, r Resources) Cgroup {
	t.Helper()
	c, err := m.Create(name, r)
	if err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	t.Cleanup(func() { destroy(t, c) })
	return c
}

func add(t *testing.T, c Cgroup, pid int) {
	t.Helper()
	if err := c.Add(pid); err != nil {
		t.Fatalf("Add(%d): %v", pid, err)
	}
}

// release writes the line a gated script waits for.
func release(t *testing.T, stdin io.Writer) {
	t.Helper()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the command's output: %v", err)
	}
	return strings.TrimSpace(line)
}

func mustReadInt(t *testing.T, file string) int64 {
	t.Helper()
	n, err := readInt(file)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// gone reports whether pid has exited: it no longer exists, or it is a
// zombie waiting for a parent that is not this test.
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}

func assertEmpty(t *testing.T, c *v1Cgroup) {
	t.Helper()
	for _, dir := range c.distinct {
		if pids, err := treePids(dir); err != nil || len(pids) != 0 {
			t.Errorf("%s holds %v (%v), want nothing", dir, pids, err)
		}
	}
}

func TestV1AddEveryController(t *testing.T) {
	m := newV1Manager(t)
	c := create(t, m, "run", Resources{})
	if fd, ok := c.FD(); ok || fd != -1 {
		t.Errorf("FD() = %d, %v on v1; want -1, false", fd, ok)
	}
	cmd, _, _ := start(t, false, "sleep", "60")
	add(t, c, cmd.Process.Pid)

	v1 := c.(*v1Cgroup)
	for _, ctl := range v1Controllers {
		t.Run(ctl, func(t *testing.T) {
			pids, err := readPids(filepath.Join(v1.dirs[ctl], "cgroup.procs"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(pids, cmd.Process.Pid) {
				t.Errorf("%s/cgroup.procs = %v, want it to hold %d", v1.dirs[ctl], pids, cmd.Process.Pid)
			}
		})
	}
	procCgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(procCgroup), "/"+baseName(t)+"/run\n"); n != 5 {
		t.Errorf("/proc/%d/cgroup names the run in %d hierarchies, want 5:\n%s", cmd.Process.Pid, n, procCgroup)
	}

	if err := c.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("sleep ended with %v, want killed", err)
	}
	for _, dir := range v1.distinct {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after Destroy: %v", dir, err)
		}
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

func TestV1SetReadBack(t *testing.T) {
	m := newV1Manager(t)
	c := create(t, m, "run", Resources{}).(*v1Cgroup)
	memsw := exists(c.file("memory", "memory.memsw.limit_in_bytes"))
	// The steps run in order on one cgroup: a cut and a raise of the
	// memory limit each need their own write order against memsw.
	const unlimited = -1
	steps := []struct {
		name  string
		r     Resources
		quota int64
		mem   int64 // unlimited: the kernel's page-aligned maximum
		pids  string
	}{
		{"set all", Resources{CPUs: 0.5, MemoryBytes: 128 << 20, Pids: 32}, 50000, 128 << 20, "32"},
		{"cut memory", Resources{CPUs: 1.5, MemoryBytes: 64 << 20, Pids: 32}, 150000, 64 << 20, "32"},
		{"raise memory", Resources{CPUs: 0.25, MemoryBytes: 256 << 20, Pids: 100}, 25000, 256 << 20, "100"},
		{"lift all", Resources{}, -1, unlimited, "max"},
		{"set again", Resources{CPUs: 0.1, MemoryBytes: 100 << 20, Pids: 1}, 10000, 100 << 20, "1"},
		{"the same, written only where changed", Resources{CPUs: 0.1, MemoryBytes: 100 << 20, Pids: 1, Weight: 10}, 10000, 100 << 20, "1"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := c.Set(st.r); err != nil {
				t.Fatalf("Set(%+v): %v", st.r, err)
			}
			if got := mustReadInt(t, c.file("cpu", "cpu.cfs_period_us")); got != cfsPeriodUs {
				t.Errorf("cpu.cfs_period_us = %d, want %d", got, cfsPeriodUs)
			}
			if got := mustReadInt(t, c.file("cpu", "cpu.cfs_quota_us")); got != st.quota {
				t.Errorf("cpu.cfs_quota_us = %d, want %d", got, st.quota)
			}
			files := []string{"memory.limit_in_bytes"}
			if memsw {
				files = append(files, "memory.memsw.limit_in_bytes")
			}
			if exists(c.file("memory", "memory.kmem.tcp.limit_in_bytes")) {
				files = append(files, "memory.kmem.tcp.limit_in_bytes")
			}
			for _, f := range files {
				got := mustReadInt(t, c.file("memory", f))
				if st.mem == unlimited && got < 1<<62 || st.mem != unlimited && got != st.mem {
					t.Errorf("%s = %d, want %d", f, got, st.mem)
				}
			}
			if got, _ := readFile(c.file("pids", "pids.max")); strings.TrimSpace(got) != st.pids {
				t.Errorf("pids.max = %q, want %q", got, st.pids)
			}
			if got := mustReadInt(t, c.file("memory", "memory.swappiness")); got != 0 {
				t.Errorf("memory.swappiness = %d, want 0", got)
			}
		})
	}
	if !memsw {
		t.Log("no memory.memsw.* files (swap accounting off): only memory.limit_in_bytes checked")
	}
}

func TestV1OOMKill(t *testing.T) {
	m := newV1Manager(t)
	const limit = 64 << 20
	c := create(t, m, "run", Resources{MemoryBytes: limit})
	cmd, stdin, _ := start(t, true, python, "-c",
		"import sys; sys.stdin.readline(); b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])")
	add(t, c, cmd.Process.Pid)
	release(t, stdin)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("memory hog ended with %v, want killed", err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want >= 1", st.OOMKills)
	}
	if st.MemoryPeak < limit*3/4 || st.MemoryPeak > limit {
		t.Errorf("MemoryPeak = %d, want near the limit %d", st.MemoryPeak, limit)
	}
	t.Logf("stats after OOM: %+v", st)
}

func TestV1PidsLimit(t *testing.T) {
	m := newV1Manager(t)
	const max = 8
	c := create(t, m, "run", Resources{Pids: max}).(*v1Cgroup)
	// Forks until the kernel refuses, reports how many children it got and
	// the errno, then waits with its children alive.
	script := `
import os, sys, time
sys.stdin.readline()
n, err = 0, 0
for _ in range(64):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print(n, err, flush=True)
sys.stdin.readline()
`
	cmd, stdin, out := start(t, true, python, "-c", script)
	add(t, c, cmd.Process.Pid)
	release(t, stdin)
	var forked, errno int
	if _, err := fmt.Sscan(readLine(t, out), &forked, &errno); err != nil {
		t.Fatal(err)
	}
	t.Logf("forked %d children under pids.max=%d, then errno %d", forked, max, errno)
	if forked >= max || errno != 11 {
		t.Errorf("forked %d children and stopped with errno %d; want fewer than %d and EAGAIN (11)", forked, errno, max)
	}
	if cur := mustReadInt(t, c.file("pids", "pids.current")); cur > max {
		t.Errorf("pids.current = %d, want <= %d", cur, max)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	assertEmpty(t, c)
}

func TestV1Kill(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid(1) to start a daemon")
	}
	tests := []struct {
		name    string
		r       Resources
		script  string // runs after the gate; prints "started" when its tree is up
		minPids int    // processes in the cgroup once started
	}{
		{
			name:    "double-forked daemons in their own session",
			script:  `setsid sh -c 'sleep 100 & sleep 100 &'; echo started; read y`,
			minPids: 3,
		},
		{
			name:    "forking loop",
			r:       Resources{Pids: 64},
			script:  `echo started; while :; do sleep 100 & done`,
			minPids: 1,
		},
		{
			name:    "ignores SIGTERM",
			script:  `trap '' TERM; sleep 100 & echo started; wait`,
			minPids: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newV1Manager(t)
			c := create(t, m, "run", tt.r).(*v1Cgroup)
			cmd, stdin, out := start(t, true, "sh", "-c", "read x; "+tt.script)
			add(t, c, cmd.Process.Pid)
			release(t, stdin)
			if line := readLine(t, out); line != "started" {
				t.Fatalf("script said %q, want started", line)
			}
			pids, err := c.pids()
			if err != nil {
				t.Fatal(err)
			}
			if len(pids) < tt.minPids {
				t.Fatalf("cgroup holds %v, want at least %d processes", pids, tt.minPids)
			}
			if err := c.Kill(); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			t.Logf("killed a tree of at least %d processes", len(pids))
			assertEmpty(t, c)
			for _, pid := range pids {
				if !gone(pid) {
					t.Errorf("pid %d survived Kill", pid)
				}
			}
			if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Errorf("script ended with %v, want killed", err)
			}
			if st, _ := readFile(c.file("freezer", "freezer.state")); strings.TrimSpace(st) != "THAWED" {
				t.Errorf("freezer.state = %q after Kill, want THAWED", st)
			}
		})
	}
}

// Tasks counts the run's tasks. (After Kill it still counts the killed
// ones that nobody has reaped yet: that is the kernel's count, and the
// point of it for Warm.killRest.)
func TestV1Tasks(t *testing.T) {
	m := newV1Manager(t)
	c := create(t, m, "run", Resources{})
	cmd, stdin, out := start(t, true, "sh", "-c", "read x; sleep 100 & echo started; wait")
	add(t, c, cmd.Process.Pid)
	release(t, stdin)
	if line := readLine(t, out); line != "started" {
		t.Fatalf("script said %q, want started", line)
	}
	if n, err := c.Tasks(); err != nil || n != 2 {
		t.Errorf("Tasks = %d, %v; want sh and its sleep", n, err)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	_ = cmd.Wait()
}

// A held file longer than held.read's buffer is read whole, in more than
// one call: cgroup.procs of a cgroup with a few hundred processes.
func TestV1HeldReadLongFile(t *testing.T) {
	m := newV1Manager(t)
	c := create(t, m, "run", Resources{}).(*v1Cgroup)
	cmd, stdin, out := start(t, true, "sh", "-c", "read x; for i in $(seq 300); do sleep 100 & done; echo started; wait")
	add(t, c, cmd.Process.Pid)
	release(t, stdin)
	if line := readLine(t, out); line != "started" {
		t.Fatalf("script said %q, want started", line)
	}
	defer func() {
		if err := c.Kill(); err != nil {
			t.Errorf("Kill: %v", err)
		}
		_ = cmd.Wait()
	}()
	file := c.file("pids", "cgroup.procs")
	got, err := c.held.read(file)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) <= 1024 || got != string(want) {
		t.Fatalf("held read %d bytes (%d lines), a plain read %d (%d lines); want the same, over 1 KiB",
			len(got), strings.Count(got, "\n"), len(want), strings.Count(string(want), "\n"))
	}
}

func TestV1CPUStats(t *testing.T) {
	m := newV1Manager(t)
	c := create(t, m, "run", Resources{})
	before, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	cmd, stdin, _ := start(t, true, python, "-c",
		"import sys, time; sys.stdin.readline(); t = time.process_time()\nwhile time.process_time() - t < 0.3: pass")
	add(t, c, cmd.Process.Pid)
	release(t, stdin)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("busy loop: %v", err)
	}
	after, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if after.CPU-before.CPU < 250*time.Millisecond {
		t.Errorf("CPU grew from %v to %v over a 300 ms busy loop", before.CPU, after.CPU)
	}
	if after.MemoryPeak <= 0 {
		t.Errorf("MemoryPeak = %d after running python, want > 0", after.MemoryPeak)
	}
}

func TestV1CleanupStale(t *testing.T) {
	old := newV1Manager(t)
	var cmds []*exec.Cmd
	var dirs []string
	for _, name := range []string{"run1", "run2"} {
		c, err := old.Create(name, Resources{Pids: 16})
		if err != nil {
			t.Fatalf("Create(%s): %v", name, err)
		}
		cmd, _, _ := start(t, false, "sleep", "100")
		add(t, c, cmd.Process.Pid)
		cmds = append(cmds, cmd)
		dirs = append(dirs, c.(*v1Cgroup).distinct...)
	}
	// A cgroup below a run, with a process of its own: CleanupStale must
	// find both.
	nested := filepath.Join(old.bases["memory"], "run1", "nested")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, _, _ := start(t, false, "sleep", "100")
	if err := writeFile(filepath.Join(nested, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	cmds = append(cmds, cmd)

	// A new instance with the same name finds the leftovers.
	m := newV1ManagerNamed(t, baseName(t))
	if err := m.CleanupStale(); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("pid %d ended with %v, want killed", cmd.Process.Pid, err)
		}
	}
	for _, dir := range append(dirs, nested) {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s survived CleanupStale: %v", dir, err)
		}
	}
	for _, base := range distinct(m.bases) {
		if !isDir(base) {
			t.Errorf("CleanupStale removed the base %s", base)
		}
	}
}

func TestV1CreateExisting(t *testing.T) {
	m := newV1Manager(t)
	c := create(t, m, "run", Resources{})
	if _, err := m.Create("run", Resources{}); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "CleanupStale") {
		t.Errorf("second Create error = %v, want EEXIST mentioning CleanupStale", err)
	}
	for _, dir := range c.(*v1Cgroup).distinct {
		if !isDir(dir) {
			t.Errorf("failed second Create removed %s", dir)
		}
	}
	// A limit the kernel rejects undoes the Create.
	_, err := m.Create("bad", Resources{MemoryBytes: 1 << 62, Pids: 1 << 40})
	if err == nil || !strings.Contains(err.Error(), "cgroup: write ") {
		t.Fatalf("Create with a rejected limit: error = %v, want a write error", err)
	}
	t.Logf("rejected: %v", err)
	for _, base := range distinct(m.bases) {
		if isDir(filepath.Join(base, "bad")) {
			t.Errorf("failed Create left %s/bad behind", base)
		}
	}
}

func TestV1Check(t *testing.T) {
	m := newV1Manager(t)
	if err := m.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, base := range distinct(m.bases) {
		if subs, _ := subdirs(base); len(subs) != 0 {
			t.Errorf("Check left %v in %s", subs, base)
		}
	}
}

func TestV1NewMissingParent(t *testing.T) {
	newV1Manager(t) // for the skip
	_, err := New(Options{Parent: "/" + baseName(t) + "-absent", Name: "b"})
	if err == nil || !strings.Contains(err.Error(), "Options.Parent must name an existing cgroup") {
		t.Errorf("New error = %v, want one explaining that the parent is missing", err)
	}
}

// TestV1Concurrent runs what the engine does for each run, from many
// goroutines at once; run it with -race.
func TestV1Concurrent(t *testing.T) {
	m := newV1Manager(t)
	errs := make(chan error, 8)
	for i := range cap(errs) {
		go func() {
			errs <- func() error {
				c, err := m.Create("run"+strconv.Itoa(i), Resources{CPUs: 0.5, MemoryBytes: 64 << 20, Pids: 8})
				if err != nil {
					return err
				}
				cmd := exec.Command("sleep", "60")
				if err := cmd.Start(); err != nil {
					return errors.Join(err, c.Destroy())
				}
				err = c.Add(cmd.Process.Pid)
				if err == nil {
					_, err = c.Stats()
				}
				if err = errors.Join(err, c.Destroy()); err != nil {
					_ = cmd.Process.Kill() // or Wait would block
				}
				if werr := cmd.Wait(); werr == nil {
					err = errors.Join(err, fmt.Errorf("pid %d survived Destroy", cmd.Process.Pid))
				}
				return err
			}()
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, base := range distinct(m.bases) {
		if subs, _ := subdirs(base); len(subs) != 0 {
			t.Errorf("%s still holds %v", base, subs)
		}
	}
}

// Close removes an empty base, and leaves one that still holds a run.
func TestV1CloseRemovesEmptyBase(t *testing.T) {
	newV1Manager(t) // skips unless this host can run the v1 tests
	name := baseName(t) + "-close"
	m := newV1ManagerNamed(t, name)
	c, err := m.Create("run", Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close with a run left: %v", err)
	}
	for _, dir := range distinct(m.bases) {
		if !isDir(dir) {
			t.Fatalf("Close removed %s, which still holds a run", dir)
		}
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range distinct(m.bases) {
		if isDir(dir) {
			t.Errorf("Close left the empty base %s", dir)
		}
	}
}

func TestRetryEINTR(t *testing.T) {
	calls := 0
	n, err := retryEINTR(func() (int, error) {
		calls++
		if calls < 3 {
			return -1, unix.EINTR
		}
		return 7, nil
	})
	if n != 7 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls; want 7, nil after 3", n, err, calls)
	}
	if _, err := retryEINTR(func() (int, error) { return -1, unix.EBUSY }); err != unix.EBUSY {
		t.Fatalf("EBUSY came back as %v", err)
	}
}
