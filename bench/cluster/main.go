// Command cluster proves that boxer's nodes on one Postgres database act
// as one service (issue 21), on loopback: a Postgres server, three
// `boxer serve --database` nodes and haproxy in front of them, as an
// operator would run them. It asserts each case, printing "ok" or "FAIL"
// and why:
//
//   - one job_id sent through the balancer many times at once runs once,
//     and every caller gets that run's result;
//   - /v1/health on every node counts the cluster's calls;
//   - a session made through the balancer keeps its state whichever node
//     each call lands on (they are forwarded to its node), and forks;
//   - a node drained with SIGTERM fails readiness first, finishes its
//     run, and leaves, while the balancer's calls go on succeeding;
//   - a node killed with SIGKILL mid-run leaves its job run_lost (never
//     running, never run again under its job_id) and its session lost.
//
// Then it measures throughput through the balancer with one, two and
// three nodes: /v1/exec calls of print(2 + 2) from -c clients for -d each.
// The nodes share this machine's CPUs, so more nodes add no CPU: the
// table shows what the database and the forwarding cost, not a cluster's
// scaling. Root, like boxer; needs Debian's postgresql and haproxy.
//
//	go run ./bench/cluster [-c 8] [-d 10s] [-short]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"boxer/bench/internal/served"
	"boxer/internal/pgserver"
)

var (
	clients = flag.Int("c", 8, "concurrent clients in the throughput runs")
	dur     = flag.Duration("d", 10*time.Second, "length of each throughput run")
	short   = flag.Bool("short", false, "CI's size: the cases, and 2 s throughput runs")
)

func main() {
	flag.Parse()
	if *short {
		*dur = 2 * time.Second
	}
	failed, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	if failed > 0 {
		fmt.Printf("\n%d cases failed\n", failed)
		os.Exit(1)
	}
}

type env struct {
	bin, tmp string
	pg       *pgserver.Server
}

