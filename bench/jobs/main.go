// Command jobs measures what agents run, against bare python3 on the same
// machine in the same run (issue 20), on a boxer server with its default
// flags:
//
//   - agent jobs: seed 004's three use cases (a bug reproduction, `python
//     -m pytest test_math.py` with utils.py, a matplotlib chart returned as
//     an artifact), each through POST /v1/run-python, against the same
//     files and command run by bare python3 in a fresh directory (target:
//     p50 at most 0.25x);
//   - cost growth: how a run's time and memory grow with the code's size
//     (1 KiB to 64 KiB), the number of files (1 to 64), what it prints
//     (1 KiB to the 1 MiB cap) and the artifact it returns (to 10 MB), each
//     against bare python3 doing the same (for an artifact: writing the
//     file and reading it back).
//
// Bare python3's memory is its peak RSS; a run's is its cgroup's peak
// (memoryPeakBytes), which also counts the page cache and tmpfs it
// writes. Root, like boxer.
//
//	go run ./bench/jobs [-n 15]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"boxer/bench/internal/served"
)

var (
	python = flag.String("python", "/usr/bin/python3", "the interpreter, for the baseline (the server uses its default)")
	n      = flag.Int("n", 15, "runs of each job, each side")
)

// job is one POST /v1/run-python request, and what bare python3 runs.
type job struct {
	name      string
	files     map[string]string
	command   []string // default python main.py
	artifacts []string
}

func (j job) argv() []string {
	if j.command == nil {
		return []string{"python", "main.py"}
	}
	return j.command
}

