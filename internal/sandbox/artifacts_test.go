package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"boxer"
)

// Artifacts come back from the work dir only; everything else is refused
// with a reason.
func TestArtifacts(t *testing.T) {
	_, paths := bothPaths(t, func(c *Config) { c.ArtifactBytes = 1 << 20 })
	code := `
import os, socket
os.makedirs("output", exist_ok=True)
open("output/result.txt", "w").write("hello")
open("bin.dat", "wb").write(bytes(range(256)))
os.symlink("/etc/passwd", "link_to_host")
os.symlink("output", "dir_link")
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX); s.bind("sock")
open("big", "wb").write(b"x" * (2 << 20))
os.mkdir("adir")
`
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			checkArtifacts(t, p.run(t, &boxer.Job{
				Argv:  []string{"python", "main.py"},
				Files: []boxer.File{{Path: "main.py", Content: []byte(code)}},
				Artifacts: []string{"output/result.txt", "bin.dat", "missing.txt", "link_to_host", "dir_link/result.txt",
					"fifo", "sock", "big", "adir", "../etc/passwd", "/etc/passwd", "a/../bin.dat", "main.py"},
			}))
		})
	}
}

func checkArtifacts(t *testing.T, res *boxer.Result) {
	t.Helper()
	if res.Status != boxer.StatusOK {
		t.Fatalf("status %s: %s", res.Status, res.Stderr.Data)
	}
	got := map[string]string{}
	for _, a := range res.Artifacts {
		sum := sha256.Sum256(a.Content)
		if a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(a.Content)) {
			t.Errorf("%s: size/sha256 do not match the content", a.Path)
		}
		got[a.Path] = "ok:" + string(a.Content[:min(5, len(a.Content))])
	}
	for _, m := range res.MissingArtifacts {
		got[m.Path] = m.Reason
	}
	for path, want := range map[string]string{
		"output/result.txt":   "ok:hello",
		"bin.dat":             "ok:\x00\x01\x02\x03\x04",
		"main.py":             "ok:\nimpo",
		"missing.txt":         "not found",
		"link_to_host":        "symlink",
		"dir_link/result.txt": "symlink",
		"fifo":                "FIFO",
		"sock":                "socket",
		"big":                 "larger than",
		"adir":                "directory",
		"../etc/passwd":       "'..'",
		"/etc/passwd":         "absolute",
		"a/../bin.dat":        "'..'",
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("%s: got %q, want it to contain %q", path, got[path], want)
		}
	}
}

// The artifacts of one run are capped in total, not only one by one: past
// the total, the rest are refused with a reason.
func TestArtifactsTotalCap(t *testing.T) {
	e := newTestEngine(t, func(c *Config) { c.ArtifactBytes, c.ArtifactsTotalBytes = 2000, 3000 })
	job := pyJob("for n in 'abc': open(n, 'w').write(n * 1500)", boxer.Limits{})
	job.Artifacts = []string{"a", "b", "c"}
	res := runJob(t, e, job)
	if len(res.Artifacts) != 2 || len(res.MissingArtifacts) != 1 || res.MissingArtifacts[0].Path != "c" ||
		!strings.Contains(res.MissingArtifacts[0].Reason, "larger than the artifact limit") {
		t.Fatalf("artifacts %d, missing %+v", len(res.Artifacts), res.MissingArtifacts)
	}
}
