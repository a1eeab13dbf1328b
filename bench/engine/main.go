// Command engine measures the sandbox engine against a bare interpreter,
// in one run on one machine: the wall time of print(2+2) through a full
// cold sandbox (namespaces, mounts, cgroup, seccomp, teardown) next to
// `python3 -c 'print(2+2)'` started directly, with the ratio of the two.
//
// It needs root, like the engine. Run it with:
//
//	go run ./bench/engine -n 200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"boxer"
	"boxer/internal/sandbox"
	"boxer/internal/sandbox/nsinit"
)

// A sandbox's pid 1 is this binary started again (see nsinit.Init).
func init() { nsinit.Init() }

func main() {
	n := flag.Int("n", 100, "runs of each kind")
	python := flag.String("python", "/usr/bin/python3", "interpreter for both sides")
	flag.Parse()
	if err := run(*n, *python); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(n int, python string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("/run", "boxer-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e, err := sandbox.New(ctx, sandbox.Config{StateDir: dir, Python: python, CgroupName: "boxer-bench"})
	if err != nil {
		return err
	}
	defer e.Close()
	// The engine's default is half a CPU (the seed's limit); the baseline
	// has the whole machine, so give the sandbox one full CPU to compare
	// isolation costs rather than quotas. Both figures are printed.
	job := func(cpus float64) *boxer.Job {
		return &boxer.Job{
			Argv:   []string{"python", "-c", "print(2+2)"},
			Limits: boxer.Limits{CPUs: cpus},
		}
	}
	bare := func() error {
		out, err := exec.Command(python, "-c", "print(2+2)").Output()
		if err == nil && string(out) != "4\n" {
			err = fmt.Errorf("bare python printed %q", out)
		}
		return err
	}
	sandboxed := func(cpus float64) func() error {
		return func() error {
			res, err := e.Run(ctx, job(cpus))
			if err == nil && (res.Status != boxer.StatusOK || string(res.Stdout.Data) != "4\n") {
				err = fmt.Errorf("sandbox: %s %q %q", res.Status, res.Stdout.Data, res.Stderr.Data)
			}
			return err
		}
	}
	kinds := []struct {
		name string
		fn   func() error
	}{
		{"bare python3 -c", bare},
		{"sandbox, 1 CPU", sandboxed(1)},
		{"sandbox, 0.5 CPU", sandboxed(0.5)},
	}
	// Warm the page cache and the engine first, then interleave the kinds
	// so that drift on the machine hits all of them alike.
	for _, k := range kinds {
		for range 5 {
			if err := k.fn(); err != nil {
				return err
			}
		}
	}
	times := make([][]time.Duration, len(kinds))
	for range n {
		for i, k := range kinds {
			t := time.Now()
			if err := k.fn(); err != nil {
				return err
			}
			times[i] = append(times[i], time.Since(t))
		}
	}
	base := pct(times[0], 50)
	fmt.Printf("print(2+2), %d runs each, %s\n", n, python)
	fmt.Printf("%-18s %9s %9s %9s %12s\n", "", "p50", "p90", "p99", "p50 ratio")
	for i, k := range kinds {
		fmt.Printf("%-18s %9s %9s %9s %11.2fx\n", k.name, ms(pct(times[i], 50)), ms(pct(times[i], 90)), ms(pct(times[i], 99)),
			float64(pct(times[i], 50))/float64(base))
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }
