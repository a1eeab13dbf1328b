// Command soak sends N mixed requests at concurrency C to a real boxer
// server and then checks that nothing was lost or leaked (issue 6):
//
//   - every response is well formed and has the outcome its request must
//     have (ok, nonzero exit, timeout, OOM, a fork bomb held at the pids
//     limit, an output flood truncated, refused bad input);
//   - afterwards no sandbox process, cgroup, mount or run directory is left
//     beyond what the idle warm pool holds, the server's open descriptors
//     are back where they started, and its RSS is within 10% of the
//     baseline, taken after a warm-up with the mix at full concurrency
//     (what a server grows once under load is not a leak; the RSS before
//     the warm-up is printed too);
//   - the server logged no error (its warnings are printed).
//
// It builds cmd/boxer, starts it on a free loopback port with its own state
// and data dirs, prints the figures, and exits 1 on any failure. Root.
//
//	go run ./bench/soak -n 10000 -c 32
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"boxer/internal/observe"
	"boxer/internal/sandbox"
)

var (
	total       = flag.Int("n", 10000, "requests")
	concurrency = flag.Int("c", 32, "requests in flight")
	slots       = flag.Int("slots", 4*runtime.NumCPU(), "the server's --slots: runs at once (a third of the mix sleeps or waits)")
	rssFrom     = flag.Int("rss-check-from", 1000, "the fewest requests for which the RSS check applies; below, RSS is printed only")
)

// kind is one sort of request and the outcome it must get.
type kind struct {
	name  string
	path  string
	body  string
	check func(code int, m map[string]any) error
}

func result(m map[string]any, key string) any {
	if r, ok := m["result"].(map[string]any); ok {
		return r[key]
	}
	return m[key]
}

func want(cond bool, format string, args ...any) error {
	if cond {
		return nil
	}
	return fmt.Errorf(format, args...)
}