// The seed's three use cases, as an agent would send them.
var agentJobs = []job{
	{name: "bug reproduction", files: map[string]string{"main.py": `import json

def total(records):
    return sum(json.loads(r)["value"] for r in records)

print(total(['{"value": 1}', '{"value": 2}', '{"val": 3}']))
`}},
	{name: "python -m pytest", command: []string{"python", "-m", "pytest", "test_math.py"}, files: map[string]string{
		"utils.py": "def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
		"test_math.py": `import pytest
from utils import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2


@pytest.mark.parametrize("a,b,want", [(1, 1, 2), (0, 0, 0), (-1, 1, 0)])
def test_add_table(a, b, want):
    assert add(a, b) == want
`}},
	{name: "matplotlib chart", artifacts: []string{"output/chart.png"}, files: map[string]string{"main.py": `import os
import matplotlib.pyplot as plt

os.makedirs("output", exist_ok=True)
plt.plot([1, 3, 2, 4])
plt.title("chart")
plt.savefig("output/chart.png")
print("saved")
`}},
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

func run() error {
	tmp, err := os.MkdirTemp("", "boxer-jobs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := served.Build(tmp)
	if err != nil {
		return err
	}
	srv, err := served.Start(bin, tmp, "jobs")
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Printf("boxer job benchmark: %d cores, %s, %s, %d runs each, the server's default flags\n\n", runtime.NumCPU(), version(), time.Now().UTC().Format(time.RFC3339), *n)

	fmt.Printf("agent jobs (seed 004)            bare p50   boxer p50    ratio  (target <= 0.25)\n")
	for _, j := range agentJobs {
		b, s, err := compare(srv, tmp, j)
		if err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
		verdict := "MET"
		if b.ratio(s) > 0.25 {
			verdict = "NOT MET"
		}
		fmt.Printf("  %-28s %s %s %8.3f  %s\n", j.name, served.Ms(b.p50()), served.Ms(s.p50()), b.ratio(s), verdict)
	}

	fmt.Printf("\ncost growth                      bare p50   boxer p50    ratio   bare RSS  boxer peak\n")
	for _, g := range growth() {
		b, s, err := compare(srv, tmp, g)
		if err != nil {
			return fmt.Errorf("%s: %w", g.name, err)
		}
		fmt.Printf("  %-28s %s %s %8.3f %7.1fMiB %8.1fMiB\n", g.name, served.Ms(b.p50()), served.Ms(s.p50()), b.ratio(s), mib(b.mem), mib(s.mem))
	}
	return nil
}

// growth lists the cost-growth rows: one dimension grows, the rest stay
// as small as they go.
func growth() []job {
	var out []job
	for _, kb := range []int{1, 4, 16, 64} {
		var code strings.Builder
		for i := 0; code.Len() < kb<<10; i++ {
			fmt.Fprintf(&code, "value_%05d = %d * 2 + 1\n", i, i)
		}
		code.WriteString("print(len(globals()))\n")
		out = append(out, job{name: fmt.Sprintf("code %d KiB", kb), files: map[string]string{"main.py": code.String()}})
	}
	for _, count := range []int{1, 4, 16, 64} {
		files := map[string]string{"main.py": "import glob\nprint(sum(len(open(f).read()) for f in glob.glob('data_*.txt')))\n"}
		for i := range count - 1 {
			files[fmt.Sprintf("data_%02d.txt", i)] = strings.Repeat("x", 1024)
		}
		out = append(out, job{name: fmt.Sprintf("files %d", count), files: files})
	}
	for _, kb := range []int{1, 16, 256, 1024} {
		code := fmt.Sprintf("import sys\nsys.stdout.write('x' * (%d * 1024 - 1) + '\\n')\n", kb)
		out = append(out, job{name: fmt.Sprintf("stdout %d KiB", kb), files: map[string]string{"main.py": code}})
	}
	for _, size := range []int{10 << 10, 1 << 20, 10 << 20} {
		code := fmt.Sprintf("import os\nos.makedirs('output', exist_ok=True)\nopen('output/a.bin', 'wb').write(os.urandom(%d))\n", size)
		out = append(out, job{name: fmt.Sprintf("artifact %s", bytesName(size)), files: map[string]string{"main.py": code}, artifacts: []string{"output/a.bin"}})
	}
	return out
}

// runs are one side's round trips and its largest memory figure.
type runs struct {
	took []time.Duration
	mem  int64
}

func (r runs) p50() time.Duration { return served.Pct(r.took, 50) }

// ratio is other's p50 over r's.
func (r runs) ratio(other runs) float64 { return float64(other.p50()) / float64(r.p50()) }

// compare runs j n times each way, alternating, after one warm-up each.
func compare(srv *served.Server, tmp string, j job) (bare, boxer runs, err error) {
	for i := range *n + 1 {
		d, rss, err := runBare(tmp, j)
		if err != nil {
			return bare, boxer, err
		}
		s, peak, err := runServed(srv, j)
		if err != nil {
			return bare, boxer, err
		}
		if i == 0 {
			continue // warm-up
		}
		bare.took, boxer.took = append(bare.took, d), append(boxer.took, s)
		bare.mem, boxer.mem = max(bare.mem, rss), max(boxer.mem, peak)
	}
	return bare, boxer, nil
}

// runBare writes j's files to a fresh directory and times bare python3
// running its command there, with its output read through pipes, and
// reading back its artifacts.
func runBare(tmp string, j job) (time.Duration, int64, error) {
	dir, err := os.MkdirTemp(tmp, "bare-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	for name, content := range j.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return 0, 0, err
		}
	}
	argv := j.argv()
	cmd := exec.Command(*python, argv[1:]...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	t := time.Now()
	err = cmd.Run()
	for _, a := range j.artifacts {
		if _, rerr := os.ReadFile(filepath.Join(dir, a)); rerr != nil {
			return 0, 0, fmt.Errorf("bare: artifact %s: %v (stderr %s)", a, rerr, errOut.Bytes())
		}
	}
	d := time.Since(t)
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return 0, 0, err
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	return d, rss, nil
}

// runServed posts j to /v1/run-python and checks that its artifacts came
// back.
func runServed(srv *served.Server, j job) (time.Duration, int64, error) {
	req := map[string]any{"files": j.files, "command": j.argv(), "timeout_seconds": 30, "memory_mb": 512}
	if len(j.artifacts) > 0 {
		req["artifact_paths"] = j.artifacts
	}
	var answer struct {
		Status          string `json:"status"`
		MemoryPeakBytes int64  `json:"memory_peak_bytes"`
		Stderr          string `json:"stderr"`
		Artifacts       []struct {
			Path string `json:"path"`
		} `json:"artifacts"`
	}
	d, err := srv.Post("/v1/run-python", req, &answer)
	if err != nil {
		return 0, 0, err
	}
	if answer.Status == "internal_error" || answer.Status == "timeout" || answer.Status == "oom" || len(answer.Artifacts) != len(j.artifacts) {
		return 0, 0, fmt.Errorf("boxer: status %s, %d artifacts of %d, stderr %q", answer.Status, len(answer.Artifacts), len(j.artifacts), answer.Stderr)
	}
	return d, answer.MemoryPeakBytes, nil
}

func version() string {
	out, _ := exec.Command(*python, "--version").Output()
	return strings.TrimSpace(string(out))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func bytesName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
