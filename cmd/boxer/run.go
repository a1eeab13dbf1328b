package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"boxer"
	"boxer/internal/api"
	"boxer/internal/sandbox"
)

const runUsage = `usage: boxer run [flags] SCRIPT [ARGS...]

Runs the local Python file SCRIPT in a fresh sandbox, with ARGS as its
arguments, prints its stdout and stderr, and exits with its exit code
(124 on timeout, 137 when out of memory, 128+N when killed by signal N).
`

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ef := newEnvFlags("run", runUsage, stderr)
	fs := ef.fs
	def := boxer.DefaultLimits()
	timeout := fs.Duration("timeout", def.WallTime, "wall-clock limit")
	memory := byteSize(def.MemoryBytes)
	fs.Var(&memory, "memory", "memory limit (e.g. 512MiB)")
	cpus := fs.Float64("cpus", def.CPUs, "CPU limit in cores (0.1 to 2)")
	stdinFile := fs.String("stdin", "", "file to give the program as its stdin")
	var files, artifacts listFlag
	fs.Var(&files, "file", "SANDBOX_PATH=LOCAL_PATH: copy a local file into the work dir; repeatable")
	fs.Var(&artifacts, "artifact", "work-dir path to bring back after the run; repeatable")
	outDir := fs.String("out", ".", "where artifacts are written")
	asJSON := fs.Bool("json", false, "print the result as JSON, in the schema of POST /v1/run-python's answer, instead of the program's output")
	cfg := engineFlags(ef)
	if !ef.parse(args) {
		return 2
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return 2
	}
	job, err := buildRunJob(fs.Arg(0), fs.Args()[1:], files, *stdinFile)
	if err != nil {
		fmt.Fprintln(stderr, "boxer run:", err)
		return 2
	}
	job.Artifacts = artifacts
	job.Limits = boxer.Limits{WallTime: *timeout, MemoryBytes: int64(memory), CPUs: *cpus}

	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := sandbox.New(ctx, *cfg)
	if err != nil {
		fmt.Fprintln(stderr, "boxer run:", err)
		return 1
	}
	defer e.Close()
	res, err := e.Run(ctx, job)
	if err != nil {
		fmt.Fprintln(stderr, "boxer run:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(api.NewRunResponse("", res)); err != nil {
			return 1
		}
	} else {
		stdout.Write(res.Stdout.Data)
		stderr.Write(res.Stderr.Data)
		for _, o := range []struct {
			name string
			out  boxer.Output
		}{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
			if o.out.Truncated {
				fmt.Fprintf(stderr, "boxer: %s truncated: kept %d of %d bytes\n", o.name, len(o.out.Data), o.out.Bytes)
			}
		}
		if err := saveArtifacts(*outDir, res, stderr); err != nil {
			fmt.Fprintln(stderr, "boxer run:", err)
			return 1
		}
		if res.Status == boxer.StatusTimeout || res.Status == boxer.StatusOOM || res.Status == boxer.StatusInternalError {
			fmt.Fprintf(stderr, "boxer: %s after %v\n", res.Status, res.Wall.Round(time.Millisecond))
		}
	}
	return exitCode(res)
}

// buildRunJob makes the job for a local script: the script and --file
// files in the work dir, "python SCRIPT ARGS..." as the command.
func buildRunJob(script string, args []string, files []string, stdinFile string) (*boxer.Job, error) {
	code, err := os.ReadFile(script)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(script)
	job := &boxer.Job{
		Argv:  append([]string{"python", name}, args...),
		Files: []boxer.File{{Path: name, Content: code}},
	}
	for _, f := range files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("--file %q: want SANDBOX_PATH=LOCAL_PATH", f)
		}
		if err := boxer.CheckRelPath(dst); err != nil {
			return nil, fmt.Errorf("--file %q: sandbox path %v", f, err)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		job.Files = append(job.Files, boxer.File{Path: dst, Content: b})
	}
	if stdinFile != "" {
		if job.Stdin, err = os.ReadFile(stdinFile); err != nil {
			return nil, err
		}
	}
	return job, nil
}

// saveArtifacts writes the run's artifacts below dir and reports the
// missing ones.
func saveArtifacts(dir string, res *boxer.Result, stderr io.Writer) error {
	var errs []error
	for _, a := range res.Artifacts {
		p := filepath.Join(dir, a.Path) // a.Path passed CheckRelPath in the engine
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(p, a.Content, 0o644))
	}
	for _, m := range res.MissingArtifacts {
		fmt.Fprintf(stderr, "boxer: artifact %s: %s\n", m.Path, m.Reason)
	}
	return errors.Join(errs...)
}

// exitCode mirrors the program's exit the way shells and timeout(1) do.
func exitCode(res *boxer.Result) int {
	switch res.Status {
	case boxer.StatusOK, boxer.StatusNonzeroExit:
		return res.ExitCode
	case boxer.StatusTimeout:
		return 124
	case boxer.StatusOOM:
		return 137
	case boxer.StatusSignaled:
		for n := 1; n < 65; n++ {
			if signalName(n) == res.Signal {
				return 128 + n
			}
		}
		return 128
	}
	return 1
}
