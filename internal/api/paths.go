package api

import (
	"fmt"
	"path"
	"strings"
)

// Bounds of a work-dir-relative path from a caller.
const (
	maxPathBytes      = 512 // whole path, before cleaning
	maxPathComponent  = 255 // NAME_MAX on Linux file systems
	maxPathComponents = 32
)

// cleanRelPath checks a path the caller wants created or read back in the
// run's work dir and returns its clean form. It refuses rather than repairs
// anything that could name a file outside the work dir or surprise the
// caller: empty, absolute, "..", NUL or control characters, backslashes
// (a Windows separator here would silently become part of a file name), a
// trailing slash (a directory, not a file), the work dir itself.
//
// The engine must still resolve the path safely inside the sandbox (no
// following of symlinks the program made); this check is the API's promise
// about what it passes on, not the sandbox's defence.
func cleanRelPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("is empty")
	case len(p) > maxPathBytes:
		return "", fmt.Errorf("is %d bytes long; at most %d are allowed", len(p), maxPathBytes)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("is absolute; paths are relative to the work dir")
	case strings.HasSuffix(p, "/"):
		return "", fmt.Errorf("ends with '/'; it must name a file")
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == 0:
			return "", fmt.Errorf("contains a NUL byte")
		case c < 0x20 || c == 0x7F:
			return "", fmt.Errorf("contains the control character U+%04X", c)
		case c == '\\':
			return "", fmt.Errorf("contains '\\'; use '/' to separate directories")
		}
	}
	parts := strings.Split(p, "/")
	if len(parts) > maxPathComponents {
		return "", fmt.Errorf("has %d components; at most %d are allowed", len(parts), maxPathComponents)
	}
	for _, part := range parts {
		if part == ".." {
			return "", fmt.Errorf("contains a '..' component; paths must stay inside the work dir")
		}
		if len(part) > maxPathComponent {
			return "", fmt.Errorf("has a component of %d bytes; at most %d are allowed", len(part), maxPathComponent)
		}
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("names the work dir itself, not a file")
	}
	return clean, nil
}
