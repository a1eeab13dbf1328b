package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// writeFiles places the job's input files in the fresh work dir, owned by
// the program's uid. Nothing runs in the sandbox yet, so plain path
// operations cannot be raced.
func writeFiles(dir string, uid uint32, files []boxer.File) error {
	for _, f := range files {
		if err := boxer.CheckRelPath(f.Path); err != nil {
			return boxer.Errorf(boxer.ECodeInvalidRequest, "file path %q %v", f.Path, err)
		}
		p := filepath.Join(dir, f.Path)
		if err := mkdirOwned(dir, filepath.Dir(f.Path), uid); err != nil {
			return boxer.Errorf(boxer.ECodeInvalidRequest, "file %q: %v", f.Path, err)
		}
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return boxer.Errorf(boxer.ECodeInvalidRequest, "files do not fit in the work dir's disk limit")
			}
			return boxer.Errorf(boxer.ECodeInvalidRequest, "file %q: %v", f.Path, unwrapPath(err))
		}
		if err := os.Lchown(p, int(uid), int(uid)); err != nil {
			return fmt.Errorf("chown input file: %w", err)
		}
	}
	return nil
}

// mkdirOwned creates rel's directories below dir, owned by uid.
func mkdirOwned(dir, rel string, uid uint32) error {
	if rel == "." {
		return nil
	}
	if err := mkdirOwned(dir, filepath.Dir(rel), uid); err != nil {
		return err
	}
	p := filepath.Join(dir, rel)
	if err := os.Mkdir(p, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
				return nil
			}
			return fmt.Errorf("%s is a file and a directory", rel)
		}
		return unwrapPath(err)
	}
	return os.Lchown(p, int(uid), int(uid))
}

// unwrapPath drops the host path from an *os.PathError, which must not
// reach the caller.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
