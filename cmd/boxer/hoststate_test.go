package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"boxer/internal/observe"
	"boxer/internal/sandbox"
)

// hostWatch knows what a quiet host looks like around one boxer server:
// its footprint (sandbox processes, cgroups, mounts, run dirs, server
// descriptors) and a set of canary files and names no run may touch.
type hostWatch struct {
	s        *testServer
	in       observe.Instance
	canaries []string
	base     observe.Footprint
	baseSeen map[string]string // canary -> its state when the watch began
	baseFDs  string            // the server's descriptors then, to show with a difference
}

// fdList lists pid's descriptors and their targets, one a line.
func fdList(pid int) string {
	fds := observe.Descriptors(pid)
	var b strings.Builder
	for _, fd := range slices.Sorted(maps.Keys(fds)) {
		fmt.Fprintf(&b, "%d -> %s\n", fd, fds[fd])
	}
	return b.String()
}

// canaryTime is the mtime the test's own canaries are given: a change of
// content that kept the size would still move it.
var canaryTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// watchHost plants canaries in the server's data dir and in /tmp, waits
// until the server is quiet (its warm pool full, every descriptor of the
// warm-up closed) and takes that as the baseline.
func watchHost(t *testing.T, s *testServer, state, data string) *hostWatch {
	t.Helper()
	cfg := sandbox.Config{StateDir: state}.WithDefaults()
	w := &hostWatch{s: s, in: observe.Instance{PID: s.cmd.Process.Pid, StateDir: state, CgroupName: cfg.CgroupName, IDBase: cfg.IDBase, IDSpan: cfg.IDSpan, DataDir: data}}
	tmp, err := os.CreateTemp("", "boxer-attack-canary-")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	t.Cleanup(func() { os.Remove(tmp.Name()) })
	for _, p := range []string{filepath.Join(data, "canary"), tmp.Name()} {
		if err := os.WriteFile(p, []byte("canary "+p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, canaryTime, canaryTime); err != nil {
			t.Fatal(err)
		}
		w.canaries = append(w.canaries, p)
	}
	// The host files a run would most like to change or read, boxer's
	// binary, and the interpreter every sandbox executes (bound read-only
	// into each).
	w.canaries = append(w.canaries, "/etc/passwd", "/etc/shadow", "/etc/hostname", "/etc/hosts", s.cmd.Path)
	if py, err := filepath.EvalSymlinks("/usr/bin/python3"); err == nil {
		w.canaries = append(w.canaries, py)
	}
	w.baseSeen = w.seen()

	// Quiet means two snapshots a while apart agree: the pool refills and
	// the warm-up's connections close within a few hundred milliseconds.
	deadline := time.Now().Add(30 * time.Second)
	prev, stableSince := observe.Snapshot(w.in), time.Now()
	for time.Since(stableSince) < 500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the server never went quiet; last footprint %+v", prev)
		}
		time.Sleep(20 * time.Millisecond)
		if now := observe.Snapshot(w.in); now.Diff(prev) != nil {
			prev, stableSince = now, time.Now()
		}
	}
	w.base = prev
	w.baseFDs = fdList(w.in.PID)
	t.Logf("quiet host: %d sandbox processes, roots %v, %d cgroups (and %d spare), %d mounts, %d run dirs, %d server descriptors (and %d network namespaces held)",
		w.base.Procs, w.base.Roots, w.base.Cgroups, w.base.SpareCgroups, w.base.Mounts, w.base.RunDirs, total(w.base.FDs), w.base.HeldNets)
	return w
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// seen describes every canary: the host's hostname, and for each file its
// size, mode, mtime, ctime and (small files) a hash of its content.
func (w *hostWatch) seen() map[string]string {
	m := map[string]string{"hostname": hostname()}
	for _, p := range w.canaries {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			m[p] = err.Error()
			continue
		}
		desc := fmt.Sprintf("ino %d size %d mode %o mtime %d.%09d ctime %d.%09d",
			st.Ino, st.Size, st.Mode, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		if st.Size < 1<<20 {
			b, _ := os.ReadFile(p)
			sum := sha256.Sum256(b)
			desc += " sha256 " + hex.EncodeToString(sum[:8])
		}
		m[p] = desc
	}
	return m
}

// hostname is the host's, read from the kernel (not a cached copy).
func hostname() string {
	var uts syscall.Utsname
	if err := syscall.Uname(&uts); err != nil {
		return err.Error()
	}
	s := make([]byte, 0, len(uts.Nodename))
	for _, c := range uts.Nodename {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// unchanged waits until the server's footprint is back to the baseline —
// spent sandboxes are destroyed and the pool refilled in the background —
// and checks every canary. It fails the test, naming each difference, if
// the host is not back within the deadline.
func (w *hostWatch) unchanged(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		diff := observe.Snapshot(w.in).Diff(w.base)
		if diff == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("host not back to its quiet state 15s after the run:\n  %s", strings.Join(diff, "\n  "))
			t.Logf("the server's descriptors at the baseline:\n%s\nnow:\n%s\nits log, last %d bytes:\n%s",
				w.baseFDs, fdList(w.in.PID), logTailSize, w.s.log)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	now := w.seen()
	for _, k := range slices.Sorted(maps.Keys(w.baseSeen)) {
		if now[k] != w.baseSeen[k] {
			t.Errorf("canary %s changed: %s, was %s", k, now[k], w.baseSeen[k])
		}
	}
}
