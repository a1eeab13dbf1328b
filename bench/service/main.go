// Command service measures boxer's HTTP service against a bare interpreter
// on the same machine, in one run, and prints each figure next to its
// target (issues 4 and 20), on the server's default flags:
//
//   - latency: p50/p90/p99 of POST /v1/exec with print(2+2), against the
//     p50 of bare `python3 -c 'print(2+2)'`, twice: paced (one request
//     every -pace, a load the pool sustains, as an agent's calls arrive;
//     target p50 <= 0.1x) and back to back (each request sent as the
//     previous one returns, which is a load test: the pool's refill
//     competes with the requests for the CPUs; target p99 <= 1x);
//   - throughput: requests per second at concurrency 16, against bare
//     python3 spawned back to back on every core, half of that run before
//     the service's and half after it (target >= 2.5x, no errors), and
//     the CPU of boxer's own process per request, against the CPU of a
//     bare run (target <= 0.046: issue 20 set 0.5 ms when a bare start
//     cost 10.9 ms, and a figure holds only as a ratio to the machine's
//     own baseline; the milliseconds are printed too); then the same with
//     `import numpy` (no target);
//   - a concurrency sweep: rate, p50, p99 and errors at 1 to 64;
//   - warm imports: a script importing numpy and pandas, against the same
//     script run by bare python3 (target p50 <= 0.1x);
//   - footprint: RSS of the idle server without a pool (target <= 50 MiB),
//     and the PSS each additional warm sandbox adds (target <= 15 MiB).
//
// bench/jobs measures seed 004's agent jobs and how costs grow with a
// job's size.
//
// It builds cmd/boxer, starts it on a free loopback port with its own state
// and data dirs, and stops it at the end. It needs root, like boxer.
//
//	go run ./bench/service -duration 60s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
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

	"boxer/bench/internal/served"

	"golang.org/x/sys/unix"
)

var (
	python      = flag.String("python", "/usr/bin/python3", "the interpreter, for the baseline and the service")
	n           = flag.Int("n", 200, "sequential requests (and bare runs) for the latency figures")
	duration    = flag.Duration("duration", 60*time.Second, "length of the throughput run")
	concurrency = flag.Int("c", 16, "concurrency of the throughput run")
	imports     = flag.Int("imports", 20, "runs of the numpy+pandas script, each side")
	pace        = flag.Duration("pace", 100*time.Millisecond, "interval between the paced latency requests")
	sweepAt     = flag.String("sweep", "1,2,4,8,16,32,64", "concurrencies of the sweep after the other figures, comma-separated; empty: none")
	sweepFor    = flag.Duration("sweep-duration", 5*time.Second, "length of each sweep level")
	profile     = flag.String("profile", "", "write the server's CPU profile of the throughput run to this file (go tool pprof reads it)")
)

