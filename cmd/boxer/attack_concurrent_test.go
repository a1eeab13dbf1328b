package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"boxer/internal/observe"
)

// runConcurrentProbes runs the probes that need something else alive at
// the same time: a listener on the host, another run, a slow client.
func runConcurrentProbes(t *testing.T, a *attacker, host *hostWatch) {
	probe(t, a, host, "net/abstract-unix-host", false, func(t *testing.T, path string) { abstractFromHost(t, a, path) })
	probe(t, a, host, "net/abstract-unix-between-runs", false, func(t *testing.T, path string) { abstractBetweenRuns(t, a, host.in, path) })
	probe(t, a, host, "api/slow-loris-body", false, func(t *testing.T, path string) { slowBody(t, a, path) })
	probe(t, a, host, "tenants/process-counters", false, func(t *testing.T, path string) { processCounters(t, a, host.in, path) })
}

// The test process listens on an abstract unix socket (no file: the name
// lives in the network namespace). A run connecting to the same name
// reaches nothing: it has a network namespace of its own.
func abstractFromHost(t *testing.T, a *attacker, path string) {
	name := fmt.Sprintf("boxer-attack-host-%d-%s", os.Getpid(), path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := a.runProgram(t, path, `s = socket.socket(socket.AF_UNIX); s.settimeout(5)
print(do(lambda: s.connect("\0`+name+`")))`)
	expect(t, r, ok("ECONNREFUSED\n"))
	l.SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("a run connected to the host's abstract socket")
	}
}

// One run listens on an abstract name; while it waits, a second run on
// the same path connects to that name: refused, for each run has its own
// network namespace (on the warm path too, though both are children of
// one zygote).
func abstractBetweenRuns(t *testing.T, a *attacker, in observe.Instance, path string) {
	name := fmt.Sprintf("boxer-attack-%d-%s", os.Getpid(), path)
	listener := `s = socket.socket(socket.AF_UNIX); s.bind("\0` + name + `"); s.listen(8)
s.settimeout(` + fmt.Sprint(float64(attackTimeout)/2) + `)  # the neighbour's window: half the run's time limit
try:
    s.accept(); print("accepted")
except TimeoutError: print("nobody came")`
	l := whileRunning(t, a, in, path, listener, "@"+name, func() {
		r := a.runProgram(t, path, `s = socket.socket(socket.AF_UNIX); s.settimeout(5)
print(do(lambda: s.connect("\0`+name+`")))`)
		expect(t, r, ok("ECONNREFUSED\n"))
	})
	expect(t, l, ok("nobody came\n"))
}

// One run reads the counters of processes a run can see (ns_last_pid,
// /proc/loadavg's last pid, getpriority(PRIO_USER) of the uids a run may
// have), then waits; meanwhile a second run on the same path forks twenty
// processes. The first reads the same counters again: each run has a PID
// namespace of its own, so no count moves with a neighbour's work (a warm
// pool once shared one, and all three counted every tenant's processes).
func processCounters(t *testing.T, a *attacker, in observe.Instance, path string) {
	name := fmt.Sprintf("boxer-attack-counters-%d-%s", os.Getpid(), path)
	watcher := `import time
def counters():
    prio = []
    for uid in range(1000, 1016):
        ctypes.set_errno(0)
        prio.append((libc.getpriority(2, uid), ctypes.get_errno()))
    return open("/proc/sys/kernel/ns_last_pid").read(), open("/proc/loadavg").read().split()[4], prio
before = counters()
s = socket.socket(socket.AF_UNIX); s.bind("\0` + name + `")  # ready: the test starts the neighbour
time.sleep(` + fmt.Sprint(float64(attackTimeout)/2) + `)  # the neighbour's window: half the run's time limit
print(counters() == before)`
	w := whileRunning(t, a, in, path, watcher, "@"+name, func() {
		r := a.runProgram(t, path, `for _ in range(20):
    pid = os.fork()
    if pid == 0: os._exit(0)
    os.waitpid(pid, 0)
print("forked")`)
		expect(t, r, ok("forked\n"))
	})
	expect(t, w, ok("True\n"))
}

// whileRunning sends code on path in the background, waits until one of
// its sandbox processes has bound the abstract unix socket name (its sign
// that it is ready), calls meanwhile, checks that the background run was
// still going when meanwhile returned (or the probe proved nothing), and
// returns the background run's reply.
func whileRunning(t *testing.T, a *attacker, in observe.Instance, path, code, name string, meanwhile func()) *reply {
	t.Helper()
	type result struct {
		r   *reply
		err error
	}
	done := make(chan result, 1)
	route, body := programRequest(path, code)
	go func() {
		r, err := a.post(route, "", []byte(body))
		done <- result{r, err}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !listening(in, name) {
		if time.Now().After(deadline) {
			t.Fatal("the background run never bound its socket")
		}
		time.Sleep(5 * time.Millisecond) // polling the host's view, not synchronising with a run's code
	}
	meanwhile()
	select {
	case <-done:
		t.Fatal("the background run ended before the other: the probe proved nothing")
	default:
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.r
}

// listening reports whether any sandbox process of in sees a unix socket
// named name in its network namespace.
func listening(in observe.Instance, name string) bool {
	for _, pid := range observe.LiveProcesses(in.IDBase, in.IDBase+65536) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/unix", pid))
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 7 && f[7] == name {
				return true
			}
		}
	}
	return false
}

// slowBodyLimit bounds how long the server may wait for a request body
// that trickles in: its --body-timeout (attackServeFlags), with 2 s of
// slack.
const slowBodyLimit = 6 * time.Second

// slowBody sends complete headers announcing a body of 100 bytes, then on
// the warm side one byte every half second (a slow-loris body), on the
// cold side nothing more (a stalled one); on the warm side with the
// pre-imports it goes to /mcp, whose body is read before its handler. The server must go on serving
// others, and must end the request with 408 request_timeout and a hang-up
// within slowBodyLimit, instead of holding a connection and a goroutine
// for as long as the client likes.
func slowBody(t *testing.T, a *attacker, path string) {
	route, trickle := "/v1/exec", true
	switch path {
	case "cold":
		route, trickle = "/v1/run-python", false
	case "warm-preimports":
		route = "/mcp"
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", route)
	answer := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the server hangs up (or the test does)
		answer <- b
	}()

	// Meanwhile the server serves others.
	served, body := programRequest(path, `print("served")`)
	r, err := a.post(served, "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, r, ok("served\n"))

	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	sent := 1
	for {
		select {
		case b := <-answer:
			t.Logf("the server ended the slow request after %v and %d bytes: %.100q", time.Since(start).Round(time.Millisecond), sent, b)
			if !bytes.HasPrefix(b, []byte("HTTP/1.1 408")) || !bytes.Contains(b, []byte(`"code":"request_timeout"`)) {
				t.Errorf("answered a request whose body never arrived with %.100q, want 408 request_timeout", b)
			}
			return
		case <-tick.C:
			if time.Since(start) > slowBodyLimit {
				conn.Close()
				<-answer
				t.Errorf("the server still waited for the body after %v (%d of 100 bytes sent): "+
					"nothing bounds how long a request body may take", slowBodyLimit, sent)
				return
			}
			if trickle {
				conn.Write([]byte(" "))
				sent++
			}
		}
	}
}