func run() (failed int, err error) {
	tmp, err := os.MkdirTemp("", "bench-cluster-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	e := &env{tmp: tmp}
	if e.bin, err = served.Build(tmp); err != nil {
		return 0, err
	}
	if e.pg, err = pgserver.Start(30 * time.Second); err != nil {
		return 0, err
	}
	defer e.pg.Stop()

	c, err := e.start(3, "proof")
	if err != nil {
		return 0, err
	}
	failed = c.proof()
	c.stop()

	fmt.Printf("\nthroughput through haproxy, /v1/exec print(2 + 2), %d clients for %s each, %d CPUs\n", *clients, *dur, runtime.NumCPU())
	fmt.Printf("  nodes   calls/s   p50        p99        vs 1 node\n")
	var one float64
	for n := 1; n <= 3; n++ {
		c, err := e.start(n, fmt.Sprint("tput", n))
		if err != nil {
			return failed, err
		}
		rate, p50, p99, errs := c.throughput()
		c.stop()
		if n == 1 {
			one = rate
		}
		fmt.Printf("  %d     %8.1f  %s  %s  %8.2f", n, rate, served.Ms(p50), served.Ms(p99), rate/one)
		if errs > 0 {
			fmt.Printf("   (%d calls failed)", errs)
			failed++
		}
		fmt.Println()
	}
	return failed, nil
}

// cluster is n nodes on one new database, and haproxy in front of them.
type cluster struct {
	nodes []*served.Server
	lb    string // the balancer's URL
	proxy *exec.Cmd
	drop  func() error
}

func (e *env) start(n int, name string) (*cluster, error) {
	dsn, drop, err := e.pg.CreateDB()
	if err != nil {
		return nil, err
	}
	c := &cluster{drop: drop}
	for i := range n {
		s, err := served.Start(e.bin, e.tmp, fmt.Sprintf("%s-n%d", name, i+1), "--database", dsn,
			"--node", fmt.Sprintf("n%d", i+1), "--node-timeout", "3s")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.balance(filepath.Join(e.tmp, name+"-haproxy.cfg")); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// balance starts haproxy on a free loopback port, round robin over the
// nodes, each checked on /readyz twice a second.
func (c *cluster) balance(cfgPath string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	var b strings.Builder
	fmt.Fprintf(&b, `global
	maxconn 1000
defaults
	mode http
	timeout connect 5s
	timeout client 120s
	timeout server 120s
	retries 2
	option redispatch
frontend boxer
	bind %s
	default_backend nodes
backend nodes
	balance roundrobin
	option httpchk GET /readyz
	default-server inter 500ms fall 1 rise 2
`, addr)
	for i, n := range c.nodes {
		fmt.Fprintf(&b, "\tserver n%d %s check\n", i+1, strings.TrimPrefix(n.URL, "http://"))
	}
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		return err
	}
	c.proxy = exec.Command("haproxy", "-db", "-f", cfgPath)
	c.proxy.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.proxy.Start(); err != nil {
		return fmt.Errorf("haproxy: %w", err)
	}
	c.lb = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for { // until every node is up behind it
		up := 0
		for range c.nodes {
			if st, _, err := call("GET", c.lb+"/readyz", ""); err == nil && st == 200 {
				up++
			}
		}
		if up == len(c.nodes) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("haproxy did not serve within 30 s")
		}
		time.Sleep(100 * time.Millisecond) // polling for the balancer's first checks
	}
}

func (c *cluster) stop() {
	if c.proxy != nil && c.proxy.Process != nil {
		c.proxy.Process.Kill()
		c.proxy.Wait()
	}
	for _, n := range c.nodes {
		n.Stop()
	}
	if c.drop != nil {
		c.drop()
	}
}

var httpc = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends body (JSON, or nothing) and decodes a JSON answer.
func call(method, url, body string) (int, map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, nil
}

// check prints a case's outcome, and counts a failure.
func check(failed *int, name string, ok bool, detail string, args ...any) {
	if ok {
		fmt.Printf("ok    %s\n", name)
		return
	}
	*failed++
	fmt.Printf("FAIL  %s: %s\n", name, fmt.Sprintf(detail, args...))
}

// within polls cond for up to d.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond) // polling the service for a state it reports
	}
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func (c *cluster) proof() (failed int) {
	fmt.Printf("cluster proof: Postgres, %d nodes, haproxy at %s\n\n", len(c.nodes), c.lb)

	// One job_id, many callers at once, through the balancer.
	const shared = `{"files": {"main.py": "import time, uuid\ntime.sleep(1)\nprint(uuid.uuid4())"}, "job_id": "shared"}`
	outs := make([]string, 9)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, m, err := call("POST", c.lb+"/v1/run-python", shared)
			if err == nil && st == 200 {
				outs[i], _ = m["stdout"].(string)
			} else {
				outs[i] = fmt.Sprint(st, m, err)
			}
		}()
	}
	wg.Wait()
	same := outs[0] != "" && strings.Count(strings.Join(outs, "|"), outs[0]) == len(outs)
	check(&failed, "one job_id sent 9 times at once through the balancer runs once", same, "answers %q", outs)

	// Every node's health counts the cluster's calls.
	counted := within(10*time.Second, func() bool {
		for _, n := range c.nodes {
			_, m, err := call("GET", n.URL+"/v1/health", "")
			if err != nil || m["calls30d"] != 9.0 || m["runsTotal"] != 1.0 {
				return false
			}
		}
		return true
	})
	check(&failed, "/v1/health on each node: the cluster's 9 calls, 1 run", counted, "figures differ")

	// A session through the balancer: each call lands on the next node.
	st, m, err := call("POST", c.lb+"/v1/sessions", `{}`)
	id, _ := m["session_id"].(string)
	kept := err == nil && st == 201
	for i := 0; kept && i < 6; i++ {
		st, m, err = call("POST", c.lb+"/v1/sessions/"+id+"/exec", `{"code": "x = globals().get('x', 0) + 1\nx"}`)
		kept = err == nil && st == 200 && field(m, "result", "value") == fmt.Sprint(i+1)
	}
	check(&failed, "a session keeps its state over 6 cells, whichever node each lands on", kept, "%d %v %v", st, m, err)
	st, m, err = call("POST", c.lb+"/v1/sessions/"+id+"/fork", `{}`)
	fork, _ := m["session_id"].(string)
	forked := err == nil && st == 201
	if forked {
		st, m, err = call("POST", c.lb+"/v1/sessions/"+fork+"/exec", `{"code": "x"}`)
		forked = err == nil && st == 200 && field(m, "result", "value") == "6"
	}
	check(&failed, "a fork through the balancer holds its parent's state", forked, "%d %v %v", st, m, err)

	failed += c.drain(c.nodes[1])
	failed += c.kill(c.nodes[2])
	return failed
}

