package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"boxer"
	"boxer/internal/sandbox/warm"

	"golang.org/x/sys/unix"
)

// Session is a warm child kept for many cells: one interpreter
// (warm/zygote_session.py) that runs code after code in one __main__, in
// one work dir, until it is closed or dies. It is as isolated as a
// one-shot warm run, for its whole life: its own namespaces, uid, cgroup
// and tmpfs, and nothing of it outlives Close.
//
// One cell runs at a time; Exec refuses another with ErrSessionBusy.
// Files may be written and read while a cell runs.
type Session struct {
	w   *Warm
	lim boxer.Limits

	// msgs carries the running cell's messages (see read); it closes
	// when the socket fails or ends (the kernel is gone, or wrote what
	// boxer refuses). cell is the running cell's id (0 between cells),
	// and budget the bytes the reader may still take before it: the
	// kernel's answer to a cell fits, and caller code writing more ends
	// its session instead of costing boxer CPU.
	msgs   chan warm.CellMsg
	cell   atomic.Int64
	budget atomic.Int64
	// dead closes when the kernel's process has exited; status is its
	// wait status then, if it could be read (statusKnown). onDeath, if
	// set, is called then.
	dead        chan struct{}
	status      uint32
	statusKnown bool
	onDeath     func()

	busy sync.Mutex
	mu   sync.Mutex // guards gone, why and onDeath
	gone bool
	why  string
	// life is held (read) by every call that uses the sandbox's cgroup or
	// descriptors, and (write) by Close to destroy them: a descriptor
	// closed under a call could be a new session's by the time the call
	// used it, and a cgroup handed to another slot's child.
	life      sync.RWMutex
	destroyed bool // under life
	closed    sync.Once
}

// Errors of a session's calls. A cell's own end (an exception, a timeout,
// an OOM kill) is a result, not one of these.
var (
	ErrSessionBusy = errors.New("a cell is running in this session")
	ErrSessionGone = errors.New("the session has ended")
)

// The bounds of what boxer takes from a session's kernel per cell: its
// messages, its figures (PNGs) and a trailing expression's repr. The
// kernel keeps within them; caller code writing to the socket may not.
const (
	maxCellMsg     = 512 << 10
	maxCellFigures = 8 << 20
	maxCellValue   = 256 << 10
	// maxCellBytes is all a cell's answer may take on the socket: its
	// figures in base64 and its done.
	maxCellBytes = maxCellFigures*4/3 + 2*maxCellMsg
	// maxCellMsgs is how many of a cell's messages wait for Exec: its
	// figure chunks (at most maxCellFigures/48 KiB) and its done.
	maxCellMsgs = 256
)

// sendTimeout bounds the hand-over of a cell to the kernel: a kernel that
// does not take it (caller code keeps its thread elsewhere, and its
// socket full) is a session that cannot run cells.
const sendTimeout = 5 * time.Second

// interruptGrace is how long a cell has, once interrupted (at its timeout,
// or when its caller goes away), to stop before the session is killed.
const interruptGrace = 2 * time.Second

// streamGrace is how long a cell's streams may stay open after the kernel
// said it is done: only a process or thread the cell left running can
// hold them, and what it writes later is not the cell's.
const streamGrace = 100 * time.Millisecond

// StartSession makes w a session's kernel with limits lim (settled by
// JobLimits) for its whole life: memory, CPU and processes in its cgroup
// (SetLimits may change them), open files and file size as rlimits. The
// wall-clock limit is each Exec's. Afterwards w belongs to the session:
// Close it, not w.
func (w *Warm) StartSession(lim boxer.Limits) (*Session, error) {
	e := w.z.e
	if !e.WarmFits(lim) {
		return nil, fmt.Errorf("open files %d, disk %d bytes: a session has its zygote's at most %d and the default %d",
			lim.OpenFiles, lim.DiskBytes, w.z.nofile, w.disk)
	}
	if err := setSessionLimits(w, lim); err != nil {
		return nil, err
	}
	b, err := warm.Job{Form: warm.FormSession, Argv0: "python", Rlimits: e.rlimits(lim)}.Marshal()
	if err != nil {
		return nil, err
	}
	w.session = true
	_, _, err = w.conn.WriteMsgUnix(b, unix.UnixRights(w.child...), nil)
	// The kernel's own stdio is never read: each cell brings its streams.
	closeAll([]*os.File{w.stdin, w.out, w.err})
	closeFDs(w.child)
	w.stdin, w.out, w.err, w.child = nil, nil, nil, nil
	if err != nil {
		return nil, fmt.Errorf("warm child: send session: %w", err)
	}
	s := &Session{w: w, lim: lim, msgs: make(chan warm.CellMsg, maxCellMsgs), dead: make(chan struct{})}
	s.budget.Store(maxCellBytes)
	go s.read(w.conn)
	go s.watch(exitOf(w.job, w.jobStat))
	return s, nil
}

