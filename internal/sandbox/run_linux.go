package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"boxer"
	"boxer/internal/sandbox/nsinit"

	"golang.org/x/sys/unix"
)

// outcome is what the parent saw of the program's end.
type outcome struct {
	exited     bool // pid 1 reported the program's wait status
	waitStatus unix.WaitStatus
	timedOut   bool
	cancelled  bool
	initFailed string // pid 1 died or failed without telling us why the program ended
}

// run hands the job to a ready sandbox, waits for the program's end and
// gathers the result. The sandbox is spent afterwards.
func (sb *sandbox) run(ctx context.Context, job *boxer.Job, lim boxer.Limits, path string) (*boxer.Result, error) {
	if err := sb.cg.Set(resources(lim)); err != nil {
		return nil, fmt.Errorf("apply cgroup limits: %w", err)
	}
	work, err := openDir(sb.work)
	if err != nil {
		return nil, err
	}
	defer unix.Close(work)
	if err := writeFiles(work, sb.e.ids.user(sb.slot), job.Files); err != nil {
		return nil, err
	}
	stdout := startCapture(sb.stdout, lim.OutputBytes)
	stderr := startCapture(sb.stderr, lim.OutputBytes)
	sb.stdout, sb.stderr = nil, nil // the captures own and close them
	go feedStdin(sb.stdin, job.Stdin)
	sb.stdin = nil

	spec := nsinit.Job{
		Path:    path,
		Argv:    job.Argv,
		Env:     programEnv(),
		Dir:     WorkDir,
		UID:     UID,
		GID:     UID,
		Rlimits: rlimits(lim),
		Seccomp: sb.e.filter,
	}
	if err := json.NewEncoder(sb.spec).Encode(&spec); err != nil {
		return nil, fmt.Errorf("send job: %w", err)
	}
	sb.spec.Close()
	sb.spec = nil
	if _, err := sb.await(ctx, nsinit.EventStarted); err != nil {
		return nil, err
	}
	started := time.Now()
	out := sb.wait(ctx, lim.WallTime)
	wall := time.Since(started)

	// pid 1 is reaped: the kernel has killed and reaped every process of
	// the namespace, so the streams are at EOF and the work dir is still.
	<-sb.exited
	res := &boxer.Result{Wall: wall, Stdout: stdout.wait(), Stderr: stderr.wait()}
	if out.cancelled {
		return nil, ctx.Err()
	}
	stats, err := sb.cg.Stats()
	if err != nil {
		return nil, fmt.Errorf("read cgroup stats: %w", err)
	}
	res.CPU, res.MemoryPeak = stats.CPU, stats.MemoryPeak
	classify(res, out, stats.OOMKills)
	if out.initFailed != "" {
		sb.e.log.Error("sandbox init failed after start", "sandbox", sb.id, "detail", out.initFailed)
	}
	res.Artifacts, res.MissingArtifacts = collectArtifacts(work, job.Artifacts, sb.e.artifactLimits())
	return res, nil
}

// wait blocks until the program ends, the wall-clock limit passes or ctx is
// done; in the last two cases it kills the sandbox.
func (sb *sandbox) wait(ctx context.Context, limit time.Duration) outcome {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var out outcome
	for {
		select {
		case rep, ok := <-sb.reports:
			switch {
			case !ok:
				if !out.exited && !out.timedOut && !out.cancelled {
					out.initFailed = "sandbox init exited without a report"
				}
				return out
			case rep.Event == nsinit.EventExited:
				out.exited, out.waitStatus = true, unix.WaitStatus(rep.WaitStatus)
			default:
				out.initFailed = fmt.Sprintf("unexpected report %q: %s", rep.Event, rep.Msg)
			}
		case <-timer.C:
			out.timedOut = true
			sb.kill()
		case <-ctx.Done():
			out.cancelled = true
			sb.kill()
		}
	}
}

// classify turns what was seen into the result's status.
func classify(res *boxer.Result, out outcome, oomKills int64) {
	ws := out.waitStatus
	switch {
	case out.timedOut && !out.exited:
		res.Status, res.ExitCode, res.Signal = boxer.StatusTimeout, -1, "SIGKILL"
	case oomKills > 0 && !(out.exited && ws.Exited() && ws.ExitStatus() == 0):
		// The kernel's own counter says memory ran out and the program did
		// not finish cleanly: whatever killed it, that is why.
		res.Status, res.ExitCode, res.Signal = boxer.StatusOOM, -1, "SIGKILL"
		if out.exited && ws.Exited() {
			res.ExitCode, res.Signal = ws.ExitStatus(), ""
		}
	case !out.exited:
		res.Status, res.ExitCode = boxer.StatusInternalError, -1
	case ws.Exited() && ws.ExitStatus() == 0:
		res.Status = boxer.StatusOK
	case ws.Exited():
		res.Status, res.ExitCode = boxer.StatusNonzeroExit, ws.ExitStatus()
	case ws.Signaled():
		res.Status, res.ExitCode, res.Signal = boxer.StatusSignaled, -1, unix.SignalName(ws.Signal())
	default:
		res.Status, res.ExitCode = boxer.StatusInternalError, -1
	}
}

// feedStdin writes the job's stdin and closes the pipe. If the program
// exits without reading, the write fails with EPIPE and is dropped.
func feedStdin(w interface {
	Write([]byte) (int, error)
	Close() error
}, data []byte) {
	if len(data) > 0 {
		_, _ = w.Write(data)
	}
	_ = w.Close()
}

// rlimits are the per-process limits the program starts with. They back up
// the cgroup (NPROC) and cover what cgroups do not (files, cores).
func rlimits(l boxer.Limits) []nsinit.Rlimit {
	same := func(res int, v uint64) nsinit.Rlimit { return nsinit.Rlimit{Resource: res, Cur: v, Max: v} }
	return []nsinit.Rlimit{
		same(unix.RLIMIT_CORE, 0),
		same(unix.RLIMIT_NOFILE, uint64(l.OpenFiles)),
		same(unix.RLIMIT_FSIZE, uint64(l.FileSizeBytes)),
		same(unix.RLIMIT_NPROC, uint64(l.Pids)),
		same(unix.RLIMIT_RTPRIO, 0),
		same(unix.RLIMIT_MEMLOCK, 64<<10),
		same(unix.RLIMIT_MSGQUEUE, 64<<10),
		same(unix.RLIMIT_STACK, 8<<20),
	}
}
