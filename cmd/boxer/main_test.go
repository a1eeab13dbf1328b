package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"boxer"
	"boxer/internal/api"
	"boxer/internal/sandbox"
	"boxer/internal/testenv"
)

// boxerBin builds the real binary once per test run, or returns
// $BOXER_TEST_BIN when set: a binary built beforehand, for machines without
// a Go toolchain (the qemu guests of test/guest).
func boxerBin(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("boxer needs root to create sandboxes")
	}
	if bin := os.Getenv("BOXER_TEST_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "boxer")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// stateDir is a fresh state dir whose parents others can search.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/run", "boxer-cli-test-")
	if err != nil {
		t.Fatal(err)
	}
	// A server the test killed leaves its runs' work dirs mounted.
	t.Cleanup(func() {
		if err := sandbox.RemoveStateDir(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

func TestBinary(t *testing.T) {
	bin := boxerBin(t)
	state := stateDir(t)
	work := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := write("s.py", "import sys\nprint('args', sys.argv[1:])\nprint(open('data.txt').read(), sys.stdin.read())\nopen('out/r.txt', 'w').write('result') if __import__('os').makedirs('out') is None else None\nsys.exit(7)\n")
	data := write("d.txt", "DATA")
	stdin := write("in.txt", "INPUT")
	outDir := filepath.Join(work, "arts")

	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderrIn string
	}{
		{"run passes exit code, args, files, stdin, artifacts",
			[]string{"run", "--state-dir", state, "--file", "data.txt=" + data, "--stdin", stdin, "--artifact", "out/r.txt", "--out", outDir, script, "a", "b"},
			7, "args ['a', 'b']\nDATA INPUT\n", ""},
		{"timeout exits 124",
			// Long enough for the interpreter to start and print, on an
			// emulated CPU too.
			[]string{"run", "--state-dir", state, "--timeout", fmt.Sprintf("%dms", 300*testenv.Slowdown()), write("t.py", "import time; print('x'); time.sleep(30)")},
			124, "x\n", "timeout"},
		{"oom exits 137",
			[]string{"run", "--state-dir", state, "--memory", "64MiB", write("m.py", "b = bytearray(1 << 30)")},
			137, "", "oom"},
		{"bad flag exits 2", []string{"run", "--memory", "lots", script}, 2, "", "invalid size"},
		{"unknown command exits 2", []string{"frobnicate"}, 2, "", "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.stderrIn) {
				t.Fatalf("exit %d stdout %q stderr %q; want %d %q and stderr containing %q", code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderrIn)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "out/r.txt")); err != nil || string(b) != "result" {
		t.Errorf("artifact: %q %v", b, err)
	}

	t.Run("json is the API's result schema", func(t *testing.T) {
		out, err := exec.Command(bin, "run", "--state-dir", state, "--json", write("j.py", "print(2 + 2)")).Output()
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for k, want := range map[string]any{"stdout": "4\n", "stderr": "", "status": "ok", "exit_code": 0.0, "oom_killed": false, "timed_out": false, "job_id": ""} {
			if res[k] != want {
				t.Errorf("%s = %#v, want %#v", k, res[k], want)
			}
		}
		// The same keys as /v1/run-python's answer, no others.
		want, _ := json.Marshal(api.NewRunResponse("", &boxer.Result{}))
		var keys map[string]any
		_ = json.Unmarshal(want, &keys)
		for k := range keys {
			if _, ok := res[k]; !ok {
				t.Errorf("key %s of the API's schema is missing", k)
			}
		}
		for k := range res {
			if _, ok := keys[k]; !ok {
				t.Errorf("key %s is not in the API's schema", k)
			}
		}
	})

	t.Run("doctor", func(t *testing.T) {
		out, err := exec.Command(bin, "doctor", "--state-dir", state).CombinedOutput()
		if err != nil || strings.Contains(string(out), "FAIL") || !strings.Contains(string(out), "seccomp filter") {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
	})
}