// watch waits for the kernel's process to exit, then records its status
// and closes dead. A kernel that dies between cells (caller code left a
// thread that ended the process) is told apart from a live one at once.
func (s *Session) watch(exited <-chan uint32) {
	ws, ok := <-exited
	s.mu.Lock()
	s.status, s.statusKnown = ws, ok
	f := s.onDeath
	s.mu.Unlock()
	close(s.dead)
	if f != nil {
		f()
	}
}

// OnDeath has f called when the kernel's process exits (at once if it has).
func (s *Session) OnDeath(f func()) {
	s.mu.Lock()
	s.onDeath = f
	s.mu.Unlock()
	select {
	case <-s.dead:
		f()
	default:
	}
}

// SetLimits sets the session's memory, CPU and process limits (its
// cgroup's) to lim's. Its rlimits stay those it started with.
func (s *Session) SetLimits(lim boxer.Limits) error {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.destroyed {
		return ErrSessionGone
	}
	if err := setSessionLimits(s.w, lim); err != nil {
		return err
	}
	s.lim = lim // under no lock: called before the session is handed out
	return nil
}

func setSessionLimits(w *Warm, lim boxer.Limits) error {
	res := resources(lim)
	if res.Pids > 0 {
		res.Pids++ // pid 1, as in Run
	}
	if err := w.cg.Set(res); err != nil {
		return fmt.Errorf("apply cgroup limits: %w", err)
	}
	return nil
}

// read delivers the running cell's messages until the socket ends or
// carries something boxer refuses: a packet cut short, a field it does not
// know, more bytes or messages than a cell's answer. It never waits for
// Exec, so that it keeps taking what arrives and closing any descriptor
// sent with it (one left in the queue could be the kernel's own socket,
// keeping it open after the kernel's death); a message for no running
// cell is dropped once read.
func (s *Session) read(conn *packetConn) {
	defer close(s.msgs)
	buf, oob := make([]byte, maxCellMsg), make([]byte, unix.CmsgSpace(unix.SizeofUcred)+unix.CmsgSpace(64*4))
	for {
		n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
		if cmsgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for i := range cmsgs {
				if fds, err := unix.ParseUnixRights(&cmsgs[i]); err == nil {
					for _, fd := range fds {
						unix.Close(fd)
					}
				}
			}
		}
		if err != nil || n == 0 {
			return
		}
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			s.endLive("the session's kernel sent a message larger than boxer takes")
			return
		}
		if s.budget.Add(-int64(n)) < 0 {
			s.endLive("the session's kernel sent more than a cell's answer")
			return
		}
		m, err := warm.DecodeCellMsg(buf[:n])
		if err != nil {
			s.endLive("the session's kernel sent a message boxer refuses: " + err.Error())
			return
		}
		if cell := s.cell.Load(); cell == 0 || m.Seq != cell {
			continue // an earlier cell's (caller code forged its answer first), or caller code's own
		}
		select {
		case s.msgs <- m:
		default:
			s.endLive("the session's kernel sent more messages than a cell's answer")
			return
		}
	}
}

// CellResult is what a cell did. Result's fields are a run's, for the
// cell alone: its output, its CPU time, its wall time; MemoryPeak is the
// session's so far. Status is StatusTimeout for a cell stopped at its
// limit, whether the interrupt stopped it or the session had to be killed.
type CellResult struct {
	boxer.Result
	// Value is the repr of the cell's trailing expression, if it has one
	// that is not None.
	Value *string
	// Error names the exception that ended the cell ("NameError: ...").
	Error string
	// Figures are the PNGs of the pyplot figures the cell left open.
	Figures [][]byte
	// Alive tells whether the session survived the cell; if not, Ended
	// says why it ended.
	Alive bool
	Ended string
}

