package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"boxer"
	"boxer/internal/cgroup"
	"boxer/internal/sandbox/nsinit"

	"golang.org/x/sys/unix"
)

// outcome is what the parent saw of the program's end.
type outcome struct {
	exited     bool // the program's wait status is known
	waitStatus unix.WaitStatus
	timedOut   bool
	cancelled  bool
	initFailed string // the sandbox died or failed without telling us why the program ended
}

// run hands the job to a ready sandbox, waits for the program's end and
// gathers the result. The sandbox is spent afterwards.
func (sb *sandbox) run(ctx context.Context, job *boxer.Job, lim boxer.Limits, path string) (*boxer.Result, error) {
	if err := sb.cg.Set(resources(lim)); err != nil {
		return nil, fmt.Errorf("apply cgroup limits: %w", err)
	}
	setup, err := setupCPU(sb.cg)
	if err != nil {
		return nil, err
	}
	work, err := openDir(sb.work)
	if err != nil {
		return nil, err
	}
	defer unix.Close(work)
	if err := writeFiles(work, sb.ids.user, job.Files); err != nil {
		return nil, err
	}
	io := startIO(sb.stdin, sb.stdout, sb.stderr, job.Stdin, lim.OutputBytes, job.Output)
	sb.stdin, sb.stdout, sb.stderr = nil, nil, nil

	spec := nsinit.Job{
		Path:    path,
		Argv:    job.Argv,
		Env:     programEnv(),
		Dir:     WorkDir,
		UID:     UID,
		GID:     UID,
		Rlimits: sb.e.rlimits(lim),
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
	out := awaitEnd(ctx, lim.WallTime, exitsOf(sb.reports), sb.kill)
	wall := time.Since(started)
	// pid 1 is reaped: the kernel has killed and reaped every process of
	// the namespace, so the streams are at EOF and the work dir is still.
	<-sb.exited
	return finish(ctx, sb.e, sb.id, sb.cg, work, io, job, out, wall, setup)
}

// setupCPU is the CPU time the sandbox's set-up spent in cg before the job
// arrived: not the program's, so finish takes it off the result.
func setupCPU(cg cgroup.Cgroup) (time.Duration, error) {
	st, err := cg.Stats()
	if err != nil {
		return 0, fmt.Errorf("read cgroup stats: %w", err)
	}
	return st.CPU, nil
}

// exitsOf turns pid 1's reports into the program's wait status: one value
// when it reports the exit, none when it dies without (the channel closes).
func exitsOf(reports <-chan nsinit.Report) <-chan uint32 {
	ch := make(chan uint32, 1)
	go func() {
		defer close(ch)
		for rep := range reports {
			if rep.Event == nsinit.EventExited {
				ch <- rep.WaitStatus
			}
		}
	}()
	return ch
}

// killWait bounds how long awaitEnd waits for the end of a program it
// killed; past it the sandbox is broken, and the run ends without a status.
const killWait = 10 * time.Second

// awaitEnd blocks until the program ends (a wait status arrives on exits,
// or exits closes because the sandbox died), the wall-clock limit passes or
// ctx is done; in the last two cases it kills and keeps waiting for exits,
// for at most killWait.
func awaitEnd(ctx context.Context, limit time.Duration, exits <-chan uint32, kill func()) outcome {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var out outcome
	done := ctx.Done()
	var gaveUp <-chan time.Time
	for {
		select {
		case <-gaveUp:
			out.initFailed = fmt.Sprintf("no end reported within %v of the kill", killWait)
			return out
		case ws, ok := <-exits:
			if !ok {
				if !out.exited && !out.timedOut && !out.cancelled {
					out.initFailed = "sandbox died without reporting the program's exit"
				}
				return out
			}
			out.exited, out.waitStatus = true, unix.WaitStatus(ws)
			return out
		case <-timer.C:
			out.timedOut = true
			kill()
			gaveUp = time.After(killWait)
		case <-done:
			out.cancelled = true
			done = nil
			kill()
			if gaveUp == nil {
				gaveUp = time.After(killWait)
			}
		}
	}
}

// finish gathers what a finished run left: output, usage, status and
// artifacts; the CPU time reported is what the cgroup used after setup.
// Precondition: every process of the run is dead.
func finish(ctx context.Context, e *Engine, id string, cg cgroup.Cgroup, work int, io *runIO, job *boxer.Job, out outcome, wall, setup time.Duration) (*boxer.Result, error) {
	res := &boxer.Result{Wall: wall}
	var cutOut, cutErr bool
	grace := time.Now().Add(killWait) // for both streams together
	res.Stdout, cutOut = io.stdout.waitAtMost(time.Until(grace))
	res.Stderr, cutErr = io.stderr.waitAtMost(time.Until(grace))
	if cutOut || cutErr {
		// Every process of the run is dead, so only a descriptor that
		// escaped it can hold a stream open: a bug to find, never a
		// request to hang.
		e.log.Error("output still open after the run ended; cut off", "sandbox", id, "stdout", cutOut, "stderr", cutErr)
	}
	if out.cancelled {
		return nil, ctx.Err()
	}
	stats, err := cg.Stats()
	if err != nil {
		return nil, fmt.Errorf("read cgroup stats: %w", err)
	}
	res.CPU, res.MemoryPeak, res.OOMKills = max(stats.CPU-setup, 0), stats.MemoryPeak, stats.OOMKills
	classify(res, out, stats.OOMKills)
	if out.initFailed != "" && stats.OOMKills == 0 {
		// (An OOM kill explains it: the kernel kills every process that
		// shares the victim's memory, and a warm child's pid 1 shares the
		// job's.)
		e.log.Error("sandbox failed after start", "sandbox", id, "detail", out.initFailed)
	}
	res.Artifacts, res.MissingArtifacts = collectArtifacts(work, job.Artifacts, e.artifactLimits())
	return res, nil
}

// runIO is a running program's three streams, seen from boxer.
type runIO struct {
	stdout, stderr *capture
}

// startIO starts capturing stdout and stderr, each piece kept given to
// output if it is not nil, and feeding stdin; it owns and closes the
// three files.
func startIO(stdin, stdout, stderr *os.File, input []byte, limit int64, output func(boxer.Stream, []byte)) *runIO {
	io := &runIO{stdout: startCapture(stdout, limit, streamTo(output, boxer.Stdout)), stderr: startCapture(stderr, limit, streamTo(output, boxer.Stderr))}
	if len(input) == 0 {
		// Most jobs have no input: EOF at once, without a goroutine (and
		// the scheduler's wake-ups it costs) to say so.
		_ = stdin.Close()
	} else {
		go feedStdin(stdin, input)
	}
	return io
}

// streamTo is output's callback for stream s, nil without one.
func streamTo(output func(boxer.Stream, []byte), s boxer.Stream) func([]byte) {
	if output == nil {
		return nil
	}
	return func(b []byte) { output(s, b) }
}

// classify turns what was seen into the result's status.
func classify(res *boxer.Result, out outcome, oomKills int64) {
	ws := out.waitStatus
	switch {
	case out.timedOut && !(out.exited && ws.Exited()):
		// Killed at the limit (a program that exited on its own just as
		// the timer fired keeps its own status).
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
	_, _ = w.Write(data)
	_ = w.Close()
}

// wantedRlimits are the per-process limits boxer wants the program to
// start with: they back up the cgroup (NPROC) and cover what cgroups do
// not (files, cores). What it gets is these cut to the host's hard limits
// (Engine.rlimits).
func wantedRlimits(l boxer.Limits) []nsinit.Rlimit {
	same := func(res int, v uint64) nsinit.Rlimit { return nsinit.Rlimit{Resource: res, Cur: v, Max: v} }
	return []nsinit.Rlimit{
		same(unix.RLIMIT_NOFILE, uint64(l.OpenFiles)),
		same(unix.RLIMIT_NPROC, uint64(l.Pids)),
		same(unix.RLIMIT_FSIZE, uint64(l.FileSizeBytes)),
		same(unix.RLIMIT_STACK, 8<<20),
		same(unix.RLIMIT_MEMLOCK, 64<<10),
		same(unix.RLIMIT_MSGQUEUE, 0), // POSIX queues are refused (seccomp's doc)
		// Pending signals are counted per user all the way up to the
		// host's root (whose user namespace made the sandbox's): without a
		// cap a run could queue root's whole budget.
		same(unix.RLIMIT_SIGPENDING, 1024),
		same(unix.RLIMIT_CORE, 0),
		same(unix.RLIMIT_RTPRIO, 0),
	}
}

// rlimits are the limits the program of a job with limits l starts with:
// boxer's wants cut to the host's hard limits. The job's own (open files,
// file size, pids) are not cut: a job whose do not fit is refused before
// it gets here (hostRlimits.allow).
func (e *Engine) rlimits(l boxer.Limits) []nsinit.Rlimit { return e.host.clamp(wantedRlimits(l)) }
