package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"boxer"
)

func artifactResult() *boxer.Result {
	return &boxer.Result{
		Status:     boxer.StatusOK,
		Wall:       1234 * time.Millisecond,
		CPU:        800 * time.Millisecond,
		MemoryPeak: 50 << 20,
		Stdout:     boxer.Output{Data: []byte("hello world\n"), Bytes: 12},
		Artifacts: []boxer.Artifact{
			{Path: "output/chart.png", Size: 4, Content: []byte("\x89PNG"), SHA256: "s1"},
			{Path: "out.txt", Size: 3, Content: []byte("hi\n"), SHA256: "s2"},
		},
		MissingArtifacts: []boxer.MissingArtifact{{Path: "missing.txt", Reason: "not found"}},
		Timing:           boxer.Timing{Acquire: 5 * time.Millisecond, Run: 1234 * time.Millisecond, Collect: 7 * time.Millisecond},
	}
}

func TestRunPythonResponse(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) { return artifactResult(), nil })
	rec := ts.do("POST", "/v1/run-python", `{"files":{"main.py":"print('hello world')"},"job_id":"j1",`+
		`"artifact_paths":["output/chart.png","out.txt","missing.txt"]}`)
	if rec.Code != 200 {
		t.Fatalf("status = %d: %s", rec.Code, rec.Body)
	}
	want := `{"job_id":"j1","exit_code":0,"stdout":"hello world\n","stderr":"","timed_out":false,"oom_killed":false,` +
		`"duration_ms":1234,"stdout_truncated":false,"stderr_truncated":false,` +
		`"artifacts":[{"path":"output/chart.png","size":4,"encoding":"base64","content":"iVBORw==","sha256":"s1"},` +
		`{"path":"out.txt","size":3,"encoding":"utf-8","content":"hi\n","sha256":"s2"}],` +
		`"missing_artifacts":[{"path":"missing.txt","reason":"not found"}],` +
		`"status":"ok","oom_kills":0,"signal":null,"cpu_time_ms":800,"memory_peak_bytes":52428800,` +
		`"timing":{"queue_ms":0,"acquire_ms":5,"run_ms":1234,"collect_ms":7}}`
	if got := rec.Body.String(); got != want {
		t.Fatalf("body =\n%s\nwant\n%s", got, want)
	}
}

func TestRunPythonEmptyListsAndHash(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	ts.runner.set(func(context.Context, *boxer.Job) (*boxer.Result, error) {
		res := fourResult()
		res.Artifacts = []boxer.Artifact{{Path: "a", Size: 2, Content: []byte("ok")}} // no SHA256 from the engine
		return res, nil
	})
	rec := ts.do("POST", "/v1/run-python", `{"files":{"main.py":"x"},"artifact_paths":["a"]}`)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if m, ok := body["missing_artifacts"].([]any); !ok || len(m) != 0 {
		t.Errorf("missing_artifacts = %#v, want []", body["missing_artifacts"])
	}
	sum := sha256.Sum256([]byte("ok"))
	if got := body["artifacts"].([]any)[0].(map[string]any)["sha256"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 = %v, want it computed", got)
	}
	if id, _ := body["job_id"].(string); !strings.HasPrefix(id, "job_") {
		t.Errorf("job_id = %q, want a generated one", id)
	}
}

func TestRunPythonJob(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *boxer.Job
	}{
		{
			name: "defaults",
			body: `{"files":{"main.py":"print('hello world')"}}`,
			want: &boxer.Job{
				Runtime: "python",
				Argv:    []string{"python", "main.py"},
				Files:   []boxer.File{{Path: "main.py", Content: []byte("print('hello world')")}},
				Limits:  DefaultRunLimits(),
			},
		},
		{
			name: "seed's pytest use case",
			body: `{"files":{"utils.py":"def add(a,b): return a+b\n","test_math.py":"from utils import add\n",` +
				`"./lib//x.py":""},"command":["python","-m","pytest","test_math.py"],"stdin":"in\n",` +
				`"cpus":1,"memory_mb":512,"timeout_seconds":30,"artifact_paths":["output/chart.png"],"runtime":"python"}`,
			want: &boxer.Job{
				Runtime: "python",
				Argv:    []string{"python", "-m", "pytest", "test_math.py"},
				Files: []boxer.File{
					{Path: "lib/x.py", Content: []byte{}},
					{Path: "test_math.py", Content: []byte("from utils import add\n")},
					{Path: "utils.py", Content: []byte("def add(a,b): return a+b\n")},
				},
				Stdin:     []byte("in\n"),
				Artifacts: []string{"output/chart.png"},
				Limits: func() boxer.Limits {
					l := boxer.DefaultLimits()
					l.CPUs, l.MemoryBytes, l.WallTime = 1, 512<<20, 30*time.Second
					return l
				}(),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, Config{}, nil)
			if rec := ts.do("POST", "/v1/run-python", tt.body); rec.Code != 200 {
				t.Fatalf("status = %d: %s", rec.Code, rec.Body)
			}
			if got := ts.runner.last(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("job =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestRunPythonHTTPErrors(t *testing.T) {
	ts := newTestServer(t, Config{MaxRunBodyBytes: 4096}, nil)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"body over the cap", `{"files":{"main.py":"` + strings.Repeat("a", 5000) + `"}}`, 413, boxer.ECodePayloadTooLarge},
		{"bad path", `{"files":{"../x":""}}`, 400, boxer.ECodeInvalidRequest},
		{"malformed", `{"files":`, 400, boxer.ECodeInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, ts.do("POST", "/v1/run-python", tt.body), tt.status, tt.code)
		})
	}
	if n := ts.runner.count(); n != 0 {
		t.Fatalf("rejected requests reached the runner %d times", n)
	}
}

// jsonTextSize says exactly how long marshal makes a text, for every kind
// of byte it escapes and some it does not.
func TestJSONTextSize(t *testing.T) {
	for _, s := range []string{"", "plain", "\x00\x01\x1f", "\b\f\n\r\t", `"\`, "<>&", "\u2028\u2029", "é\u2027\u202a", "\x7f", strings.Repeat("\x00a", 100)} {
		b, err := marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonTextSize([]byte(s)), len(b)-2; got != want {
			t.Errorf("jsonTextSize(%q) = %d, marshal wrote %d", s, got, want)
		}
	}
}

// An artifact that is valid UTF-8 goes as text unless its JSON escapes
// make it longer than its base64: a file of NUL bytes is base64, at a
// third more than its size instead of six times it.
func TestArtifactEncodingBySize(t *testing.T) {
	for _, tc := range []struct {
		content, encoding string
	}{
		{"hello\n", "utf-8"},                         // 7 bytes as text, 8 as base64
		{strings.Repeat("\x00", 1<<20), "base64"},    // 6 MiB as text, 1.33 MiB as base64
		{"a\x00", "base64"},                          // 7 bytes as text, 4 as base64
		{"abcd\x00", "base64"},                       // 10 bytes as text, 8 as base64
		{"\xff", "base64"},                           // not UTF-8 at all
		{strings.Repeat("é", 9), "utf-8"},            // 18 bytes as text, 24 as base64
		{strings.Repeat("\t\n", 9) + "ab", "base64"}, // 38 bytes as text, 28 as base64
	} {
		res := fourResult()
		res.Artifacts = []boxer.Artifact{{Path: "a", Size: int64(len(tc.content)), Content: []byte(tc.content)}}
		if got := NewRunResponse("j", res).Artifacts[0].Encoding; got != tc.encoding {
			t.Errorf("%.20q: encoding %s, want %s", tc.content, got, tc.encoding)
		}
	}
}
