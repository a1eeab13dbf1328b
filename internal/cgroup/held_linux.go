package cgroup

import (
	"errors"
	"io"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// hotFiles are the control files a run's path reads or writes, once or
// more per job: moving the child in, its limits set for the job and back
// to a waiting child's (weight, CPU quota, tasks, memory), the task count,
// the usage figures, a warm slot's reset. A cgroup keeps each
// open after its first use. Opening one walks the whole cgroupfs path
// (under load, openat was a sixth of boxer's CPU); reading or writing a
// held one is one system call. The others (limits written when a cgroup is
// made, the freezer) are opened each time.
var hotFiles = map[string]bool{
	"cgroup.procs":                true,
	"pids.current":                true,
	"cpu.shares":                  true,
	"cpu.weight":                  true,
	"cpu.cfs_quota_us":            true,
	"cpu.max":                     true,
	"pids.max":                    true,
	"memory.limit_in_bytes":       true,
	"memory.memsw.limit_in_bytes": true,
	"memory.max":                  true,
	"cpuacct.usage":               true,
	"cpu.stat":                    true,
	"memory.max_usage_in_bytes":   true,
	"memory.usage_in_bytes":       true,
	"memory.oom_control":          true,
	"memory.current":              true,
	"memory.events":               true,
}

// held is one cgroup's open hot files. Its methods are safe for
// concurrent use: a read or write at offset 0 needs no shared position.
type held struct {
	fs fsys
	mu sync.Mutex
	// fds maps a file and its mode ("r" or "w") to its descriptor; nil
	// once closed, or for a fake tree of plain files, whose files tests
	// rewrite behind the descriptor's back.
	fds map[string]int
}

func newHeld(f fsys) *held {
	h := &held{fs: f}
	if f.h.mkdir == nil && f.h.write == nil {
		h.fds = make(map[string]int)
	}
	return h
}

// fd returns file's held descriptor for mode ("r" or "w"), opening it on
// first use; -1 if file is not held.
func (h *held) fd(file, mode string) (int, error) {
	if !hotFiles[filepath.Base(file)] {
		return -1, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fds == nil {
		return -1, nil
	}
	key := file + "\x00" + mode
	if fd, ok := h.fds[key]; ok {
		return fd, nil
	}
	flags := unix.O_RDONLY
	if mode == "w" {
		flags = unix.O_WRONLY
	}
	fd, err := retryEINTR(func() (int, error) { return unix.Open(file, flags|unix.O_CLOEXEC, 0) })
	if err != nil {
		return -1, newFileError("open", file, err)
	}
	h.fds[key] = fd
	return fd, nil
}

// write writes data to file as fsys.write does.
func (h *held) write(file, data string) error {
	fd, err := h.fd(file, "w")
	if err != nil || fd < 0 {
		return errors.Join(err, h.fs.write(file, data))
	}
	n, err := retryEINTR(func() (int, error) { return unix.Pwrite(fd, []byte(data), 0) })
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return newFileError("write", file, err)
	}
	return nil
}

// read reads the whole of file, afresh: cgroupfs regenerates a file's
// text for a read at offset 0.
func (h *held) read(file string) (string, error) {
	fd, err := h.fd(file, "r")
	if err != nil || fd < 0 {
		if err != nil {
			return "", err
		}
		return readFile(file)
	}
	var b []byte
	buf := make([]byte, 1024)
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Pread(fd, buf, int64(len(b))) })
		if err != nil {
			return "", newFileError("read", file, err)
		}
		b = append(b, buf[:n]...)
		// A cgroup file is a kernel seq_file: a read fills the buffer
		// from a page-sized one of the kernel's, line after line, and
		// stops short of it only where the file ends (or a line will not
		// fit in the rest of the kernel's page, and no line of a cgroup
		// file is near 3 KiB). A short read is the whole file, with no
		// second call to find the end.
		if n < len(buf) {
			return string(b), nil
		}
	}
}

func (h *held) readInt(file string) (int64, error) {
	s, err := h.read(file)
	if err != nil {
		return 0, err
	}
	return parseInt(file, s)
}

func (h *held) readKey(file, key string) (int64, error) {
	s, err := h.read(file)
	if err != nil {
		return 0, err
	}
	return parseKeyOf(file, s, key)
}

// close closes every held descriptor; later uses open files each time.
func (h *held) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, fd := range h.fds {
		unix.Close(fd)
	}
	h.fds = nil
}
