package api

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"boxer"
)

// Seeds shared by the fuzz targets: the seeds' own examples and the shapes
// the decoding tables exercise.
var fuzzSeeds = []string{
	`{"code": "print(2 + 2)", "language": "python"}`,
	`{"code":"import math; print(math.factorial(20))"}`,
	`{"code":"a","code":"b"}`,
	`{"Code":"x"}`,
	`{"code":"x"} {}`,
	`{"code":"a\u0000b"}`,
	"{\"code\":\"a\xffb\"}",
	`{"code":"\ud800"}`,
	`{"code":null}`,
	`{"files":{"main.py":"print('hello world')"},"timeout_seconds":10,"memory_mb":256}`,
	`{"files":{"test_math.py":"x","utils.py":"y"},"command":["python","-m","pytest","test_math.py"],"timeout_seconds":30,"memory_mb":512}`,
	`{"files":{"main.py":"x"},"artifact_paths":["output/chart.png"],"timeout_seconds":20,"memory_mb":512}`,
	`{"files":{"./a":"1","a":"2"}}`,
	`{"files":{"a":"1","a/b":"2"}}`,
	`{"files":{"../x":""},"cpus":0.1,"stdin":"in","job_id":"j-1","runtime":"python"}`,
	`{"files":{"main.py":""},"memory_mb":512.0,"cpus":1e0}`,
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseJSON(data)
		if err != nil {
			// What encoding/json accepts, the strict reader refuses only
			// for duplicate keys or depth.
			if json.Valid(data) && utf8.Valid(data) {
				msg := err.Error()
				if !strings.Contains(msg, "duplicate object key") && !strings.Contains(msg, "nested deeper") {
					t.Fatalf("parseJSON(%q) = %v, but it is valid JSON", data, err)
				}
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("parseJSON accepted %q, which is not valid JSON", data)
		}
		if !hasBadText(v) {
			if got, want := toAny(v), stdDecode(t, data); !jsonEqual(got, want) {
				t.Fatalf("parseJSON(%q) = %#v, encoding/json %#v", data, got, want)
			}
		}
	})
}

// jsonEqual compares decoded values (DeepEqual, spelled out so that a nil
// and an empty slice from the two decoders compare equal).
func jsonEqual(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return string(ab) == string(bb)
}

func FuzzDecodeExec(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeExec(body, DefaultMaxCodeBytes)
		if e != nil {
			if httpStatus(e.Code) >= 500 {
				t.Fatalf("decodeExec(%q): %v is not a client error", body, e)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if !utf8.ValidString(req.Code) || strings.IndexByte(req.Code, 0) >= 0 || len(req.Code) > DefaultMaxCodeBytes {
			t.Fatalf("accepted code %q breaks the invariants", req.Code)
		}
		var std map[string]any
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		if std["code"] != req.Code {
			t.Fatalf("code = %q, encoding/json reads %q", req.Code, std["code"])
		}
		if lang, ok := std["language"]; ok && !isSupportedLanguage(lang.(string)) {
			t.Fatalf("accepted language %q", lang)
		}
		for k := range std {
			if k != "code" && k != "language" {
				t.Fatalf("accepted unknown field %q", k)
			}
		}
	})
}

func FuzzDecodeRunPython(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := decodeRunPython(body)
		if e != nil {
			if httpStatus(e.Code) >= 500 {
				t.Fatalf("decodeRunPython(%q): %v is not a client error", body, e)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		checkRunRequest(t, req)
		if req.hash() != req.hash() {
			t.Fatal("hash is not deterministic")
		}
		job := req.job(boxer.DefaultLimits())
		if job.Limits.CPUs < boxer.MinCPUs || job.Limits.CPUs > boxer.MaxCPUs ||
			job.Limits.MemoryBytes < minMemoryMB<<20 || job.Limits.MemoryBytes > maxMemoryMB<<20 ||
			job.Limits.WallTime < minTimeoutSecs*1e9 || job.Limits.WallTime > maxTimeoutSecs*1e9 {
			t.Fatalf("job limits out of range: %+v", job.Limits)
		}
	})
}

// checkRunRequest asserts decodeRunPython's postconditions.
func checkRunRequest(t *testing.T, req *runRequest) {
	t.Helper()
	textOK := func(what, s string) {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("%s %q is not NUL-free UTF-8", what, s)
		}
	}
	pathOK := func(what, p string) {
		textOK(what, p)
		if p == "" || p == "." || path.Clean(p) != p || path.IsAbs(p) || strings.HasPrefix(p, "../") || p == ".." ||
			strings.ContainsAny(p, "\\") || len(p) > maxPathBytes {
			t.Fatalf("%s %q is not a clean relative path", what, p)
		}
	}
	if n := len(req.Files); n < minFiles || n > maxFiles {
		t.Fatalf("%d files", n)
	}
	seen := map[string]bool{}
	for i, f := range req.Files {
		pathOK("file path", f.Path)
		textOK("file content", string(f.Content))
		if seen[f.Path] {
			t.Fatalf("duplicate file %q", f.Path)
		}
		seen[f.Path] = true
		if i > 0 && req.Files[i-1].Path >= f.Path {
			t.Fatalf("files not sorted: %q before %q", req.Files[i-1].Path, f.Path)
		}
	}
	for _, f := range req.Files {
		for dir := parentDir(f.Path); dir != ""; dir = parentDir(dir) {
			if seen[dir] {
				t.Fatalf("%q is both a file and the directory of %q", dir, f.Path)
			}
		}
	}
	textOK("stdin", req.Stdin)
	if req.JobID != "" && checkJobID(req.JobID) != "" {
		t.Fatalf("job_id %q accepted", req.JobID)
	}
	if len(req.Command) == 0 || req.Command[0] == "" || len(req.Command) > maxCommandArgs {
		t.Fatalf("command %q accepted", req.Command)
	}
	for _, a := range req.Command {
		textOK("command element", a)
	}
	if len(req.ArtifactPaths) > maxArtifacts {
		t.Fatalf("%d artifact paths", len(req.ArtifactPaths))
	}
	arts := map[string]bool{}
	for _, p := range req.ArtifactPaths {
		pathOK("artifact path", p)
		if arts[p] {
			t.Fatalf("duplicate artifact path %q", p)
		}
		arts[p] = true
	}
}