// Exec runs code in the session, for at most timeout. At the timeout, or
// when ctx is done, the cell is interrupted (KeyboardInterrupt); if it has
// not stopped interruptGrace later, the session is killed. A cancelled
// cell returns ctx's error, with the session interrupted or ended. output,
// if not nil, gets the cell's output as it comes (see boxer.Job.Output).
func (s *Session) Exec(ctx context.Context, code string, timeout time.Duration, output func(boxer.Stream, []byte)) (*CellResult, error) {
	if !s.busy.TryLock() {
		return nil, ErrSessionBusy
	}
	defer s.busy.Unlock()
	s.life.RLock()
	defer s.life.RUnlock()
	if alive, why := s.Alive(); !alive || s.destroyed {
		return nil, fmt.Errorf("%w: %s", ErrSessionGone, why)
	}
	before, err := s.w.cg.Stats()
	if err != nil {
		return nil, fmt.Errorf("read cgroup stats: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll([]*os.File{outR, outW})
		return nil, err
	}
	// A cell's id is random: caller code can read the running cell's (it
	// shares the kernel's process) and forge its answer, fooling its own
	// cell, but never a later one's.
	for drained := false; !drained; { // what a cell forged for itself past its done
		select {
		case <-s.msgs:
		default:
			drained = true
		}
	}
	id := cellID()
	s.budget.Store(maxCellBytes)
	s.cell.Store(id)
	defer s.cell.Store(0)
	_ = s.w.conn.SetWriteDeadline(time.Now().Add(sendTimeout))
	_, _, err = s.w.conn.WriteMsgUnix(warm.Cell{Op: warm.OpCell, Seq: id, Code: code}.Marshal(),
		unix.UnixRights(int(outW.Fd()), int(errW.Fd())), nil)
	closeAll([]*os.File{outW, errW})
	io := &runIO{stdout: startCapture(outR, s.lim.OutputBytes, streamTo(output, boxer.Stdout)),
		stderr: startCapture(errR, s.lim.OutputBytes, streamTo(output, boxer.Stderr))}
	if err != nil {
		s.end("the session's kernel did not take a cell")
		io.stdout.waitAtMost(killWait)
		io.stderr.waitAtMost(killWait)
		return nil, fmt.Errorf("%w: send cell: %v", ErrSessionGone, err)
	}
	started := time.Now()
	res := &CellResult{}
	var (
		done                *warm.CellMsg
		figures             []byte
		timedOut, cancelled bool
		interrupted         <-chan time.Time
		status              *unix.WaitStatus // the kernel's, if it exited
	)
	limit := time.NewTimer(timeout)
	defer limit.Stop()
	ctxDone := ctx.Done()
	interrupt := func() {
		limit.Stop()
		ctxDone = nil
		if interrupted == nil {
			_ = unix.PidfdSendSignal(int(s.w.job.Fd()), unix.SIGINT, nil, 0)
			interrupted = time.After(interruptGrace)
		}
	}
wait:
	for done == nil {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				break wait // the kernel is gone or refused: the session ends below
			}
			switch {
			case m.Op == warm.OpDone:
				done = &m
			case len(figures)+len(m.Data)*3/4 > maxCellFigures:
				s.end("the session's kernel sent more figures than boxer takes")
				break wait
			default:
				if b, err := base64.StdEncoding.DecodeString(m.Data); err == nil {
					figures = append(figures, b...)
				}
			}
		case <-s.dead:
			s.mu.Lock()
			if s.statusKnown {
				ws := unix.WaitStatus(s.status)
				status = &ws
			}
			s.mu.Unlock()
			break wait
		case <-limit.C:
			timedOut = true
			interrupt()
		case <-ctxDone:
			cancelled = true
			interrupt()
		case <-interrupted:
			s.end("the cell did not stop within " + interruptGrace.String() + " of its interrupt; the session was killed")
			break wait
		}
	}
	res.Wall = time.Since(started)
	grace := streamGrace
	if done == nil {
		s.kill()
		grace = killWait // every process of the session is dead: EOF is due
	}
	res.Stdout, _ = io.stdout.waitAtMost(grace)
	res.Stderr, _ = io.stderr.waitAtMost(grace)
	after, err := s.w.cg.Stats()
	if err != nil {
		return nil, fmt.Errorf("read cgroup stats: %w", err)
	}
	res.CPU, res.MemoryPeak, res.OOMKills = max(after.CPU-before.CPU, 0), after.MemoryPeak, after.OOMKills-before.OOMKills
	if done == nil {
		why := "the session's interpreter exited"
		if res.OOMKills > 0 {
			why = "the cell ran out of memory (the session's limit is " + strconv.FormatInt(s.lim.MemoryBytes>>20, 10) + " MiB)"
		}
		s.end(why) // the first reason stands: an earlier one says more
	}
	res.Alive, res.Ended = s.Alive()
	switch {
	case done != nil && (timedOut || cancelled) && done.Interrupted:
		res.Status, res.ExitCode = boxer.StatusTimeout, -1
	case done != nil:
		res.ExitCode = done.ExitCode
		res.Status = boxer.StatusOK
		if done.ExitCode != 0 {
			res.Status = boxer.StatusNonzeroExit
		}
	case res.OOMKills > 0:
		res.Status, res.ExitCode, res.Signal = boxer.StatusOOM, -1, "SIGKILL"
	case timedOut || cancelled:
		res.Status, res.ExitCode, res.Signal = boxer.StatusTimeout, -1, "SIGKILL"
	case status != nil && status.Exited():
		res.Status, res.ExitCode = boxer.StatusNonzeroExit, status.ExitStatus()
		if status.ExitStatus() == 0 {
			res.Status = boxer.StatusOK
		}
	case status != nil && status.Signaled():
		res.Status, res.ExitCode, res.Signal = boxer.StatusSignaled, -1, unix.SignalName(status.Signal())
	default:
		res.Status, res.ExitCode = boxer.StatusInternalError, -1
	}
	if done != nil {
		if done.Value != nil {
			v := *done.Value
			if len(v) > maxCellValue {
				v = v[:maxCellValue] + "..."
			}
			res.Value = &v
		}
		res.Error = done.Error
		res.Figures = splitFigures(figures)
	}
	if cancelled {
		return res, ctx.Err()
	}
	return res, nil
}