var kinds = []kind{
	{"ok", "/v1/exec", `{"code": "print(2 + 2)"}`, func(c int, m map[string]any) error {
		return want(c == 200 && result(m, "stdout") == "4\n", "ok: %d %v", c, m)
	}},
	{"exception", "/v1/exec", `{"code": "raise ValueError('x')"}`, func(c int, m map[string]any) error {
		return want(c == 200 && result(m, "exitCode") == 1.0 && strings.Contains(fmt.Sprint(result(m, "stderr")), "ValueError"), "exception: %d %v", c, m)
	}},
	{"timeout", "/v1/run-python", `{"files": {"main.py": "import time\nprint('t', flush=True)\ntime.sleep(30)"}, "timeout_seconds": 1}`, func(c int, m map[string]any) error {
		return want(c == 200 && m["timed_out"] == true && m["stdout"] == "t\n", "timeout: %d %v", c, m)
	}},
	{"oom", "/v1/run-python", `{"files": {"main.py": "x = []\nwhile True: x.append(bytearray(1 << 20))"}, "memory_mb": 64}`, func(c int, m map[string]any) error {
		return want(c == 200 && m["oom_killed"] == true, "oom: %d %v", c, m)
	}},
	// A fork bomb is held either way: stopped at the pids limit, or (on a
	// busy host, before it gets there) at its time limit.
	{"fork bomb", "/v1/run-python", `{"files": {"main.py": "import os\nn = 0\ntry:\n  while True:\n    if os.fork() == 0:\n      import time; time.sleep(30)\n    n += 1\nexcept OSError:\n  print('held', n < 200)"}, "timeout_seconds": 10}`, func(c int, m map[string]any) error {
		return want(c == 200 && (m["stdout"] == "held True\n" || m["timed_out"] == true), "fork bomb: %d %v", c, m)
	}},
	{"output flood", "/v1/exec", `{"code": "import sys\nsys.stdout.write('x' * (3 << 20))"}`, func(c int, m map[string]any) error {
		return want(c == 200 && result(m, "stdoutTruncated") == true, "flood: %d truncated=%v", c, result(m, "stdoutTruncated"))
	}},
	{"files and artifact", "/v1/run-python", `{"files": {"main.py": "open('out.txt', 'w').write(open('in.txt').read().upper())", "in.txt": "abc"}, "artifact_paths": ["out.txt"]}`, func(c int, m map[string]any) error {
		arts, _ := m["artifacts"].([]any)
		ok := c == 200 && len(arts) == 1 && arts[0].(map[string]any)["content"] == "ABC"
		return want(ok, "artifact: %d %v", c, m)
	}},
	// The storage-heavy kinds (issue 19): a file of NUL bytes comes back
	// as base64, a third more than its size; the largest answer the API
	// gives (four 16 MiB artifacts and a 1 MiB print) is sent whole, and
	// with its job_id kept only as result_not_kept; a small job_id result
	// is kept. {{N}} is a number no other request of the soak has.
	{"nul artifact", "/v1/run-python", `{"files": {"main.py": "open('z', 'wb').write(bytes(1 << 20))"}, "artifact_paths": ["z"]}`, func(c int, m map[string]any) error {
		arts, _ := m["artifacts"].([]any)
		ok := c == 200 && len(arts) == 1 && arts[0].(map[string]any)["encoding"] == "base64" && len(fmt.Sprint(arts[0].(map[string]any)["content"])) == 1398104
		return want(ok, "nul artifact: %d %.300v", c, m)
	}},
	{"largest answer", "/v1/run-python", `{"job_id": "soak-{{N}}", "files": {"main.py": "import os\nfor i in range(4): open('a%d' % i, 'wb').write(os.urandom(16 << 20))\nprint('x' * (1 << 20))"}, "artifact_paths": ["a0", "a1", "a2", "a3"], "memory_mb": 1024}`, func(c int, m map[string]any) error {
		arts, _ := m["artifacts"].([]any)
		ok := c == 200 && len(arts) == 4 && m["stdout_truncated"] == true
		for _, a := range arts {
			ok = ok && a.(map[string]any)["size"] == float64(16<<20)
		}
		return want(ok, "largest answer: %d, %d artifacts, %.300v", c, len(arts), m["missing_artifacts"])
	}},
	{"kept result", "/v1/run-python", `{"job_id": "soak-{{N}}", "files": {"main.py": "print(1)"}}`, func(c int, m map[string]any) error {
		return want(c == 200 && m["stdout"] == "1\n", "kept result: %d %v", c, m)
	}},
	{"bad json", "/v1/exec", `{"code": `, func(c int, m map[string]any) error {
		return want(c == 400 && m["success"] == false, "bad json: %d %v", c, m)
	}},
	{"bad field", "/v1/run-python", `{"files": {"../x.py": "print(1)"}}`, func(c int, m map[string]any) error {
		return want(c == 400 && m["success"] == false, "bad path: %d %v", c, m)
	}},
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("soak: passed")
}

