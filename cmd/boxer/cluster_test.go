package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"boxer/internal/testenv"
)

// startNodes starts n boxer serve nodes sharing one new Postgres
// database, named a, b, c..., each with its own state and data dirs.
func startNodes(t *testing.T, n int, args ...string) []*testServer {
	t.Helper()
	dsn, bin := testenv.Postgres(t), boxerBin(t)
	var nodes []*testServer
	for i := range n {
		name := string(rune('a' + i))
		nodes = append(nodes, startServe(t, bin, stateDir(t), t.TempDir(),
			append([]string{"--database", dsn, "--node", name}, args...)...))
	}
	return nodes
}

// TestClusterJobRunsOnce: one job_id sent to two nodes at once runs once;
// both callers get its result, and the health figures are the cluster's.
func TestClusterJobRunsOnce(t *testing.T) {
	nodes := startNodes(t, 2, "--metrics")
	body := `{"files": {"main.py": "import time, uuid\ntime.sleep(1)\nprint(uuid.uuid4())"}, "job_id": "shared-1"}`
	var (
		wg  sync.WaitGroup
		out [2]string
	)
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, m := n.post("/v1/run-python", body)
			if status != 200 || m["status"] != "ok" {
				t.Errorf("node %d: %d %v", i, status, m)
			}
			out[i], _ = m["stdout"].(string)
		}()
	}
	wg.Wait()
	if out[0] == "" || out[0] != out[1] {
		t.Fatalf("two answers of one job_id: %q and %q, want one run's", out[0], out[1])
	}
	// Each node counts the calls of both, and names itself in its logs
	// and metrics.
	for i, n := range nodes {
		waitFor(t, "the cluster's runs in /v1/health", func() bool {
			_, _, m := n.get("/v1/health")
			return m["runsTotal"] == 1.0 && m["calls30d"] == 2.0
		})
		name := string(rune('a' + i))
		status, b := n.do("GET", "/metrics")
		for _, want := range []string{`boxer_run_slots{node="` + name + `"}`, `boxer_pool_ready{lane="preimports",node="` + name + `"}`, `boxer_runs_queued{node="` + name + `"} 0`} {
			if status != 200 || !strings.Contains(string(b), want) {
				t.Errorf("node %s's metrics lack %s", name, want)
			}
		}
		if !strings.Contains(n.log.String(), `"node":"`+name+`"`) {
			t.Errorf("node %s's log does not name it", name)
		}
	}
}

