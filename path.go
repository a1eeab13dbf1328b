package boxer

import (
	"errors"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxPathBytes bounds a work-dir-relative path (input file or artifact).
const MaxPathBytes = 1024

// CheckRelPath reports why p is not a plain path inside the work dir: it
// must be relative, clean, valid UTF-8, without NUL, "." or ".." parts.
// Callers refuse such paths rather than clean them, so that what runs is
// what was asked for.
func CheckRelPath(p string) error {
	switch {
	case p == "":
		return errors.New("is empty")
	case len(p) > MaxPathBytes:
		return errors.New("is longer than 1024 bytes")
	case !utf8.ValidString(p):
		return errors.New("is not valid UTF-8")
	case strings.ContainsRune(p, 0):
		return errors.New("contains a NUL byte")
	case strings.HasPrefix(p, "/"):
		return errors.New("is absolute; give a path relative to the work dir")
	case strings.Contains(p, "\\"):
		return errors.New("contains a backslash; use forward slashes")
	}
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "..":
			return errors.New("contains '..'")
		case ".", "":
			return errors.New("is not clean (empty or '.' component)")
		}
	}
	if path.Clean(p) != p {
		return errors.New("is not clean")
	}
	return nil
}