func run() error {
	tmp, err := os.MkdirTemp("", "boxer-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "boxer")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/boxer").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	state := filepath.Join("/run", "boxer-soak-"+strconv.Itoa(os.Getpid()))
	defer os.RemoveAll(state)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(tmp, "data"), "--state-dir", state,
		"--slots", strconv.Itoa(*slots), "--queue", strconv.Itoa(*concurrency*2), "--queue-timeout", "5m", "--max-queue-wait", "5m",
		"--pool-min", "2", "--pool-max", "8")
	log := &logCount{}
	url, err := start(cmd, log)
	if err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	pid := cmd.Process.Pid
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency}, Timeout: 5 * time.Minute}
	cfg := sandbox.Config{StateDir: state}.WithDefaults()
	in := observe.Instance{PID: pid, StateDir: state, CgroupName: cfg.CgroupName, IDBase: cfg.IDBase, IDSpan: cfg.IDSpan}
	start := snapshot(in)
	// Warm up with the mix at full concurrency: what a server grows once
	// under load (threads, code pages touched, the allocators' high-water
	// marks, the health figures' window) belongs in the baseline; what it
	// keeps growing afterwards is a leak. A burst of 2C was too short for
	// the high-water marks: after it, RSS grew by 2.6 MiB over 2,000
	// requests (anonymous memory by 2.3) and by 2.9 over 10,000, a plateau
	// and not a leak; so the warm-up is a tenth of the run. Then let the
	// pool settle and take the baseline.
	warmup := max(2**concurrency, len(kinds), *total/10)
	if failed, failures := load(client, url, warmup); failed > 0 {
		return fmt.Errorf("warm-up: %d wrong: %v", failed, failures)
	}
	client.CloseIdleConnections()
	// Settled means the counts and the RSS held still for a second: the
	// server returns freed memory 2 s after its last run, and a baseline
	// taken before that would hide a leak behind garbage.
	before := settle(in, func(now, prev footprint) bool { return now.sameCounts(prev) && now.rss == prev.rss })
	fmt.Printf("soak: %d requests, concurrency %d, %d kinds; at start: server RSS %.1f MiB; after a warm-up of %d: %s\n",
		*total, *concurrency, len(kinds), mib(start.rss), warmup, before)

	t0 := time.Now()
	failed, failures := load(client, url, *total)
	elapsed := time.Since(t0)
	fmt.Printf("soak: %d requests in %v (%.1f/s), %d wrong\n", *total, elapsed.Round(time.Millisecond), float64(*total)/elapsed.Seconds(), failed)
	for _, f := range failures {
		fmt.Println("  ", f)
	}

	// After the load: drop the client's idle connections (each holds a
	// server descriptor), let the pool settle and spent sandboxes go (the
	// server also returns freed memory 2 s after its last run), then
	// compare with the baseline.
	client.CloseIdleConnections()
	after := settle(in, func(now, _ footprint) bool { return now.leaksVs(before) == nil })
	fmt.Printf("soak: after %s\n", after)
	fmt.Printf("soak: server peak RSS %.1f MiB (VmHWM, the whole run); database %.1f MiB\n", mib(peakRSS(pid)), mib(dirSize(filepath.Join(tmp, "data"))))
	fmt.Printf("soak: server log: %s\n", log)
	return errors.Join(want(failed == 0, "%d responses had the wrong outcome", failed), after.leaksVs(before),
		want(log.errors() == 0, "the server logged %d errors", log.errors()))
}

// load sends n requests of the mix, kind after kind, at the -c
// concurrency, and checks each answer. It returns how many were wrong and
// the first few failures.
func load(client *http.Client, url string, n int) (int64, []string) {
	var next, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				k := kinds[i%int64(len(kinds))]
				code, m, err := post(client, url, k)
				if err == nil {
					err = k.check(code, m)
				}
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, k.name+": "+trim(err.Error()))
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return failed.Load(), failures
}

// settle polls in's footprint once a second until done(now, previous)
// holds, or for a minute, and returns the last one.
func settle(in observe.Instance, done func(now, prev footprint) bool) footprint {
	prev := snapshot(in)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(time.Second) // polling interval
		now := snapshot(in)
		if done(now, prev) {
			return now
		}
		prev = now
	}
	return prev
}

// sameCounts reports whether s and o hold the same number of everything.
func (s footprint) sameCounts(o footprint) bool {
	return len(s.Diff(o.Footprint)) == 0
}

// footprint is what the server and its sandboxes hold on the host, and
// the server's RSS.
type footprint struct {
	observe.Footprint
	rss int64
	// The parts of the RSS, and the threads, to tell the Go heap from
	// SQLite's memory, mapped files and thread stacks when RSS grows.
	anon, file, shmem int64
	threads           int
}

func (s footprint) String() string {
	fds := 0
	for _, n := range s.FDs {
		fds += n
	}
	return fmt.Sprintf("sandbox processes %d, cgroups %d, mounts %d, run dirs %d, server fds %d, server RSS %.1f MiB (anon %.1f, file %.1f, shmem %.1f; %d threads)",
		s.Procs, s.Cgroups, s.Mounts, s.RunDirs, fds, mib(s.rss), mib(s.anon), mib(s.file), mib(s.shmem), s.threads)
}

