package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"boxer/internal/testenv"
)

// The attack suite (issue 6): every probe is a small program, or a request,
// sent on its own through the real `boxer serve`, on the warm path
// (POST /v1/exec) and the cold one (POST /v1/run-python with an interpreter
// flag, which no warm sandbox takes). Each asserts the exact outcome, and
// each is followed by a check that the host is as it was: no sandbox
// process beyond the idle pool, no cgroup, mount, run dir or server
// descriptor more, and the canaries untouched.
//
// Every path runs with the same limits: 1 CPU, 512 MiB, 3 s (the flags
// below for /v1/exec, the request's fields for /v1/run-python; 3 s times
// BOXER_TEST_SLOWDOWN, at most 5, on an emulated CPU). The seed's
// 30 s would make each timeout probe cost 30 s; 1 CPU makes a fork bomb
// reach the pids limit well within 3 s on a 2-core host, and still leaves
// a second core for the quota to withhold. A probe's requests run at once
// (its warm and its cold runs are independent; a probe that needs the
// CPUs to itself runs them one after the other), and the host check
// follows them all.

// attackPrelude gives each probe a one-word outcome: "ok", an errno name,
// or an exception name.
const attackPrelude = `import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), "ok") if r == -1 else "ok"
def do(fn):
    try:
        v = fn()
        return "ok" if v is None or v is True else str(v)
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)
    except Exception as e:
        return type(e).__name__
def hidden(path):  # absent from this kernel, or /dev/null bound over it
    return do(lambda: os.stat(path).st_rdev == os.makedev(1, 3)) in ("ENOENT", "ok")
def tcp(host, port, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5); s.connect((host, port))
def udp(host, port, fam=socket.AF_INET):
    socket.socket(fam, socket.SOCK_DGRAM).sendto(b"x", (host, port))
`

// attackServeFlags are /v1/exec's limits (see above), eight slots (a
// probe's four runs, and four more for the probe whose runs must overlap
// a second run of their own), a body timeout short enough to wait for, and
// two pre-imports, one with a lane of its own, so that the pool has the
// kinds of zygote it has by default: one with the pre-imports, the lean
// one, and an own lane's (pytest, which brings csv but not wave).
var attackServeFlags = []string{"--exec-timeout", fmt.Sprintf("%ds", attackTimeout), "--exec-cpus", "1", "--slots", "8",
	"--body-timeout", "4s", "--pool-preimport", "wave,pytest", "--pool-own-lane", "pytest"}

// attackTimeout is every run's wall-clock limit in seconds: under TCG
// (test/guest) filling a tmpfs or faulting in 512 MiB takes longer than 3
// s, and each timeout probe waits the limit out, hence the cap.
var attackTimeout = 3 * min(testenv.Slowdown(), 5)

var coldLimits = fmt.Sprintf(`"cpus": 1, "timeout_seconds": %d`, attackTimeout)

// Secrets in the server's environment that no run may see.
const (
	envSecret     = "must-not-leak-7d1e"
	paymentSecret = "Bearer x402-must-not-leak-41c9"
	payTo         = "0x1111222233334444555566667777888899990000"
)

// outcome is what a response says about a run that a probe asserts, all
// of it exactly. timed_out and oom_killed must agree with the status.
type outcome struct {
	status          string // ok, nonzero_exit, timeout, oom, signaled
	exit            int
	signal          string
	stdout, stderr  string
	stdoutTruncated bool
	stderrTruncated bool
}

func ok(stdout string) outcome { return outcome{status: "ok", stdout: stdout} }

// killed is a run boxer ended with SIGKILL: "timeout" or "oom".
func killed(status, stdout string) outcome {
	return outcome{status: status, exit: -1, signal: "SIGKILL", stdout: stdout}
}

// reply is one response, from either route, in one shape.
type reply struct {
	code            int // HTTP status
	errCode, errMsg string
	got             outcome
	timedOut, oom   bool
	cpuMs, durMs    int64
	oomKills        int64
	artifacts       map[string]string // path -> content as sent
	missing         map[string]string // path -> reason
	body            []byte
}

// attacker sends the probes. Keep-alive is off so that no idle connection
// holds a server descriptor between probes.
type attacker struct {
	s      *testServer
	client *http.Client
}

func newAttacker(s *testServer) *attacker {
	return &attacker{s: s, client: &http.Client{
		Transport: docChecked(&http.Transport{DisableKeepAlives: true}),
		Timeout:   60 * time.Second,
	}}
}