// drain sends n SIGTERM while it runs a job: it must fail readiness
// before the job ends, finish it, and exit 0, while the balancer's calls
// go on succeeding.
func (c *cluster) drain(n *served.Server) (failed int) {
	done := make(chan error, 1)
	go func() {
		st, m, err := call("POST", n.URL+"/v1/run-python", `{"files": {"main.py": "import time\ntime.sleep(3)\nprint('finished')"}}`)
		if err == nil && (st != 200 || m["stdout"] != "finished\n") {
			err = fmt.Errorf("%d %v", st, m)
		}
		done <- err
	}()
	busy := within(10*time.Second, func() bool {
		_, m, err := call("GET", n.URL+"/v1/health", "")
		return err == nil && m["running"] == 1.0
	})
	n.Cmd.Process.Signal(syscall.SIGTERM)
	unready := within(2*time.Second, func() bool {
		st, _, err := call("GET", n.URL+"/readyz", "")
		return err != nil || st == 503
	})
	bad := 0
	for range 10 {
		if st, _, err := call("POST", c.lb+"/v1/exec", `{"code": "print(1)", "language": "python"}`); err != nil || st != 200 {
			bad++
		}
	}
	runErr := <-done
	exitErr := n.Cmd.Wait()
	check(&failed, "a node drained with SIGTERM fails readiness first", busy && unready, "running seen %v, unready %v", busy, unready)
	check(&failed, "... finishes its run", runErr == nil, "%v", runErr)
	check(&failed, "... exits cleanly", exitErr == nil, "%v", exitErr)
	check(&failed, "... while 10 calls through the balancer succeed", bad == 0, "%d failed", bad)
	return failed
}

// kill starts an async job and a session on n, kills n with SIGKILL, and
// expects both lost through the balancer, and the job_id not run again.
func (c *cluster) kill(n *served.Server) (failed int) {
	const doomed = `{"files": {"main.py": "import time\ntime.sleep(25)"}, "job_id": "doomed", "async": true, "timeout_seconds": 30}`
	st, _, err := call("POST", n.URL+"/v1/run-python", doomed)
	_, m, _ := call("POST", n.URL+"/v1/sessions", `{}`)
	id, _ := m["session_id"].(string)
	running := err == nil && st == 202 && id != "" && within(10*time.Second, func() bool {
		_, m, err := call("GET", n.URL+"/v1/health", "")
		return err == nil && m["running"] == 1.0
	})
	n.Cmd.Process.Kill()
	n.Cmd.Wait()
	var jm map[string]any
	lost := within(20*time.Second, func() bool {
		st, jm, err = call("GET", c.lb+"/v1/jobs/doomed", "")
		return err == nil && st == 500
	})
	check(&failed, "a node killed mid-run: its job ends run_lost, seen through the balancer", running && lost && field(jm, "error", "code") == "run_lost",
		"running %v, then %d %v %v", running, st, jm, err)
	st, jm, err = call("POST", c.lb+"/v1/run-python", strings.Replace(doomed, `, "async": true`, "", 1))
	check(&failed, "... and its job_id answers run_lost again, not a second run", err == nil && st == 500 && field(jm, "error", "code") == "run_lost", "%d %v %v", st, jm, err)
	st, m, err = call("POST", c.lb+"/v1/sessions/"+id+"/exec", `{"code": "1"}`)
	check(&failed, "... and its session answers session_lost", err == nil && st == 410 && field(m, "error", "code") == "session_lost", "%d %v %v", st, m, err)
	return failed
}

// throughput runs *clients loops of /v1/exec through the balancer for
// *dur, after a short warm-up, and returns calls a second, p50, p99 and
// the calls that failed.
func (c *cluster) throughput() (rate float64, p50, p99 time.Duration, errs int) {
	const body = `{"code": "print(2 + 2)", "language": "python"}`
	for range 2 * len(c.nodes) {
		call("POST", c.lb+"/v1/exec", body)
	}
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	end := time.Now().Add(*dur)
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				t := time.Now()
				st, _, err := call("POST", c.lb+"/v1/exec", body)
				d := time.Since(t)
				mu.Lock()
				if err != nil || st != 200 {
					errs++
				} else {
					lats = append(lats, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(lats) == 0 {
		return 0, 0, 0, errs
	}
	return float64(len(lats)) / dur.Seconds(), served.Pct(lats, 50), served.Pct(lats, 99), errs
}
