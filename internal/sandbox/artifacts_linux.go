package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"boxer"

	"golang.org/x/sys/unix"
)

// Artifact size caps.
type artifactLimits struct {
	perFile int64
	total   int64
}

// collectArtifacts reads the requested files from the work dir open at
// dirfd.
//
// Precondition: every process of the run is dead, so nothing can swap a
// path component while it is read. Even so each file is opened beneath the
// work dir's descriptor refusing symlinks, magic links and mount crossings,
// non-blocking, and must be a regular file: a FIFO or device never blocks
// or leaks the read.
func collectArtifacts(dirfd int, paths []string, lim artifactLimits) ([]boxer.Artifact, []boxer.MissingArtifact) {
	var (
		arts    []boxer.Artifact
		missing []boxer.MissingArtifact
		total   int64
	)
	for _, p := range paths {
		if err := boxer.CheckRelPath(p); err != nil {
			missing = append(missing, boxer.MissingArtifact{Path: p, Reason: "refused: path " + err.Error()})
			continue
		}
		data, reason := readArtifact(dirfd, p, min(lim.perFile, lim.total-total))
		if reason != "" {
			missing = append(missing, boxer.MissingArtifact{Path: p, Reason: reason})
			continue
		}
		total += int64(len(data))
		sum := sha256.Sum256(data)
		arts = append(arts, boxer.Artifact{Path: p, Size: int64(len(data)), Content: data, SHA256: hex.EncodeToString(sum[:])})
	}
	return arts, missing
}

// readArtifact returns the file's bytes, or the reason it was not read.
func readArtifact(dirfd int, p string, limit int64) ([]byte, string) {
	f, size, reason := openRegular(dirfd, p, limit)
	if f == nil {
		return nil, reason
	}
	defer f.Close()
	// Room for the whole file from the start (and the 512 bytes
	// ReadFrom wants free to look for the end), not a doubling buffer that
	// clears and copies a 10 MB artifact twice over.
	buf := bytes.NewBuffer(make([]byte, 0, min(size, limit)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, "refused: read failed"
	}
	data := buf.Bytes()
	if int64(len(data)) > limit || int64(len(data)) > size && size > limit {
		return nil, fmt.Sprintf("refused: larger than the artifact limit (%d bytes)", limit)
	}
	return data, ""
}

// openRegular opens p beneath dirfd, non-blocking, if it is a regular file
// of at most limit bytes, and returns it with its size; else nil and the
// reason.
func openRegular(dirfd int, p string, limit int64) (*os.File, int64, string) {
	fd, err := openBeneath(dirfd, p)
	if err != nil {
		return nil, 0, openReason(err)
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, 0, "refused: cannot stat"
	}
	reason := ""
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size > limit {
			reason = fmt.Sprintf("refused: larger than the artifact limit (%d bytes)", limit)
		}
	case unix.S_IFDIR:
		reason = "refused: is a directory"
	case unix.S_IFIFO:
		reason = "refused: is a FIFO"
	case unix.S_IFSOCK:
		reason = "refused: is a socket"
	default:
		reason = "refused: not a regular file"
	}
	if reason != "" {
		f.Close()
		return nil, 0, reason
	}
	return f, st.Size, ""
}

const openFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_NOCTTY | unix.O_CLOEXEC

// openBeneath opens p below dirfd without following any symlink.
func openBeneath(dirfd int, p string) (int, error) {
	fd, err := unix.Openat2(dirfd, p, &unix.OpenHow{
		Flags: openFlags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
			unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if !errors.Is(err, unix.ENOSYS) {
		return fd, err
	}
	return openByComponent(dirfd, p) // kernels before 5.6
}

// openByComponent walks p one component at a time with O_NOFOLLOW.
func openByComponent(dirfd int, p string) (int, error) {
	parts := strings.Split(p, "/")
	cur := dirfd
	for i, part := range parts {
		flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			flags = openFlags
		}
		fd, err := unix.Openat(cur, part, flags, 0)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

func openReason(err error) string {
	switch {
	case errors.Is(err, unix.ENOENT):
		return "not found"
	case errors.Is(err, unix.ELOOP):
		return "refused: path goes through a symlink"
	case errors.Is(err, unix.EXDEV):
		return "refused: path leaves the work dir"
	case errors.Is(err, unix.ENOTDIR):
		return "not found: a parent is not a directory"
	case errors.Is(err, unix.ENXIO):
		return "refused: is a socket"
	case errors.Is(err, unix.EACCES):
		return "refused: permission denied (device or unreadable file)"
	default:
		return "refused: " + err.Error()
	}
}
