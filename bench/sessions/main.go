// Command sessions measures boxer's sessions (issue 17) against bare
// python3 on the same machine in the same run, on a boxer server with its
// default flags but for the session caps, raised so that 50 sessions fit:
//
//   - create: POST /v1/sessions, until its 201, against a bare `python3 -c
//     pass` start (the interpreter a session saves its caller from
//     starting);
//   - exec: a cell (x += 1) in a live session, against the same bare start;
//   - fork: POST /v1/sessions/{id}/fork until its 201, of a session that
//     holds little and of one holding a 16 MiB pandas DataFrame, against
//     the same bare start (which holds nothing), and next to it what the
//     fork saves its caller: a new session, and the cell again;
//   - memory: the PSS that 50 idle sessions (each has run one cell) add to
//     the server's process tree, against 50 bare python3 interpreters
//     idling, each having run the same line.
//
// Root, like boxer.
//
//	go run ./bench/sessions [-n 30] [-idle 50]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"boxer/bench/internal/served"

	"golang.org/x/sys/unix"
)

var (
	python = flag.String("python", "/usr/bin/python3", "the interpreter, for the baseline (the server uses its default)")
	n      = flag.Int("n", 30, "timed runs of each operation, each side")
	idle   = flag.Int("idle", 50, "idle sessions (and idle bare interpreters) whose memory is measured")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sessions:", err)
		os.Exit(1)
	}
}

type info struct {
	SessionID string `json:"session_id"`
}

type cell struct {
	Result struct {
		Status string  `json:"status"`
		Value  *string `json:"value"`
	} `json:"result"`
}