// TestClusterNodeKilled: a node killed mid-run leaves no job running: once
// it has gone unseen for --node-timeout, another node ends its job with
// run_lost, and the same job_id does not run again.
func TestClusterNodeKilled(t *testing.T) {
	nodes := startNodes(t, 2, "--node-timeout", "3s")
	a, b := nodes[0], nodes[1]
	started := make(chan struct{})
	go func() {
		close(started)
		// Its answer never comes: the node dies under it.
		resp, err := client.Post(a.url+"/v1/run-python", "application/json",
			strings.NewReader(`{"files": {"main.py": "import time\ntime.sleep(25)"}, "job_id": "doomed", "timeout_seconds": 30}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	waitFor(t, "the job running on a, seen from b", func() bool {
		status, _, _ := b.get("/v1/jobs/doomed")
		return status == 202
	})
	// The same job, async, on b: running elsewhere, so 202 at once.
	status, _, m := b.post("/v1/run-python", `{"files": {"main.py": "import time\ntime.sleep(25)"}, "job_id": "doomed", "timeout_seconds": 30, "async": true}`)
	if status != 202 || m["status"] != "running" {
		t.Fatalf("the job, async, on b while a runs it: %d %v, want 202 running", status, m)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	waitFor(t, "b ends a's job", func() bool {
		var status int
		status, _, m = b.get("/v1/jobs/doomed")
		return status == 500
	})
	if field(m, "error", "code") != "run_lost" {
		t.Fatalf("a's job after a died: %v", m)
	}
	status, _, m = b.post("/v1/run-python", `{"files": {"main.py": "import time\ntime.sleep(25)"}, "job_id": "doomed", "timeout_seconds": 30}`)
	if status != 500 || field(m, "error", "code") != "run_lost" {
		t.Fatalf("the same job_id again: %d %v, want the stored run_lost", status, m)
	}
	if m, _ := json.Marshal(m); !strings.Contains(string(m), "new job_id") {
		t.Errorf("run_lost does not say what to do: %s", m)
	}
}

// TestClusterSessionForwarded: a session lives on the node that made it;
// a call to it that reaches another node is forwarded there, forks
// included, and counted once; once its node is gone, the call answers
// session_lost.
func TestClusterSessionForwarded(t *testing.T) {
	nodes := startNodes(t, 2, "--node-timeout", "3s")
	a, b := nodes[0], nodes[1]
	id := a.newSession(`{}`)
	status, m := b.sessionExec(id, "x = 40", 0)
	wantCell(t, status, m, map[string]any{"status": "ok"})
	status, h, m := b.post("/v1/sessions/"+id+"/exec", `{"code": "x + 2"}`)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "42"})
	if ids := h.Values("X-Request-Id"); len(ids) != 1 {
		t.Errorf("a forwarded answer's request ids: %q, want one", ids)
	}
	status, m = a.sessionExec(id, "x", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "40"})
	status, _, f := b.post("/v1/sessions/"+id+"/fork", `{}`)
	if status != 201 {
		t.Fatalf("fork through b: %d %v", status, f)
	}
	status, m = b.sessionExec(f["session_id"].(string), "x", 0)
	wantCell(t, status, m, map[string]any{"status": "ok", "value": "40"})
	waitFor(t, "the session's calls counted once", func() bool {
		_, _, h := b.get("/v1/health")
		return h["calls30d"] == 6.0 // a start, four cells, a fork
	})

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	status, m = b.sessionExec(id, "x", 0)
	if status != 410 || field(m, "error", "code") != "session_lost" {
		t.Fatalf("a call to a dead node's session: %d %v", status, m)
	}
	waitFor(t, "b ends a's sessions", func() bool {
		_, _, m = b.get("/v1/sessions/" + id)
		return strings.Contains(fmt.Sprint(m["error"]), "stopped or restarted")
	})
}

// TestClusterSessionCapPerCaller: a caller's sessions are counted on every
// node: one the caller holds on a keeps it from a second on b.
func TestClusterSessionCapPerCaller(t *testing.T) {
	dsn, bin := testenv.Postgres(t), boxerBin(t)
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"keys", "add", "--name", "agent", "--database", dsn}, &out, &errb); code != 0 {
		t.Fatalf("keys add: %d %s", code, errb.String())
	}
	key := strings.TrimSpace(out.String())
	var nodes []*testServer
	for _, name := range []string{"a", "b"} {
		nodes = append(nodes, startServe(t, bin, stateDir(t), t.TempDir(), "--database", dsn, "--node", name, "--max-sessions-per-caller", "1"))
	}
	create := func(s *testServer) (int, map[string]any) { return s.keyed(key, "POST", "/v1/sessions", `{}`) }
	if status, m := create(nodes[0]); status != 201 {
		t.Fatalf("the caller's first session, on a: %d %v", status, m)
	}
	if status, m := create(nodes[1]); status != 429 || field(m, "error", "code") != "rate_limited" {
		t.Fatalf("a second, on b: %d %v, want 429 rate_limited", status, m)
	}
}

// TestClusterKeyRate: a key's rate is the cluster's: calls on a and b
// count together.
func TestClusterKeyRate(t *testing.T) {
	dsn, bin := testenv.Postgres(t), boxerBin(t)
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"keys", "add", "--name", "slow", "--rate", "2", "--database", dsn}, &out, &errb); code != 0 {
		t.Fatalf("keys add: %d %s", code, errb.String())
	}
	key := strings.TrimSpace(out.String())
	a := startServe(t, bin, stateDir(t), t.TempDir(), "--database", dsn, "--node", "a")
	b := startServe(t, bin, stateDir(t), t.TempDir(), "--database", dsn, "--node", "b")
	exec := func(s *testServer) (int, map[string]any) {
		return s.keyed(key, "POST", "/v1/exec", execBody("print(1)"))
	}
	// Two a minute: one on each node, then a third on either is refused
	// (unless the minute turned in between: then the window is new, and
	// the two calls after it must be allowed).
	for {
		start := time.Now().Unix() / 60
		s1, _ := exec(a)
		s2, _ := exec(b)
		s3, m := exec(a)
		if time.Now().Unix()/60 != start {
			continue // a minute boundary: try again in the new minute
		}
		if s1 != 200 || s2 != 200 || s3 != 429 || field(m, "error", "code") != "rate_limited" {
			t.Fatalf("three calls in a minute at 2 a minute, on a, b, a: %d %d %d %v", s1, s2, s3, m)
		}
		return
	}
}

// TestClusterNeedsAnAddressToAdvertise: a node listening on every address
// cannot tell the others where to reach it, and does not start guessing.
func TestClusterNeedsAnAddressToAdvertise(t *testing.T) {
	dsn, bin := testenv.Postgres(t), boxerBin(t)
	cmd := exec.Command(bin, "serve", "--addr", "0.0.0.0:0", "--state-dir", stateDir(t), "--data-dir", t.TempDir(), "--database", dsn, "--node", "a", "--allow-anonymous")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--advertise") {
		t.Fatalf("a node on 0.0.0.0 without --advertise: %v, want a refusal naming --advertise\n%q", err, out)
	}
	// With --advertise it serves (startServe waits for its "serving" line).
	startServe(t, bin, stateDir(t), t.TempDir(), "--addr", "0.0.0.0:0", "--advertise", "127.0.0.1:1", "--database", dsn, "--node", "b", "--allow-anonymous")
}
