package boxer

import (
	"strings"
	"testing"
)

func TestCheckRelPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"main.py", true},
		{"output/chart.png", true},
		{"a/b/c.txt", true},
		{".hidden", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../../x", false},
		{"a/..", false},
		{"./a", false},
		{"a//b", false},
		{"a/", false},
		{"a\x00b", false},
		{"a\\b", false},
		{"\xff", false},
		{strings.Repeat("a", MaxPathBytes+1), false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			err := CheckRelPath(tc.path)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckRelPath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
			}
		})
	}
}
