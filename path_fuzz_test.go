package boxer

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

// Every path CheckRelPath accepts stays inside the work dir, whatever a
// caller sends: relative, clean, no "..", no NUL, valid UTF-8.
func FuzzCheckRelPath(f *testing.F) {
	for _, s := range []string{"main.py", "output/chart.png", "../x", "/etc/passwd", "a/./b", "a//b", "\x00", "\xff", "a\\b", ".."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckRelPath(p) != nil {
			return
		}
		switch {
		case p == "" || strings.HasPrefix(p, "/") || path.IsAbs(p):
			t.Fatalf("accepted %q: empty or absolute", p)
		case path.Clean(p) != p || strings.HasPrefix(path.Clean("/work/"+p), "/work/") == false:
			t.Fatalf("accepted %q: leaves the work dir once joined", p)
		case strings.ContainsRune(p, 0) || !utf8.ValidString(p) || strings.Contains(p, "\\"):
			t.Fatalf("accepted %q: NUL, backslash or invalid UTF-8", p)
		}
		for _, part := range strings.Split(p, "/") {
			if part == ".." || part == "." || part == "" {
				t.Fatalf("accepted %q: component %q", p, part)
			}
		}
	})
}
