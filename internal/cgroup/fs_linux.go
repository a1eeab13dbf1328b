package cgroup

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Timeouts of the bounded waits. Kill waits for the kernel to tear the
// processes down, which takes milliseconds unless a task is stuck in the
// kernel; rmdir may see EBUSY for a moment after the last task has gone.
const (
	defaultKillTimeout = 5 * time.Second
	rmdirTimeout       = time.Second
)

// fileError is a failed operation on a cgroupfs file. It unwraps to the
// errno, so errors.Is(err, unix.EBUSY) and errors.Is(err, fs.ErrNotExist)
// work.
type fileError struct {
	op   string // read, write, mkdir, rmdir, open, parse
	path string
	err  error
}

func (e *fileError) Error() string { return "cgroup: " + e.op + " " + e.path + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// newFileError drops the *fs.PathError that the os package adds, whose text
// would repeat the path.
func newFileError(op, path string, err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err
	}
	return &fileError{op: op, path: path, err: err}
}

// fsys is how a Manager touches cgroupfs: the real thing, or in tests the
// hooks over a tree of plain files.
type fsys struct {
	h hooks
}

func newFsys(h hooks) fsys {
	if h.killTimeout == 0 {
		h.killTimeout = defaultKillTimeout
	}
	if h.pid == 0 {
		h.pid = os.Getpid()
	}
	return fsys{h: h}
}