func mib(b int64) float64 {
	return float64(b) / (1 << 20)
}

// leaksVs compares with the baseline: the idle pool is the same size, so
// nothing but RSS (allowed 10%) may have grown.
func (s footprint) leaksVs(b footprint) error {
	var errs []error
	for _, c := range []struct {
		what      string
		now, then int
	}{{"sandbox processes", s.Procs, b.Procs}, {"cgroups", s.Cgroups, b.Cgroups}, {"mounts", s.Mounts, b.Mounts},
		{"run dirs", s.RunDirs, b.RunDirs}} {
		if c.now > c.then {
			errs = append(errs, fmt.Errorf("%s: %d after, %d before", c.what, c.now, c.then))
		}
	}
	for t, n := range s.FDs {
		if n > b.FDs[t] {
			errs = append(errs, fmt.Errorf("server descriptors to %s: %d after, %d before", t, n, b.FDs[t]))
		}
	}
	// A short run's RSS is not a leak check: after a warm-up of 16, seven
	// 90-request runs ended between -11% and +18% of their baselines (the
	// server's anonymous memory moving by up to 3.5 MiB on about 21).
	if *total >= *rssFrom && float64(s.rss) > 1.1*float64(b.rss) {
		errs = append(errs, fmt.Errorf("server RSS %.1f MiB after, %.1f MiB before (over 10%%)", float64(s.rss)/(1<<20), float64(b.rss)/(1<<20)))
	}
	return errors.Join(errs...)
}

func snapshot(in observe.Instance) footprint {
	s := footprint{Footprint: observe.Snapshot(in)}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", in.PID))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			s.rss = n << 10
		case "RssAnon:":
			s.anon = n << 10
		case "RssFile:":
			s.file = n << 10
		case "RssShmem:":
			s.shmem = n << 10
		case "Threads:":
			s.threads = int(n)
		}
	}
	return s
}

// peakRSS is the most resident memory process pid has had (VmHWM).
func peakRSS(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// dirSize is the bytes of the files in dir: the database and its journal.
func dirSize(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

func start(cmd *exec.Cmd, log io.Writer) (string, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	url, err := observe.Serving(stderr, log)
	if err != nil {
		cmd.Wait()
	}
	return url, err
}

// requests numbers the soak's requests, for {{N}} in a body.
var requests atomic.Int64

func post(c *http.Client, url string, k kind) (int, map[string]any, error) {
	body := strings.ReplaceAll(k.body, "{{N}}", strconv.FormatInt(requests.Add(1), 10))
	resp, err := c.Post(url+k.path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%d: body is not JSON: %.200q", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		return resp.StatusCode, m, errors.New("no X-Request-Id header")
	}
	return resp.StatusCode, m, nil
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// logCount counts the server's log lines by level and keeps the first few
// warnings and errors, to be printed with the figures. An error fails the
// soak; a warning (a job run cold when no warm sandbox could be prepared)
// is not a wrong answer, but it says where the time went.
type logCount struct {
	mu      sync.Mutex
	partial []byte
	levels  map[string]int
	first   []string
}

func (l *logCount) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := l.partial[:i]
		var m struct{ Level string }
		if json.Unmarshal(line, &m) != nil {
			m.Level = "not JSON"
		}
		if l.levels == nil {
			l.levels = map[string]int{}
		}
		l.levels[m.Level]++
		if m.Level != "INFO" && m.Level != "DEBUG" && len(l.first) < 10 {
			l.first = append(l.first, trim(string(line)))
		}
		l.partial = l.partial[i+1:]
	}
}

// errors counts the ERROR lines: what the server could not handle (a
// cgroup it could not remove, a sandbox broken after its start).
func (l *logCount) errors() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.levels["ERROR"]
}

func (l *logCount) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d info, %d warn, %d error", l.levels["INFO"], l.levels["WARN"], l.levels["ERROR"])
	if n := l.levels["not JSON"]; n > 0 {
		s += fmt.Sprintf(", %d not JSON", n)
	}
	for _, f := range l.first {
		s += "\n   " + f
	}
	return s
}
