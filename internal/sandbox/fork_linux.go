package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"boxer"
	"boxer/internal/sandbox/transplant"

	"golang.org/x/sys/unix"
)

// forkFileDepth bounds the directory depth of the files a fork copies.
const forkFileDepth = 128

// copyTimeout bounds a fork's copy of memory and state: past it the fork
// is killed and the copy fails. A variable, for the test that tries it.
var copyTimeout = 30 * time.Second

// afterFork is the first cell a fork runs, unseen: what os.fork does in a
// child, so that the fork's random numbers (and the locks and threads of
// the interpreter's own bookkeeping) are its own. A statement, not an
// expression, so that it leaves no value in _.
const afterFork = "if 1: __import__('ctypes').pythonapi.PyOS_AfterFork_Child()"

// Fork makes dst, a session just started on s's zygote and never used,
// a copy of s: its interpreter's memory and state (package transplant),
// and the files of its /work, /tmp and /dev/shm. The two then diverge,
// each in its own sandbox: dst keeps its own namespaces, uid and cgroup,
// and nothing of s but the copy crosses over. s must be idle, with no
// process or thread but its interpreter's one; a session that is not gets
// a *transplant.RefusedError, and so does one whose zygote has been
// replaced since it started. On an error dst must be closed.
func (s *Session) Fork(ctx context.Context, dst *Session) error {
	if err := s.forkInto(dst); err != nil {
		return err
	}
	res, err := dst.Exec(ctx, afterFork, setupTimeout, nil)
	if err != nil {
		return err
	}
	if res.Status != boxer.StatusOK {
		return fmt.Errorf("the fork's first cell: %s %s", res.Status, res.Error)
	}
	return nil
}

func (s *Session) forkInto(dst *Session) error {
	if !s.busy.TryLock() {
		return ErrSessionBusy
	}
	defer s.busy.Unlock()
	if !dst.busy.TryLock() {
		return ErrSessionBusy
	}
	defer dst.busy.Unlock()
	s.life.RLock()
	defer s.life.RUnlock()
	dst.life.RLock()
	defer dst.life.RUnlock()
	if alive, why := s.Alive(); !alive || s.destroyed {
		return fmt.Errorf("%w: %s", ErrSessionGone, why)
	}
	if alive, why := dst.Alive(); !alive || dst.destroyed {
		return fmt.Errorf("the fork's kernel: %w: %s", ErrSessionGone, why)
	}
	if s.w.z != dst.w.z {
		return &transplant.RefusedError{Reason: "the session started before boxer's sessions zygote was last replaced"}
	}
	// The interpreter and its stopped pid 1, and nothing else: checked
	// with the interpreter stopped, when nothing of the session can make
	// another task.
	only := func() error {
		n, err := s.w.cg.Tasks()
		if err != nil {
			return err
		}
		if n != 2 {
			return &transplant.RefusedError{Reason: fmt.Sprintf(
				"the session has %d processes and threads besides its interpreter; a fork takes a session with none (wait for them, or end them, first)", n-2)}
		}
		return nil
	}
	if err := only(); err != nil {
		return err
	}
	if err := s.copyFiles(dst); err != nil {
		return fmt.Errorf("copy the session's files: %w", err)
	}
	if err := transplant.Copy(s.w.jobPid, dst.w.jobPid, 3, only, copyTimeout); err != nil {
		return err
	}
	dst.lim = s.lim
	return nil
}

// copyFiles copies what s holds in /work, /tmp and /dev/shm into dst's,
// as dst's uid.
func (s *Session) copyFiles(dst *Session) error {
	uid := dst.w.z.userBase + uint32(dst.w.slot)
	for _, dir := range []string{"work", "tmp", "dev/shm"} {
		from, err := openSessionDir(s, dir)
		if err != nil {
			return err
		}
		to, err := openSessionDir(dst, dir)
		if err != nil {
			unix.Close(from)
			return err
		}
		err = copyTreeAs(from, to, uid)
		unix.Close(from)
		unix.Close(to)
		if err != nil {
			return fmt.Errorf("/%s: %w", dir, err)
		}
	}
	return nil
}

// openSessionDir opens a session's /work (through the descriptor its
// kernel sent) or /tmp or /dev/shm (through its kernel's root in /proc)
// for reading.
func openSessionDir(s *Session, dir string) (int, error) {
	if dir == "work" {
		return unix.Openat(s.w.work, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	return unix.Open(fmt.Sprintf("/proc/%d/root/%s", s.w.jobPid, dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// copyTreeAs copies the tree beneath directory from into directory to,
// on a thread of its own: files are created as uid (see writeFilesAs),
// and read as root, whose access the source's modes do not limit.
// Directories, regular files (with their modes and times) and symlinks
// are copied; FIFOs, sockets and devices are not. Nothing is followed.
func copyTreeAs(from, to int, uid uint32) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- copyTree(from, to, uid, 0)
		if setFSIDs(0) == nil {
			runtime.UnlockOSThread()
		} // else the thread, still locked, exits
	}()
	return <-errc
}

func copyTree(from, to int, uid uint32, depth int) error {
	if depth > forkFileDepth {
		return &transplant.RefusedError{Reason: fmt.Sprintf("the session's directories nest deeper than %d", forkFileDepth)}
	}
	if err := setFSIDs(0); err != nil {
		return err
	}
	dup, err := unix.Dup(from)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), "dir")
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := copyEntry(from, to, name, uid, depth); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func copyEntry(from, to int, name string, uid uint32, depth int) error {
	if err := setFSIDs(0); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(from, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	mode := st.Mode & 0o7777
	times := []unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		src, err := unix.Openat(from, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(src)
		if err := setFSIDs(uid); err != nil {
			return err
		}
		if err := unix.Mkdirat(to, name, 0o700); err != nil {
			return err
		}
		dst, err := unix.Openat(to, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dst)
		if err := copyTree(src, dst, uid, depth+1); err != nil {
			return err
		}
		if err := setFSIDs(uid); err != nil {
			return err
		}
		if err := unix.Fchmod(dst, mode); err != nil {
			return err
		}
		return unix.UtimesNanoAt(dst, "", times, unix.AT_EMPTY_PATH)
	case unix.S_IFREG:
		src, err := unix.Openat(from, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		r := os.NewFile(uintptr(src), name)
		defer r.Close()
		if err := setFSIDs(uid); err != nil {
			return err
		}
		fd, err := unix.Openat(to, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		w := os.NewFile(uintptr(fd), name)
		defer w.Close()
		if _, err := io.Copy(w, r); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return errors.New("the fork's disk is full")
			}
			return err
		}
		if err := unix.Fchmod(fd, mode); err != nil {
			return err
		}
		return unix.UtimesNanoAt(fd, "", times, unix.AT_EMPTY_PATH)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(from, name, buf)
		if err != nil {
			return err
		}
		if err := setFSIDs(uid); err != nil {
			return err
		}
		return unix.Symlinkat(string(buf[:n]), to, name)
	}
	return nil // a FIFO, socket or device: not copied
}