// cellID is a new cell's id: random, positive.
func cellID() int64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("sandbox: no randomness: " + err.Error())
	}
	return int64(binary.LittleEndian.Uint64(b[:])>>1) | 1
}

// splitFigures cuts the kernel's figure stream into PNGs, each after its
// length in four big-endian bytes; what does not parse is dropped.
func splitFigures(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			break
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

// WriteFiles writes files into the session's work dir, replacing those
// that exist, as the session's uid.
func (s *Session) WriteFiles(files []boxer.File) error {
	s.life.RLock()
	defer s.life.RUnlock()
	if alive, why := s.Alive(); !alive || s.destroyed {
		return fmt.Errorf("%w: %s", ErrSessionGone, why)
	}
	return writeFilesAs(s.w.work, s.w.z.userBase+uint32(s.w.slot), files, true)
}

// OpenFile opens the file at p in the session's work dir, if it is a
// regular file of at most limit bytes, with the same rules as a run's
// artifacts; else it returns the reason ("not found", "refused: ...").
// The file stays readable after the session ends (it holds its own
// reference), so that the caller can send it at a client's pace without
// holding the session.
func (s *Session) OpenFile(p string, limit int64) (*os.File, int64, string, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if alive, why := s.Alive(); !alive || s.destroyed {
		return nil, 0, "", fmt.Errorf("%w: %s", ErrSessionGone, why)
	}
	if err := boxer.CheckRelPath(p); err != nil {
		return nil, 0, "refused: path " + err.Error(), nil
	}
	f, size, reason := openRegular(s.w.work, p, limit)
	return f, size, reason, nil
}

// Alive reports whether the session can run cells, and if not, why.
func (s *Session) Alive() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gone {
		select {
		case <-s.dead:
			return false, "the session's interpreter exited"
		default:
		}
	}
	return !s.gone, s.why
}

// Memory is the memory the session's cgroup holds now: what counts
// against its limit.
func (s *Session) Memory() (int64, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.destroyed {
		return 0, ErrSessionGone
	}
	return s.w.cg.Memory()
}

// endLive is end for a caller that holds no part of life: nothing is
// killed once the sandbox is destroyed (its cgroup may be another
// session's by then).
func (s *Session) endLive(why string) {
	s.life.RLock()
	defer s.life.RUnlock()
	if !s.destroyed {
		s.end(why)
	}
}

// end marks the session ended for reason why (the first reason stands)
// and kills what is left of it. The caller holds life (read), or is Close
// before it destroys the sandbox.
func (s *Session) end(why string) {
	s.mu.Lock()
	if !s.gone {
		s.gone, s.why = true, why
	}
	s.mu.Unlock()
	s.kill()
}

func (s *Session) kill() { _ = s.w.cg.Kill() }

// Close ends the session and destroys its sandbox. It may be called more
// than once, and while a cell runs (which then ends as the session did).
func (s *Session) Close() {
	s.closed.Do(func() {
		s.end("closed") // a cell running ends now, and its call returns
		s.life.Lock()
		defer s.life.Unlock()
		s.destroyed = true
		s.w.Destroy()
	})
}