const (
	printCode  = "print(2+2)"
	numpyCode  = "import numpy\nprint(2+2)"
	importCode = "import numpy, pandas\nprint(pandas.Series(numpy.arange(10)).sum())\n"
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	tmp, err := os.MkdirTemp("", "boxer-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := served.Build(tmp)
	if err != nil {
		return err
	}
	fmt.Printf("boxer service benchmark: %d cores, %s, %s\n\n", runtime.NumCPU(), pythonVersion(), time.Now().UTC().Format(time.RFC3339))

	// Footprint of the idle server without a pool.
	idle, err := startServer(bin, tmp, "idle", "--pool-min", "0")
	if err != nil {
		return err
	}
	idleRSS := settledRSS(idle)
	idle.Stop()

	var debug []string
	if *profile != "" {
		debug = []string{"--debug-addr", "127.0.0.1:" + strconv.Itoa(freePort())}
	}
	srv, err := startServer(bin, tmp, "main", debug...)
	if err != nil {
		return err
	}
	defer srv.Stop()

	// Latency. The baseline is measured in its own phases, before and
	// after the service's (interleaving them would slow bare python3 with
	// the pool refilling after each request); two phases show drift.
	var bare, svc []time.Duration
	bareRun := func(k int) error {
		for range k {
			d, err := barePython("-c", printCode)
			if err != nil {
				return err
			}
			bare = append(bare, d)
		}
		return nil
	}
	for range 10 { // warm both up
		if _, err := barePython("-c", printCode); err != nil {
			return err
		}
		if _, err := srv.exec(printCode); err != nil {
			return err
		}
	}
	if err := bareRun(*n / 2); err != nil {
		return err
	}
	var paced []time.Duration
	for range *n {
		next := time.Now().Add(*pace)
		d, err := srv.exec(printCode)
		if err != nil {
			return err
		}
		paced = append(paced, d)
		time.Sleep(time.Until(next)) // pacing the load, not synchronisation
	}
	for range *n {
		d, err := srv.exec(printCode)
		if err != nil {
			return err
		}
		svc = append(svc, d)
	}
	if err := bareRun(*n - *n/2); err != nil {
		return err
	}
	bareP50 := pct(bare, 50)
	fmt.Println("latency, print(2+2)                          p50       p90       p99")
	fmt.Printf("  bare python3 -c                          %s %s %s\n", ms(bareP50), ms(pct(bare, 90)), ms(pct(bare, 99)))
	fmt.Printf("  POST /v1/exec, paced every %-12v %s %s %s\n", *pace, ms(pct(paced, 50)), ms(pct(paced, 90)), ms(pct(paced, 99)))
	fmt.Printf("  POST /v1/exec, back to back              %s %s %s\n", ms(pct(svc, 50)), ms(pct(svc, 90)), ms(pct(svc, 99)))
	report("paced p50 / bare p50", ratio(pct(paced, 50), bareP50), 0.1, true)
	report("paced p99 / bare p50", ratio(pct(paced, 99), bareP50), 1.0, true)
	report("back-to-back p50 / bare p50", ratio(pct(svc, 50), bareP50), 0.25, true)
	report("back-to-back p99 / bare p50", ratio(pct(svc, 99), bareP50), 1.0, true)

	// Throughput, with the machine's CPU time per request on each side.
	// The bare baseline runs half before the service's run and half after
	// it: this VM's speed drifts by a fifth over minutes, and bracketing
	// the service's run keeps the drift out of the ratio.
	bareHalf := min(*duration, 20*time.Second) / 2
	cpu0 := machineCPU()
	before := bareThroughput(printCode, bareHalf)
	cpu1, srv1 := machineCPU(), processCPU(srv.Cmd.Process.Pid)
	profiled := make(chan error, 1)
	if *profile != "" {
		go func() { profiled <- fetchProfile(debug[1], *duration-time.Second, *profile) }()
	} else {
		profiled <- nil
	}
	rate, errs, count, err := srv.throughput(printCode, *concurrency, *duration, nil)
	if err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	cpu2, srv2 := machineCPU(), processCPU(srv.Cmd.Process.Pid)
	after := bareThroughput(printCode, bareHalf)
	cpu3 := machineCPU()
	bareCount := before.count + after.count
	bareRate := float64(bareCount) / (before.took + after.took).Seconds()
	fmt.Printf("\nthroughput, print(2+2), %v                  CPU per run\n", *duration)
	bareCPU := (cpu1 - cpu0 + cpu3 - cpu2) / time.Duration(max(bareCount, 1))
	boxerCPU := (srv2 - srv1) / time.Duration(max(count, 1))
	fmt.Printf("  bare python3 -c on %d cores      %7.1f/s   %s  (%.1f/s before, %.1f/s after)\n", runtime.NumCPU(), bareRate,
		ms(bareCPU), before.rate(), after.rate())
	fmt.Printf("  POST /v1/exec, concurrency %-3d  %7.1f/s   %s, %d errors\n", *concurrency, rate, ms((cpu2-cpu1)/time.Duration(max(count, 1))), errs)
	fmt.Printf("    of which the boxer process             %s (the rest: sandboxes, zygote, kernel)\n", ms(boxerCPU))
	report("rate / bare rate", rate/bareRate, 2.5, false)
	report("errors", float64(errs), 0, true)
	report("boxer CPU / bare CPU", ratio(boxerCPU, bareCPU), 0.046, true)

	// The same with numpy, which the pool pre-imports: the rate against
	// bare python3 importing it (no target).
	npHalf := min(*duration, 20*time.Second) / 4
	npBefore := bareThroughput(numpyCode, npHalf)
	npRate, npErrs, _, err := srv.throughput(numpyCode, *concurrency, 2*npHalf, nil)
	if err != nil {
		return err
	}
	npAfter := bareThroughput(numpyCode, npHalf)
	npBare := float64(npBefore.count+npAfter.count) / (npBefore.took + npAfter.took).Seconds()
	fmt.Printf("\nthroughput, %s, %v\n", strings.ReplaceAll(numpyCode, "\n", "; "), 2*npHalf)
	fmt.Printf("  bare python3 -c on %d cores      %7.1f/s\n", runtime.NumCPU(), npBare)
	fmt.Printf("  POST /v1/exec, concurrency %-3d  %7.1f/s, %d errors\n", *concurrency, npRate, npErrs)
	fmt.Printf("  rate / bare rate             %8.3f\n", npRate/npBare)

	if *sweepAt != "" {
		var levels []int
		for _, f := range strings.Split(*sweepAt, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 1 {
				return fmt.Errorf("-sweep: %q is not a concurrency", f)
			}
			levels = append(levels, c)
		}
		if err := srv.sweep(levels, *sweepFor); err != nil {
			return err
		}
	}

	// Warm imports.
	script := filepath.Join(tmp, "imports.py")
	if err := os.WriteFile(script, []byte(importCode), 0o644); err != nil {
		return err
	}
	var coldImp, warmImp []time.Duration
	for range *imports {
		d, err := barePython(script)
		if err != nil {
			return err
		}
		coldImp = append(coldImp, d)
		if d, err = srv.exec(importCode); err != nil {
			return err
		}
		warmImp = append(warmImp, d)
	}
	fmt.Println("\nwarm imports, import numpy, pandas  p50")
	fmt.Printf("  bare python3 script.py         %s\n", ms(pct(coldImp, 50)))
	fmt.Printf("  POST /v1/exec                  %s\n", ms(pct(warmImp, 50)))
	report("p50 / bare p50", ratio(pct(warmImp, 50), pct(coldImp, 50)), 0.1, true)

	// Footprint.
	perWarm, err := warmPSS(bin, tmp)
	if err != nil {
		return err
	}
	fmt.Println("\nfootprint")
	fmt.Printf("  idle server, no pool: RSS %.1f MiB\n", mib(idleRSS))
	report("idle RSS, MiB", mib(idleRSS), 50, true)
	fmt.Printf("  each additional warm sandbox: PSS %.1f MiB\n", mib(perWarm))
	report("PSS per warm sandbox, MiB", mib(perWarm), 15, true)
	return nil
}

// report prints a figure against its target: at most (upper) or at least.
func report(what string, got, target float64, upper bool) {
	ok := got <= target
	cmp := "<="
	if !upper {
		ok, cmp = got >= target, ">="
	}
	verdict := "MET"
	if !ok {
		verdict = "NOT MET"
	}
	fmt.Printf("  %-28s %8.3f  (target %s %g)  %s\n", what, got, cmp, target, verdict)
}

// server is a running boxer serve with the benchmark's requests.
type server struct{ *served.Server }

// freePort is a loopback port free a moment ago.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// fetchProfile writes the CPU profile the server at addr (its --debug-addr)
// takes over d to path.
func fetchProfile(addr string, d time.Duration, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// startServer starts boxer serve on the defaults a user gets plus extra.
func startServer(bin, tmp, name string, extra ...string) (*server, error) {
	s, err := served.Start(bin, tmp, name, extra...)
	if err != nil {
		return nil, err
	}
	return &server{s}, nil
}

// exec posts code to /v1/exec and returns the round trip.
func (s *server) exec(code string) (time.Duration, error) {
	var out struct {
		Success bool `json:"success"`
		Result  struct {
			ExitCode int    `json:"exitCode"`
			Stderr   string `json:"stderr"`
		} `json:"result"`
	}
	d, err := s.Post("/v1/exec", map[string]string{"code": code, "language": "python"}, &out)
	if err != nil {
		return 0, err
	}
	if !out.Success || out.Result.ExitCode != 0 {
		return 0, fmt.Errorf("POST /v1/exec: exit %d, stderr %q", out.Result.ExitCode, out.Result.Stderr)
	}
	return d, nil
}

// throughput posts print(2+2) from c workers for d; it counts successes
// and failures. lat, when not nil, receives each success's round trip.
func (s *server) throughput(code string, c int, d time.Duration, lat *[]time.Duration) (float64, int64, int64, error) {
	var ok, failed atomic.Int64
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for ctx.Err() == nil {
				if rt, err := s.exec(code); err != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
					mine = append(mine, rt)
				}
			}
			if lat != nil {
				mu.Lock()
				*lat = append(*lat, mine...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), failed.Load(), ok.Load(), nil
}

// sweep runs the throughput load at each concurrency for d and prints a
// table: the rate, the round trip's p50 and p99, and the failures (a 503
// busy is one).
func (s *server) sweep(levels []int, d time.Duration) error {
	fmt.Printf("\nconcurrency sweep, print(2+2), %v each, the server's default flags\n", d)
	fmt.Printf("  %4s %9s %9s %9s %8s\n", "c", "rate/s", "p50", "p99", "errors")
	for _, c := range levels {
		var lat []time.Duration
		rate, errs, _, err := s.throughput(printCode, c, d, &lat)
		if err != nil {
			return err
		}
		if len(lat) == 0 {
			fmt.Printf("  %4d %9.1f %9s %9s %8d\n", c, rate, "-", "-", errs)
			continue
		}
		fmt.Printf("  %4d %9.1f %s %s %8d\n", c, rate, ms(pct(lat, 50)), ms(pct(lat, 99)), errs)
	}
	return nil
}

func barePython(args ...string) (time.Duration, error) {
	t := time.Now()
	out, err := exec.Command(*python, args...).Output()
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("bare python: %v", err)
	}
	if len(out) == 0 {
		return 0, errors.New("bare python printed nothing")
	}
	return d, nil
}

// bareRun is what bareThroughput did: count runs in took.
type bareRun struct {
	count int64
	took  time.Duration
}

func (r bareRun) rate() float64 { return float64(r.count) / r.took.Seconds() }

// bareThroughput spawns bare python3 back to back on every core for d.
func bareThroughput(code string, d time.Duration) bareRun {
	var count atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := barePython("-c", code); err == nil {
					count.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return bareRun{count.Load(), time.Since(start)}
}

// processCPU is the user and system CPU time of one process.
func processCPU(pid int) time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14 of stat
	k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return time.Duration(u+k) * 10 * time.Millisecond
}

// machineCPU is the CPU time every core has spent busy (user, nice,
// system, irq, softirq), from /proc/stat.
func machineCPU() time.Duration {
	b, _ := os.ReadFile("/proc/stat")
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
}

// settledRSS is the server's RSS after a few requests, once idle.
func settledRSS(s *server) float64 {
	for range 5 {
		s.exec(printCode)
	}
	runtime.GC()
	return float64(statusKB(s.Cmd.Process.Pid, "VmRSS:")) * 1024
}

// warmPSS measures the proportional memory one more warm sandbox adds: the
// total PSS of the server and every process of its sandboxes, with the
// pool at two sizes. Only the zygote with the pre-imports serves here (no
// lean one): its children are the larger, and the ones whose pre-imports
// must be shared rather than paid for each.
func warmPSS(bin, tmp string) (float64, error) {
	const small, large = 2, 10
	total := func(min int) (float64, error) {
		s, err := startServer(bin, tmp, "pss"+strconv.Itoa(min), "--pool-min", strconv.Itoa(min), "--pool-max", strconv.Itoa(large+4), "--pool-lean=false")
		if err != nil {
			return 0, err
		}
		defer s.Stop()
		s.exec(printCode)
		// Let the pool refill to its floor, then sum PSS over the tree.
		deadline := time.Now().Add(30 * time.Second)
		var pss float64
		for time.Now().Before(deadline) {
			pss = treePSS(s.Cmd.Process.Pid)
			time.Sleep(500 * time.Millisecond)
			if next := treePSS(s.Cmd.Process.Pid); next-pss < 64<<10 {
				break
			}
		}
		return treePSS(s.Cmd.Process.Pid), nil
	}
	a, err := total(small)
	if err != nil {
		return 0, err
	}
	b, err := total(large)
	if err != nil {
		return 0, err
	}
	return (b - a) / (large - small), nil
}

// treePSS sums Pss over pid and all its descendants, each address space
// once: a warm child's keeper shares its child's (see zygote.py), and
// smaps_rollup would show the same pages under both.
func treePSS(pid int) float64 {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := statusKB(p, "PPid:"); pp > 0 {
			children[int(pp)] = append(children[int(pp)], p)
		}
	}
	var sum float64
	stack := []int{pid}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if pp := int(statusKB(p, "PPid:")); p == pid || !sameMemory(pp, p) {
			sum += float64(smapsKB(p, "Pss:")) * 1024
		}
		stack = append(stack, children[p]...)
	}
	return sum
}

// sameMemory reports whether two processes share one address space.
func sameMemory(a, b int) bool {
	const kcmpVM = 1
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	return errno == 0 && r == 0
}

func statusKB(pid int, key string) int64 { return fieldKB(fmt.Sprintf("/proc/%d/status", pid), key) }
func smapsKB(pid int, key string) int64 {
	return fieldKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), key)
}

func fieldKB(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

func pythonVersion() string {
	out, _ := exec.Command(*python, "--version").Output()
	return strings.TrimSpace(string(out))
}

func pct(d []time.Duration, p int) time.Duration { return served.Pct(d, p) }
func ratio(a, b time.Duration) float64           { return float64(a) / float64(b) }
func ms(d time.Duration) string                  { return served.Ms(d) }
func mib(b float64) float64                      { return b / (1 << 20) }
