package sandbox

import (
	"errors"
	"fmt"
	"path"
	"runtime"
	"strings"

	"boxer"

	"golang.org/x/sys/unix"
)

// mountWork mounts the run's work dir: a tmpfs on the host side, so that
// boxer can fill it before the program starts and read artifacts from it
// after every process of the run is dead. Its pages are charged to the
// memory cgroup of whoever writes them: the program's writes count against
// the run's memory limit.
func mountWork(dir string, uid uint32, sizeBytes, inodes int64) error {
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", sizeBytes, inodes, uid, uid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount work dir tmpfs: %w", err)
	}
	return nil
}

// resizeWork changes the work dir's size cap, for a sandbox prepared before
// its job's limits were known.
func resizeWork(dir string, sizeBytes int64) error {
	opts := fmt.Sprintf("size=%d", sizeBytes)
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("resize work dir tmpfs: %w", err)
	}
	return nil
}

// unmountWork detaches the work dir's tmpfs, freeing its pages.
func unmountWork(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount work dir: %w", err)
	}
	return nil
}

// writeFiles places the job's input files in the fresh work dir open at
// dirfd, created as uid: on the calling goroutine's thread, locked to it
// while its filesystem uid and gid are uid's. A warm child's work dir
// belongs to the zygote's user namespace, where boxer's own uid does not
// exist and the kernel refuses files it would own; created as uid, the
// files need no chown either.
// Nothing runs in the sandbox yet; even so every path is resolved beneath
// dirfd without following symlinks.
func writeFiles(dirfd int, uid uint32, files []boxer.File) error {
	return writeFilesAs(dirfd, uid, files, false)
}

// writeFilesAs is writeFiles; with replace, a file that exists is
// overwritten rather than refused (a session's upload). Every directory is
// walked one component at a time through descriptors and every file opened
// beneath its directory's, never following a symlink, so that caller code
// changing the tree meanwhile (a session's runs between uploads) can lead
// the writes nowhere outside it; a FIFO or anything else but a regular file
// is refused without blocking.
func writeFilesAs(dirfd int, uid uint32, files []boxer.File, replace bool) error {
	if len(files) == 0 {
		return nil
	}
	// On the caller's goroutine, not one of its own: starting one, and
	// the wake-ups of idle threads that come with it, cost a paced warm
	// run 60 to 90 us on a 2026 VM.
	runtime.LockOSThread()
	err := setFSIDs(uid)
	if err == nil {
		err = writeFilesHere(dirfd, files, replace)
	}
	if setFSIDs(0) != nil {
		// Cannot happen while boxer holds CAP_SETUID, which the first
		// change needed. Were it to, this thread must run nothing else,
		// deferred calls included (a recovered panic would go on to write
		// boxer's files as uid): its goroutine stays on it, parked.
		select {}
	}
	runtime.UnlockOSThread()
	return err
}

// setFSIDs sets this thread's filesystem uid and gid and checks they took:
// setfsuid(2) reports no failure of its own.
func setFSIDs(id uint32) error {
	_ = unix.Setfsgid(int(id))
	_ = unix.Setfsuid(int(id))
	gid, _ := unix.SetfsgidRetGid(-1) // -1 changes nothing and returns the current one
	uid, _ := unix.SetfsuidRetUid(-1)
	if uint32(uid) != id || uint32(gid) != id {
		return fmt.Errorf("set filesystem ids to %d: got %d/%d", id, uid, gid)
	}
	return nil
}

func writeFilesHere(dirfd int, files []boxer.File, replace bool) error {
	for _, f := range files {
		if err := boxer.CheckRelPath(f.Path); err != nil {
			return boxer.Errorf(boxer.ECodeInvalidRequest, "file path %q %v", f.Path, err)
		}
		if err := writeFileHere(dirfd, f, replace); err != nil {
			return err
		}
	}
	return nil
}

func writeFileHere(dirfd int, f boxer.File, replace bool) error {
	dir, err := makeDirs(dirfd, path.Dir(f.Path))
	if err != nil {
		return boxer.Errorf(boxer.ECodeInvalidRequest, "file %q: %v", f.Path, err)
	}
	if dir != dirfd {
		defer unix.Close(dir)
	}
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if !replace {
		flags |= unix.O_EXCL
	}
	fd, err := unix.Openat2(dir, path.Base(f.Path), &unix.OpenHow{
		Flags:   uint64(flags),
		Mode:    0o644,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return boxer.Errorf(boxer.ECodeInvalidRequest, "file %q: %v", f.Path, describe(err))
	}
	// Plain system calls, not an *os.File: the runtime's poller would take
	// the descriptor on and off its epoll set for a regular file, which
	// never blocks (a request writes a file or more each).
	defer unix.Close(fd)
	if replace { // what O_EXCL made is a regular file; what was there may be anything
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat input file: %w", err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return boxer.Errorf(boxer.ECodeInvalidRequest, "file %q: exists and is not a regular file", f.Path)
		}
	}
	// The mode, not boxer's umask: a cold run's files are as a warm
	// run's, however boxer was started.
	err = unix.Fchmod(fd, 0o644)
	if err == nil && replace {
		err = unix.Ftruncate(fd, 0)
	}
	if err == nil {
		err = writeAll(fd, f.Content)
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return boxer.Errorf(boxer.ECodeInvalidRequest, "files do not fit in the work dir's disk limit")
	}
	if err != nil {
		return fmt.Errorf("write input file: %w", err)
	}
	return nil
}

// writeAll writes b to the regular file fd.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// makeDirs opens the directory rel beneath dirfd, making what is missing
// of it, one component at a time: each is made with mkdirat and opened
// with O_NOFOLLOW from its parent's descriptor, so that no symlink is ever
// followed, whoever put it there. For rel "." it returns dirfd itself,
// which the caller must not close: a file at the top of the work dir, as
// most are, costs no more calls than that.
func makeDirs(dirfd int, rel string) (int, error) {
	if rel == "." {
		return dirfd, nil
	}
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}
	for _, part := range strings.Split(rel, "/") {
		err := unix.Mkdirat(cur, part, 0o755)
		made := err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			closeCur()
			return -1, describe(err)
		}
		next, err := unix.Openat(cur, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		closeCur()
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("%s is a file and a directory", rel)
		}
		if err != nil {
			return -1, describe(err)
		}
		if made { // the mode, not boxer's umask
			if err := unix.Fchmod(next, 0o755); err != nil {
				unix.Close(next)
				return -1, describe(err)
			}
		}
		cur = next
	}
	return cur, nil
}

// describe turns an errno into words fit for the caller, without paths.
func describe(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errors.New(errno.Error())
	}
	return err
}

// openDir opens a directory for use as the dirfd of writeFiles and
// collectArtifacts.
func openDir(p string) (int, error) {
	fd, err := unix.Open(p, unix.O_DIRECTORY|unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open work dir: %w", err)
	}
	return fd, nil
}