func run() error {
	tmp, err := os.MkdirTemp("", "bench-sessions-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := served.Build(tmp)
	if err != nil {
		return err
	}
	caps := strconv.Itoa(*idle + 2)
	srv, err := served.Start(bin, tmp, "sessions", "--max-sessions", caps, "--max-sessions-per-caller", caps)
	if err != nil {
		return err
	}
	defer srv.Stop()

	// The first session starts the sessions' zygote: not timed.
	var warm info
	if _, err := srv.Post("/v1/sessions", map[string]any{}, &warm); err != nil {
		return err
	}

	var bare, create, exec []time.Duration
	for i := 0; i < *n; i++ {
		d, err := bareStart()
		if err != nil {
			return err
		}
		bare = append(bare, d)
		var s info
		d, err = srv.Post("/v1/sessions", map[string]any{}, &s)
		if err != nil {
			return err
		}
		create = append(create, d)
		if err := srv.Delete("/v1/sessions/" + s.SessionID); err != nil {
			return err
		}
	}
	if _, err := srv.Post("/v1/sessions/"+warm.SessionID+"/exec", map[string]any{"code": "x = 0"}, nil); err != nil {
		return err
	}
	for i := 0; i < *n; i++ {
		var c cell
		d, err := srv.Post("/v1/sessions/"+warm.SessionID+"/exec", map[string]any{"code": "x += 1\nx"}, &c)
		if err != nil {
			return err
		}
		if c.Result.Status != "ok" || c.Result.Value == nil || *c.Result.Value != strconv.Itoa(i+1) {
			return fmt.Errorf("cell %d: %+v", i, c.Result)
		}
		exec = append(exec, d)
	}
	fork, err := forks(srv, warm.SessionID, "x", strconv.Itoa(*n))
	if err != nil {
		return err
	}
	if err := srv.Delete("/v1/sessions/" + warm.SessionID); err != nil {
		return err
	}
	var data info
	if _, err := srv.Post("/v1/sessions", map[string]any{"memory_mb": 512}, &data); err != nil {
		return err
	}
	if _, err := srv.Post("/v1/sessions/"+data.SessionID+"/exec", map[string]any{"code": dataFrame, "timeout_seconds": 120}, nil); err != nil {
		return err
	}
	forkData, err := forks(srv, data.SessionID, "int(df.x.sum())", strconv.Itoa(dataRows*(dataRows-1)/2))
	if err != nil {
		return err
	}
	if err := srv.Delete("/v1/sessions/" + data.SessionID); err != nil {
		return err
	}
	rebuild, err := rebuilds(srv)
	if err != nil {
		return err
	}

	fmt.Printf("boxer %s, %s; python %s\n\n", version(bin), time.Now().UTC().Format(time.RFC3339), pyVersion())
	fmt.Printf("latency                          bare python3 -c pass p50   boxer p50    ratio\n")
	row := func(name string, d []time.Duration) {
		fmt.Printf("  %-30s %s %22s %8.3f\n", name, served.Ms(served.Pct(bare, 50)), served.Ms(served.Pct(d, 50)),
			float64(served.Pct(d, 50))/float64(served.Pct(bare, 50)))
	}
	row("session create (201)", create)
	row("session exec (x += 1)", exec)
	row("session fork (small state)", fork)
	row(fmt.Sprintf("session fork (%s)", dataDesc), forkData)
	row("  or new session + its cell", rebuild)

	// Memory: what idle sessions add to the server's tree.
	before, err := treePSS(srv.Cmd.Process.Pid)
	if err != nil {
		return err
	}
	for i := 0; i < *idle; i++ {
		var s info
		if _, err := srv.Post("/v1/sessions", map[string]any{}, &s); err != nil {
			return err
		}
		if _, err := srv.Post("/v1/sessions/"+s.SessionID+"/exec", map[string]any{"code": "x = 1"}, nil); err != nil {
			return err
		}
	}
	after, err := treePSS(srv.Cmd.Process.Pid)
	if err != nil {
		return err
	}
	barePSS, err := idleBare(*idle)
	if err != nil {
		return err
	}
	fmt.Printf("\nmemory of %d idle interpreters   bare python3 PSS   boxer sessions PSS   ratio\n", *idle)
	fmt.Printf("  %-30s %12.1fMiB %17.1fMiB %8.3f\n", "in all", mib(barePSS), mib(after-before), float64(after-before)/float64(barePSS))
	fmt.Printf("  %-30s %12.1fMiB %17.1fMiB\n", "each", mib(barePSS)/float64(*idle), mib(after-before)/float64(*idle))
	return nil
}

// dataFrame makes a session's state worth forking: a pandas data frame of
// dataRows rows and two columns, about 16 MiB.
const (
	dataRows  = 1_000_000
	dataFrame = "import numpy as np, pandas as pd\ndf = pd.DataFrame({'x': np.arange(1_000_000), 'y': np.random.rand(1_000_000)})"
	dataDesc  = "16 MiB DataFrame"
)

// forks times *n forks of session id, until each one's 201; each fork
// is checked (expr gives want in it), then deleted, untimed.
func forks(srv *served.Server, id, expr, want string) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < *n; i++ {
		var f info
		d, err := srv.Post("/v1/sessions/"+id+"/fork", map[string]any{}, &f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
		var c cell
		if _, err := srv.Post("/v1/sessions/"+f.SessionID+"/exec", map[string]any{"code": expr}, &c); err != nil {
			return nil, err
		}
		if c.Result.Status != "ok" || c.Result.Value == nil || *c.Result.Value != want {
			return nil, fmt.Errorf("fork %d of %s: %s gave %+v, want %s", i, id, expr, c.Result, want)
		}
		if err := srv.Delete("/v1/sessions/" + f.SessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rebuilds times what a fork of the DataFrame's session saves: a new
// session and the cell that makes the DataFrame again.
func rebuilds(srv *served.Server) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < *n; i++ {
		var s info
		d, err := srv.Post("/v1/sessions", map[string]any{"memory_mb": 512}, &s)
		if err != nil {
			return nil, err
		}
		var c cell
		e, err := srv.Post("/v1/sessions/"+s.SessionID+"/exec", map[string]any{"code": dataFrame + "\nint(df.x.sum())", "timeout_seconds": 120}, &c)
		if err != nil {
			return nil, err
		}
		if c.Result.Status != "ok" {
			return nil, fmt.Errorf("rebuild %d: %+v", i, c.Result)
		}
		out = append(out, d+e)
		if err := srv.Delete("/v1/sessions/" + s.SessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bareStart times `python3 -c pass`, its output read through pipes.
func bareStart() (time.Duration, error) {
	cmd := exec.Command(*python, "-c", "pass")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	return time.Since(t), err
}

// idleBare starts k bare interpreters that run x = 1 and wait on their
// stdin, and returns the sum of their PSS.
func idleBare(k int) (int64, error) {
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for i := 0; i < k; i++ {
		c := exec.Command(*python, "-c", "x = 1\nimport sys\nprint('ready', flush=True)\nsys.stdin.read()")
		if _, err := c.StdinPipe(); err != nil {
			return 0, err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := c.Start(); err != nil {
			return 0, err
		}
		cmds = append(cmds, c)
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil {
			return 0, err
		}
	}
	var sum int64
	for _, c := range cmds {
		p, err := pss(c.Process.Pid)
		if err != nil {
			return 0, err
		}
		sum += p
	}
	return sum, nil
}

// treePSS sums the PSS of pid and every process below it, each address
// space once: a warm child's pid 1 and its job's process share one
// (kcmp tells).
func treePSS(pid int) (int64, error) {
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var (
		sum     int64
		counted []int // one process of each address space summed
	)
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		if slices.ContainsFunc(counted, func(q int) bool { return sameVM(p, q) }) {
			continue
		}
		if v, err := pss(p); err == nil { // a process gone meanwhile holds nothing
			sum += v
			counted = append(counted, p)
		}
	}
	return sum, nil
}

// sameVM reports whether processes a and b share their address space.
func sameVM(a, b int) bool {
	const kcmpVM = 1
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	return errno == 0 && r == 0
}

// pss reads a process's PSS, in bytes; a kernel thread or a zombie has none.
func pss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, nil
}

func version(bin string) string {
	out, _ := exec.Command(bin, "version").Output()
	return strings.TrimSpace(string(out))
}

func pyVersion() string {
	out, _ := exec.Command(*python, "-c", "import sys; print(sys.version.split()[0])").Output()
	return strings.TrimSpace(string(out))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