// send posts body to route and reads the answer, whatever it is.
func (a *attacker) send(t *testing.T, route, contentType string, body []byte) *reply {
	t.Helper()
	r, err := a.post(route, contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sendRaw sends a request over a connection of its own, writing the body
// while it reads the answer: a server that refuses an oversized body
// answers and hangs up before the body is all sent, which an http.Client
// may report as a failed write instead of the answer.
func (a *attacker) sendRaw(t *testing.T, route, contentType string, body []byte) *reply {
	t.Helper()
	return a.sendRawAs(t, "localhost", route, contentType, body)
}

// sendRawAs is sendRaw with the Host header given.
func (a *attacker) sendRawAs(t *testing.T, hostHeader, route, contentType string, body []byte) *reply {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if contentType == "" {
		contentType = "application/json"
	}
	go func() {
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
			route, hostHeader, contentType, len(body))
		conn.Write(body) // fails once the server has answered and hung up
	}()
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", route, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", route, err)
	}
	r, err := parseReply(route, resp.StatusCode, b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// post is send for any goroutine: it returns the failure.
func (a *attacker) post(route, contentType string, body []byte) (*reply, error) {
	req, err := http.NewRequest(http.MethodPost, a.s.url+route, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", route, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("POST %s: reading the answer: %w", route, err)
	}
	return parseReply(route, resp.StatusCode, b)
}

func parseReply(route string, code int, b []byte) (*reply, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("POST %s: %d: not JSON: %.300q", route, code, b)
	}
	r := &reply{code: code, artifacts: map[string]string{}, missing: map[string]string{}}
	if code != 200 {
		r.errCode, _ = field(m, "error", "code").(string)
		r.errMsg, _ = field(m, "error", "message").(string)
		return r, nil
	}
	// /v1/exec answers in the seed's camelCase under "result",
	// /v1/run-python in snake_case at the top.
	res, names := m, [...]string{"exit_code", "timed_out", "oom_killed", "stdout_truncated", "stderr_truncated", "cpu_time_ms", "duration_ms", "oom_kills"}
	if route == "/v1/exec" {
		res, _ = m["result"].(map[string]any)
		names = [...]string{"exitCode", "timedOut", "oomKilled", "stdoutTruncated", "stderrTruncated", "cpuTimeMs", "durationMs", "oomKills"}
	}
	num := func(k string) int64 { f, _ := res[k].(float64); return int64(f) }
	flag := func(k string) bool { v, _ := res[k].(bool); return v }
	r.got.status, _ = res["status"].(string)
	r.got.exit = int(num(names[0]))
	r.got.signal, _ = res["signal"].(string)
	r.got.stdout, _ = res["stdout"].(string)
	r.got.stderr, _ = res["stderr"].(string)
	r.timedOut, r.oom = flag(names[1]), flag(names[2])
	r.got.stdoutTruncated, r.got.stderrTruncated = flag(names[3]), flag(names[4])
	r.cpuMs, r.durMs, r.oomKills = num(names[5]), num(names[6]), num(names[7])
	arts, _ := res["artifacts"].([]any)
	for _, x := range arts {
		a, _ := x.(map[string]any)
		p, _ := a["path"].(string)
		r.artifacts[p] = fmt.Sprintf("%s:%v", a["encoding"], a["content"])
	}
	miss, _ := res["missing_artifacts"].([]any)
	for _, x := range miss {
		a, _ := x.(map[string]any)
		p, _ := a["path"].(string)
		r.missing[p], _ = a["reason"].(string)
	}
	return r, nil
}

// expect checks a run's reply against want, every field.
func expect(t *testing.T, r *reply, want outcome) {
	t.Helper()
	if r.code != 200 {
		t.Fatalf("HTTP %d %s: %s", r.code, r.errCode, r.errMsg)
	}
	if r.got != want {
		t.Errorf("got  %s\nwant %s", describe(r.got), describe(want))
	}
	// oom_killed is of any process of the run; status is the main one's.
	if r.timedOut != (r.got.status == "timeout") || r.oom != (r.oomKills > 0) || (r.got.status == "oom" && !r.oom) {
		t.Errorf("status %s, but timed_out %v, oom_killed %v and oom_kills %d", r.got.status, r.timedOut, r.oom, r.oomKills)
	}
}

func describe(o outcome) string {
	return fmt.Sprintf("status %s exit %d signal %q truncated %v/%v\n     stdout %.300q\n     stderr %.300q",
		o.status, o.exit, o.signal, o.stdoutTruncated, o.stderrTruncated, o.stdout, o.stderr)
}

// paths are the ways a program reaches a sandbox: a child of the lean
// zygote, a child of the zygote with the pre-imports (the program names
// one), and a cold sandbox.
var paths = []string{"warm", "warm-preimports", "warm-own", "cold"}