// mkdir makes one cgroup directory.
func (f fsys) mkdir(dir string) error {
	var err error
	if f.h.mkdir != nil {
		err = f.h.mkdir(dir)
	} else {
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil {
		return newFileError("mkdir", dir, err)
	}
	return nil
}

// rmdir removes one empty cgroup directory, retrying while the kernel still
// reports it busy (the last task's exit is not fully torn down when its
// cgroup stops listing it). A directory already gone is not an error.
func (f fsys) rmdir(dir string) error {
	var err error
	poll(rmdirTimeout, func() (bool, error) {
		err = f.rmdirOnce(dir)
		return !errors.Is(err, unix.EBUSY), nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return newFileError("rmdir", dir, err)
	}
	return nil
}

func (f fsys) rmdirOnce(dir string) error {
	if f.h.rmdir != nil {
		return f.h.rmdir(dir)
	}
	return unix.Rmdir(dir)
}

// removeTree removes dir and every cgroup below it, deepest first. The
// control files inside need no removal: cgroupfs drops them with the
// directory.
func (f fsys) removeTree(dir string) error {
	// A run's cgroup has none below it (its processes cannot make one), so
	// a first rmdir usually does it all, without the walk's open and two
	// reads of the directory.
	if err := f.rmdirOnce(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	subs, err := subdirs(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range subs {
		errs = append(errs, f.removeTree(filepath.Join(dir, s)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return f.rmdir(dir)
}

// write writes data to a control file in one write(2), which is how
// cgroupfs wants it. The file must exist: cgroupfs never creates one.
func (f fsys) write(file, data string) error {
	var err error
	if f.h.write != nil {
		err = f.h.write(file, data)
	} else {
		err = writeFile(file, data)
	}
	if err != nil {
		return newFileError("write", file, err)
	}
	return nil
}

// written remembers what Set last wrote to each control file of one
// cgroup, so that a Set changing one limit writes one file: a warm child's
// limits are set when it is prepared and again, mostly unchanged, on the
// job's path when its job arrives. Nothing else writes a run's control
// files (its processes cannot), so the memory stays true. Like Set, it is
// not for concurrent use.
type written map[string]string

// put writes value to file through h unless the last put there wrote
// the same.
func (w written) put(h *held, file, value string) error {
	if v, ok := w[file]; ok && v == value {
		return nil
	}
	delete(w, file) // a failed write may have left the old value or not
	if err := h.write(file, value); err != nil {
		return err
	}
	w[file] = value
	return nil
}

// writeFile and readFile use the system calls directly: os.OpenFile would
// register every cgroupfs file with the runtime's poller (cgroupfs files
// are pollable), four extra system calls per access on the job's path.
//
// A signal (the Go runtime's preemption signal, a child's exit) can end a
// control file's write with EINTR despite the handlers' SA_RESTART: the
// full soak saw it once in 10,000 requests, on v1's memory.limit_in_bytes.
// Every write here sets a value, so it is simply made again.
func writeFile(file, data string) error {
	// O_TRUNC is ignored by cgroupfs; it keeps a fake tree's files exact.
	fd, err := retryEINTR(func() (int, error) { return unix.Open(file, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0) })
	if err != nil {
		return err
	}
	n, err := retryEINTR(func() (int, error) { return unix.Write(fd, []byte(data)) })
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	return errors.Join(err, unix.Close(fd))
}

// retryEINTR calls f until it ends with something other than EINTR.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

func readFile(file string) (string, error) {
	fd, err := retryEINTR(func() (int, error) { return unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return "", newFileError("read", file, err)
	}
	defer unix.Close(fd)
	var b []byte
	buf := make([]byte, 4096)
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf) })
		if err != nil {
			return "", newFileError("read", file, err)
		}
		if n == 0 {
			return string(b), nil
		}
		b = append(b, buf[:n]...)
	}
}

// exists reports whether a control file is there; the optional ones
// (memory.memsw.*, memory.swap.max, memory.peak, cgroup.kill) depend on the
// kernel version and its configuration.
func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

// readInt reads a file holding one integer.
func readInt(file string) (int64, error) {
	s, err := readFile(file)
	if err != nil {
		return 0, err
	}
	return parseInt(file, s)
}

// parseInt parses s, the text of file, as one integer.
func parseInt(file, s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, newFileError("parse", file, err)
	}
	return n, nil
}

// readKey reads the integer value of key in a flat keyed file ("key value"
// lines: cpu.stat, memory.events, memory.oom_control, cgroup.events). A
// missing key is an error: every key read here is one the kernel always
// writes.
func readKey(file, key string) (int64, error) {
	s, err := readFile(file)
	if err != nil {
		return 0, err
	}
	return parseKeyOf(file, s, key)
}

// parseKeyOf is readKey's parse of s, the text of file.
func parseKeyOf(file, s, key string) (int64, error) {
	n, ok, err := parseKey(s, key)
	if err != nil {
		return 0, newFileError("parse", file, err)
	}
	if !ok {
		return 0, newFileError("parse", file, errors.New("no "+strconv.Quote(key)+" line"))
	}
	return n, nil
}

func parseKey(s, key string) (int64, bool, error) {
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, true, err
	}
	return 0, false, nil
}

// readPids reads the pids in a cgroup.procs file.
func readPids(file string) ([]int, error) {
	s, err := readFile(file)
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(s) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, newFileError("parse", file, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// treePids reads the pids of dir and of every cgroup below it. A cgroup that
// vanished meanwhile counts as empty.
func treePids(dir string) ([]int, error) {
	pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	subs, err := subdirs(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		more, err := treePids(filepath.Join(dir, s))
		if err != nil {
			return nil, err
		}
		pids = append(pids, more...)
	}
	return pids, nil
}

// subdirs lists the child cgroups of dir; none when dir is gone.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, newFileError("read", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// sigkill kills each pid, ignoring those already gone.
//
// Precondition: the pids were read from a cgroup that is frozen, or that
// the caller otherwise knows cannot have reused them (a frozen task cannot
// exit, so its pid cannot be recycled for an unrelated process).
func sigkill(pids []int) error {
	for _, pid := range slices.Compact(slices.Sorted(slices.Values(pids))) {
		// cgroup.procs shows 0 for a task outside this pid namespace, and
		// kill(0) would hit boxer's own process group.
		if pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return &fileError{op: "kill", path: "pid " + strconv.Itoa(pid), err: err}
		}
	}
	return nil
}

// Bounds of one freeze-kill-thaw round: how long to wait for the freezer to
// settle, and then for the killed tasks to exit (a task freeing a large
// address space takes a while) before the next round.
const (
	freezeWait = 100 * time.Millisecond
	exitWait   = 250 * time.Millisecond
)

// killRounds runs round until empty reports true or timeout passes, giving
// the tasks killed in each round time to exit before the next round freezes
// them again. It reports whether the cgroup became empty.
func killRounds(timeout time.Duration, empty func() (bool, error), round func() error) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		if done, err := empty(); done || err != nil {
			return done, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := round(); err != nil {
			return false, err
		}
		if done, err := poll(min(exitWait, time.Until(deadline)), empty); done || err != nil {
			return done, err
		}
	}
}

// poll calls done with a backoff from 1 ms to 32 ms until it reports true or
// an error, or timeout has passed. It reports whether done reported true.
// cgroupfs files can be watched with poll(2)/inotify for some events, but
// not for all the ones waited on here, and a short bounded backoff costs
// little for waits that normally last a few milliseconds.
func poll(timeout time.Duration, done func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for {
		ok, err := done()
		if ok || err != nil {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(min(delay, time.Until(deadline)+time.Millisecond))
		delay = min(2*delay, 32*time.Millisecond)
	}
}

// removeIfEmpty removes the cgroup dir unless it has child cgroups (or
// processes, which make rmdir fail with EBUSY): those stay for the next
// start to clean.
func removeIfEmpty(f fsys, dir string) error {
	subs, err := subdirs(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || len(subs) > 0 {
		return err
	}
	if err := f.rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.EBUSY) {
		return err
	}
	return nil
}