// runProgram sends code (after the prelude) on path.
func (a *attacker) runProgram(t *testing.T, path, code string) *reply {
	t.Helper()
	route, body := programRequest(path, code)
	return a.send(t, route, "", []byte(body))
}

// programRequest is the request that runs code (after the prelude) on path.
func programRequest(path, code string) (route, body string) {
	program := attackPrelude + code
	switch path {
	case "warm":
		return "/v1/exec", execBody(program)
	case "warm-preimports":
		// A last line that names the pre-import routes the run to its
		// zygote and moves no line of the probe's.
		return "/v1/exec", execBody(program + "\n# wave\n")
	case "warm-own":
		return "/v1/exec", execBody(program + "\n# pytest\n")
	}
	files, _ := json.Marshal(map[string]string{"main.py": program})
	return "/v1/run-python", `{"files": ` + string(files) + `, "command": ["python", "-u", "main.py"], ` + coldLimits + `}`
}

// probe runs fn on both paths at once (one after the other when alone:
// a probe that needs a whole CPU for a while), each its own request, and
// then checks that the host is back to its quiet state. A leak is
// reported against the probe; which path left it, the difference itself
// says (a cold sandbox's cgroup, a warm child's process).
func probe(t *testing.T, a *attacker, host *hostWatch, name string, alone bool, fn func(t *testing.T, path string)) {
	t.Run(name, func(t *testing.T) {
		t.Cleanup(func() { host.unchanged(t) })
		for _, path := range paths {
			t.Run(path, func(t *testing.T) {
				if !alone {
					t.Parallel()
				}
				fn(t, path)
			})
		}
	})
	if a.serverGone() {
		t.Fatal("the server exited; no probe can run")
	}
}

// serverGone reports whether the server has exited: every later probe
// would fail for that reason alone.
func (a *attacker) serverGone() bool {
	return a.s.cmd.Process.Signal(syscall.Signal(0)) != nil
}

// fill replaces the {{NAME}} placeholders of a probe's code.
func fill(code string, vars map[string]string) string {
	for k, v := range vars {
		code = strings.ReplaceAll(code, "{{"+k+"}}", v)
	}
	return code
}

func TestServiceAttacks(t *testing.T) {
	bin := boxerBin(t)
	// The server's environment holds secrets, as an operator's would.
	t.Setenv("BOXER_TEST_SECRET", envSecret)
	t.Setenv("BOXER_X402_PAY_TO", payTo)
	t.Setenv("BOXER_X402_FACILITATOR_AUTH_HEADER", "Authorization: "+paymentSecret)
	state, data := stateDir(t), t.TempDir()
	s := startServe(t, bin, state, data, attackServeFlags...)
	a := newAttacker(s)
	vars := map[string]string{"STATE": state, "DATA": data, "BIN": bin, "PORT": s.url[strings.LastIndexByte(s.url, ':')+1:]}

	// Warm up every route once: one-time allocations (the database's
	// files, the first connections) belong in the baseline.
	for _, p := range paths {
		expect(t, a.runProgram(t, p, "print(1)"), ok("1\n"))
	}
	// Each warm path reaches the zygote it is named for.
	for path, want := range map[string]string{"warm": "False False\n", "warm-preimports": "True True\n", "warm-own": "False True\n", "cold": "False False\n"} {
		expect(t, a.runProgram(t, path, "print('wa' + 've' in sys.modules, 'pyt' + 'est' in sys.modules)"), ok(want))
	}
	a.send(t, "/v1/run-python", "", []byte(`{"files": {"main.py": "open('a', 'w').write('a')"}, "artifact_paths": ["a"]}`))
	a.send(t, "/v1/exec", "", []byte(`{"code": `))
	host := watchHost(t, s, state, data)

	start := time.Now()
	for _, p := range programProbes {
		probe(t, a, host, p.name, p.alone, func(t *testing.T, path string) {
			want := p.want
			if strings.HasPrefix(path, "warm") && p.warm != nil {
				want = *p.warm
			}
			r := a.runProgram(t, path, fill(p.code, vars))
			expect(t, r, want)
			if p.check != nil {
				p.check(t, r)
			}
		})
	}
	t.Logf("%d program probes in %v", len(programProbes), time.Since(start).Round(time.Millisecond))
	runArtifactProbes(t, a, host, vars)
	runAPIProbes(t, a, host, vars)
	runStorageProbes(t, a, host)
	runConcurrentProbes(t, a, host)
	t.Logf("all probes in %v", time.Since(start).Round(time.Millisecond))
}
