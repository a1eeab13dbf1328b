package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"boxer"
	"boxer/internal/cgroup"
	"boxer/internal/sandbox/warm"

	"golang.org/x/sys/unix"
)

// Warm is one child of a zygote: isolated, unprivileged and waiting for
// its one job. Preparing it costs a fork, namespaces and mounts; running a
// job on it costs the per-job limits, the files and one message.
//
// A child is two processes sharing one address space: its pid 1, which the
// zygote forked into a PID namespace of its own, and the job's process,
// pid 2, which pid 1 clones. The conversation on its job socket, step by
// step, is drawn in warm/protocol.go; Prepare and Run are boxer's side of
// it.
type Warm struct {
	z    *Zygote
	id   string
	slot int
	cg   cgroup.Cgroup
	conn *packetConn
	work int // dirfd of the child's /work; keeps the tmpfs alive after the child
	// net holds the child's network namespace, which Destroy keeps for
	// the slot's next child if the job left it untouched (see heldNet).
	// Its mount and IPC namespaces go with its pid 1, whose exit tears
	// them down after the job's (see Destroy), on the child's CPU time
	// and not on boxer's.
	net *heldNet
	// ip answers the job's IP sockets when the namespace may be kept, and
	// knows whether it made any (see ipGate).
	ip *ipGate
	// session is set once w runs a session, whose namespace is not kept
	// (see heldNet).
	session bool
	// pidfd is the child's pid 1, which holds its address space so that
	// the job's exit is not held up by the teardown, to kill it without the
	// freezer; job is the job's process, pid 2, jobPid its pid and
	// jobStat its /proc/PID/stat, opened while it waits (see exitOf).
	pidfd   int
	initPid int
	job     *os.File
	jobPid  int
	jobStat int
	// exited receives pid 1's wait status once the zygote has reaped it
	// (and closes if the zygote dies).
	exited <-chan uint32

	destroyed sync.Once
	disk      int64
	setup     time.Duration // the CPU the cgroup had used when the child was ready
	// stdin, out and err are boxer's ends of the job's pipes; child holds
	// the other three ends until they go to the child with its job.
	stdin *os.File
	out   *os.File
	err   *os.File
	child []int
}

// Prepare forks and isolates a warm child.
func (z *Zygote) Prepare(ctx context.Context) (_ *Warm, retErr error) {
	if z.retired.Load() {
		return nil, errors.New("zygote retired")
	}
	free, err := z.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	e := z.e
	z.live.Add(1)
	w := &Warm{z: z, id: "w" + newID(), slot: free.slot, cg: free.cg, net: free.net, work: -1, pidfd: -1, jobStat: -1, disk: e.cfg.Limits.DiskBytes}
	defer func() {
		if retErr != nil {
			w.Destroy()
		}
	}()
	res := resources(e.cfg.Limits)
	res.Weight = backgroundWeight // until its job arrives: Run sets the job's limits
	if w.cg != nil {
		err = w.cg.Set(res)
	} else {
		w.cg, err = e.cgroups.Create(w.id, res)
	}
	if err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	defer unix.Close(pair[1]) // the zygote passes it on to the child
	if err := unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("SO_PASSCRED: %w", err)
	}
	// Room for the job in one packet (see warm.MaxCommandBytes). Without
	// CAP_NET_ADMIN the kernel caps the plain option at net.core.wmem_max.
	if unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, warm.SocketBuffer) != nil {
		_ = unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUF, warm.SocketBuffer)
	}
	if w.conn, err = newPacketConn(pair[0], "job"); err != nil {
		return nil, err
	}
	if w.stdin, err = w.pipe(false); err != nil {
		return nil, err
	}
	if w.out, err = w.pipe(true); err != nil {
		return nil, err
	}
	if w.err, err = w.pipe(true); err != nil {
		return nil, err
	}
	req := warm.ForkRequest{UID: int64(UID + w.slot), InitUID: int64(UID + z.nslots + w.slot), DiskBytes: w.disk, Inodes: e.cfg.TmpInodes}
	if w.net == nil {
		req.FreshNet = 1
	}
	// The zygote reports pid 1's exit once it has reaped it: the job's
	// status is its process's (see Run), and Destroy waits for the reap.
	if w.exited, err = z.fork(req, pair[1]); err != nil {
		return nil, err
	}
	hello, err := w.recv(ctx)
	if err != nil {
		return nil, err
	}
	if hello.creds == nil || hello.Op != warm.OpHello {
		return nil, fmt.Errorf("warm child: no credentials in %q", hello.Op)
	}
	pid := int(hello.creds.Pid)
	w.initPid = pid
	if w.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		return nil, fmt.Errorf("pidfd of warm child: %w", err)
	}
	var joinNet []int // the namespace to join, sent with go
	if w.net == nil && z.keepNet {
		if w.net, err = holdNet(pid); err != nil {
			return nil, fmt.Errorf("hold warm child's network namespace: %w", err)
		}
	} else if w.net != nil {
		joinNet = []int{w.net.fd}
	}
	if err := w.cg.Add(pid); err != nil {
		return nil, fmt.Errorf("move warm child into its cgroup: %w", err)
	}
	if err := w.send(warm.Msg{Op: warm.OpGo}, joinNet...); err != nil {
		return nil, err
	}
	ready, err := w.recv(ctx)
	if err != nil {
		return nil, err
	}
	fds := 1 // the work dir's, and with KeepNet the seccomp listener's
	if z.keepNet {
		fds = 2
	}
	if ready.Op != warm.OpReady || len(ready.fds) != fds || ready.creds == nil || int(ready.creds.Pid) == pid {
		for _, fd := range ready.fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("warm child setup failed: %s", ready.Msg.Msg)
	}
	w.work = ready.fds[0]
	if z.keepNet {
		if w.ip, err = watchIP(ready.fds[1]); err != nil {
			return nil, fmt.Errorf("warm child's seccomp listener: %w", err)
		}
	}
	_ = w.conn.SetReadDeadline(time.Time{})
	// pid 1 waits for the job's process to exit or exec, and must stop
	// before it runs again: the job shares its memory (see _drop).
	if err := unix.PidfdSendSignal(w.pidfd, unix.SIGSTOP, nil, 0); err != nil {
		return nil, fmt.Errorf("stop warm child's pid 1: %w", err)
	}
	w.jobPid = int(ready.creds.Pid)
	jobfd, err := unix.PidfdOpen(w.jobPid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd of warm child's job process: %w", err)
	}
	w.job = os.NewFile(uintptr(jobfd), "job-pidfd") // on the runtime's poller: see exitOf
	// Opened after the pidfd, which holds the pid: the file is that
	// process's, whatever its pid comes to mean later.
	if w.jobStat, err = unix.Open("/proc/"+strconv.Itoa(w.jobPid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("stat file of warm child's job process: %w", err)
	}
	// The child is idle from ready on (zygote.py rehearses before it): it
	// takes a default job's limits, and the CPU its set-up used is read,
	// here rather than on the job's path, where Run then writes only the
	// limits a job changes.
	if err := w.cg.Set(z.defaults); err != nil {
		return nil, fmt.Errorf("apply cgroup limits: %w", err)
	}
	if w.setup, err = setupCPU(w.cg); err != nil {
		return nil, err
	}
	return w, nil
}

// pipe makes a pipe for the job's stdio (see jobPipe), keeping the
// child's end in w.child, and returns boxer's.
func (w *Warm) pipe(boxerReads bool) (*os.File, error) {
	f, fd, err := jobPipe(boxerReads)
	if err != nil {
		return nil, err
	}
	w.child = append(w.child, fd)
	return f, nil
}

// send sends m to the child, with fds if any.
func (w *Warm) send(m warm.Msg, fds ...int) error {
	b, _ := json.Marshal(m)
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	if _, _, err := w.conn.WriteMsgUnix(b, rights, nil); err != nil {
		return fmt.Errorf("warm child: send: %w", err)
	}
	return nil
}

// childMsg is one message from a warm child, with what the kernel attached.
type childMsg struct {
	warm.Msg
	creds *unix.Ucred
	fds   []int
}

// recv reads the child's next message, within the setup timeout.
func (w *Warm) recv(ctx context.Context) (childMsg, error) {
	deadline := time.Now().Add(setupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = w.conn.SetReadDeadline(deadline)
	// A dead zygote takes the child with it; do not wait out the deadline.
	stop := context.AfterFunc(w.z.dead, func() { _ = w.conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(unix.SizeofUcred)+unix.CmsgSpace(4*4))
	n, oobn, _, _, err := w.conn.ReadMsgUnix(buf, oob)
	var m childMsg
	if err != nil || n == 0 {
		return m, fmt.Errorf("warm child: setup ended early (%v)", err)
	}
	cmsgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for i := range cmsgs {
		if fds, err := unix.ParseUnixRights(&cmsgs[i]); err == nil {
			m.fds = append(m.fds, fds...)
		} else if cred, err := unix.ParseUnixCredentials(&cmsgs[i]); err == nil {
			m.creds = cred
		}
	}
	if m.Msg, err = warm.Decode(buf[:n]); err != nil {
		for _, fd := range m.fds {
			unix.Close(fd)
		}
		return m, fmt.Errorf("warm child: bad message: %w", err)
	}
	return m, nil
}

// Form is how a warm child runs a job: "file" (python FILE ARGS), "command"
// (python -c CODE ARGS) or "module" (python -m MOD ARGS).
type Form struct {
	Kind   string
	Target string
	Args   []string
}

// WarmForm tells whether argv can run warm, and how. Only the three plain
// forms qualify, at most warm.MaxCommandBytes long; any interpreter flag
// sends the job to a cold sandbox, which runs it exactly as given.
func (e *Engine) WarmForm(argv []string) (Form, bool) {
	if len(argv) < 2 || !slices.Contains(e.runtime.Aliases, argv[0]) || argvBytes(argv) > warm.MaxCommandBytes {
		return Form{}, false
	}
	switch a := argv[1]; {
	case (a == "-c" || a == "-m") && len(argv) >= 3:
		kind := map[string]string{"-c": "command", "-m": "module"}[a]
		return Form{Kind: kind, Target: argv[2], Args: argv[3:]}, true
	case a != "" && a[0] != '-':
		return Form{Kind: "file", Target: a, Args: argv[2:]}, true
	}
	return Form{}, false
}

// WarmFits reports whether a job with limits lim (settled by JobLimits)
// can run warm: the size of a warm child's tmpfs mounts is fixed when it is
// prepared (the engine's default), and its open files can be no more than
// its zygote's (see zygoteRlimits). A job that does not fit runs cold.
func (e *Engine) WarmFits(lim boxer.Limits) bool {
	return lim.DiskBytes == e.cfg.Limits.DiskBytes && uint64(lim.OpenFiles) <= rlimitOf(e.zygoteRlimits(), unix.RLIMIT_NOFILE).Max
}

// Warmable reports whether job can run on a warm child (see WarmForm and
// WarmFits), with an error if its limits are refused (see JobLimits).
func (e *Engine) Warmable(job *boxer.Job) (bool, error) {
	lim, err := e.JobLimits(job.Limits)
	if err != nil {
		return false, err
	}
	_, ok := e.WarmForm(job.Argv)
	return ok && e.WarmFits(lim) && (job.Runtime == "" || job.Runtime == e.runtime.Name), nil
}

// Run runs job on w, as a cold sandbox would run it; its command must have
// a warm form (WarmForm). w is spent afterwards: Destroy it.
func (w *Warm) Run(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
	e := w.z.e
	form, ok := e.WarmForm(job.Argv)
	if !ok {
		return nil, fmt.Errorf("command %q has no warm form; run the job cold", job.Argv)
	}
	lim, err := e.JobLimits(job.Limits)
	if err != nil {
		return nil, err
	}
	if !e.WarmFits(lim) {
		// The child could not set the limits and would exit before the
		// job: an error, not a result that blames the program.
		return nil, fmt.Errorf("open files %d, disk %d bytes: a warm child has its zygote's at most %d and the default %d; run the job cold",
			lim.OpenFiles, lim.DiskBytes, w.z.nofile, w.disk)
	}
	b, err := warm.Job{Form: form.Kind, Target: form.Target, Args: form.Args, Argv0: job.Argv[0], Rlimits: e.rlimits(lim)}.Marshal()
	if err != nil {
		return nil, err
	}
	if err := w.cg.Set(jobResources(lim)); err != nil {
		return nil, fmt.Errorf("apply cgroup limits: %w", err)
	}
	if err := writeFiles(w.work, w.z.userBase+uint32(w.slot), job.Files); err != nil {
		return nil, err
	}
	io := startIO(w.stdin, w.out, w.err, job.Stdin, lim.OutputBytes, job.Output)
	w.stdin, w.out, w.err = nil, nil, nil
	_, _, err = w.conn.WriteMsgUnix(b, unix.UnixRights(w.child...), nil)
	closeFDs(w.child)
	w.child = nil
	if err != nil {
		return nil, fmt.Errorf("warm child: send job: %w", err)
	}
	w.conn.Close() // the child closed its end too: caller code has no channel to boxer
	w.conn = nil
	started := time.Now()
	out := awaitEnd(ctx, lim.WallTime, exitOf(w.job, w.jobStat), func() { _ = w.cg.Kill() })
	wall := time.Since(started)
	if out.exited && !out.timedOut && !out.cancelled && out.waitStatus.Signaled() &&
		out.waitStatus.Signal() == unix.SIGKILL && w.initKilled() {
		// pid 1 was killed under the job (the zygote died, taking its
		// PID namespace and every one below it): the job's SIGKILL is
		// that kill's, not the program's.
		out = outcome{initFailed: "the warm child's pid 1 was killed while the job ran"}
	}
	// The job's process is gone; whatever it started goes too, before
	// anything is read or reported.
	if err := w.killRest(); err != nil {
		return nil, fmt.Errorf("kill warm child's processes: %w", err)
	}
	return finish(ctx, e, w.id, w.cg, w.work, io, job, out, wall, w.setup)
}

// exitOf delivers the wait status of the job's process once its pidfd
// turns readable, or closes without one if it cannot be read. The process
// stays a zombie (it has no exit signal, and its parent, pid 1, is stopped
// and never reaps it), so its status is in its /proc/PID/stat, open at
// stat since it was ready: read there, not opened after the exit, where
// the path walk through /proc was a tenth of a millisecond of the
// answer's wait. It is reaped with pid 1 (Destroy).
func exitOf(pidfd *os.File, stat int) <-chan uint32 {
	ch := make(chan uint32, 1)
	go func() {
		defer close(ch)
		rc, err := pidfd.SyscallConn()
		if err != nil {
			return
		}
		// false: not yet; the runtime's poller waits for readability.
		err = rc.Read(func(fd uintptr) bool { return pidfdExited(int(fd)) })
		if err != nil {
			return
		}
		if ws, ok := zombieStatus(stat); ok {
			ch <- ws
		}
	}()
	return ch
}

// pidfdExited reports whether the process of pidfd has exited: its pidfd
// is readable, or cannot be polled at all (then nothing will tell more).
func pidfdExited(pidfd int) bool {
	p := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(p, 0)
		if err != unix.EINTR {
			return err != nil || n == 1
		}
	}
}

// initKilled reports whether the child's pid 1 has exited or has a
// SIGKILL pending. Nothing in the sandbox can signal it; the kernel does
// when a namespace above it dies, which kills the job too.
func (w *Warm) initKilled() bool {
	if pidfdExited(w.pidfd) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.initPid))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask>>(unix.SIGKILL-1)&1 == 1 {
			return true
		}
	}
	return false
}

// zombieStatus reads the wait status of an exited, unreaped process: the
// exit_code field (52nd) of its /proc/PID/stat, open at stat, in wait(2)'s
// encoding.
func zombieStatus(stat int) (uint32, bool) {
	b, err := readProcAt(stat)
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')') // the command may hold spaces and parens
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // from field 3, the state
	if len(f) < 50 || f[0] != "Z" && f[0] != "X" {
		return 0, false
	}
	v, err := strconv.ParseUint(f[49], 10, 32)
	return uint32(v), err == nil
}

// readProcAt reads a small file of /proc, open at fd, afresh from its
// start in one read, with a plain system call: os.ReadFile would also try
// the runtime's poller, stat the file and switch its blocking mode, for
// each job.
func readProcAt(fd int) ([]byte, error) {
	b := make([]byte, 1024) // /proc/PID/stat is some 300 bytes
	for {
		n, err := unix.Pread(fd, b, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == len(b) {
			return nil, fmt.Errorf("longer than %d bytes", len(b))
		}
		return b[:n], nil
	}
}

// killRest kills what is left of the job once its process has exited.
// pids.current counts every task of the run, forks under way and unreaped
// zombies included: with pid 1 (stopped) and the job's process (a zombie
// pid 1 never reaps) it is two, and nothing else of the job's is left;
// pid 1 is left to Destroy, after the answer: its death is the teardown of
// the address space and of the namespaces, which is what it was there to
// keep off the answer's path. Anything more is the job's own processes:
// the cgroup is killed and emptied, pid 1 and all.
func (w *Warm) killRest() error {
	if n, err := w.cg.Tasks(); err == nil && n <= 2 {
		return nil
	}
	return w.cg.Kill()
}

func argvBytes(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	return n
}

// jobResources is the cgroup's share of a warm job's limits. The
// program's rlimits are a cold run's: pid 1's real uid is not the job's,
// so it does not count against RLIMIT_NPROC. It does count in the
// cgroup's pids, as a cold sandbox's pid 1 does.
func jobResources(lim boxer.Limits) cgroup.Resources {
	res := resources(lim)
	if res.Pids > 0 {
		res.Pids++
	}
	return res
}

// Destroy kills what is left of w and removes its cgroup and work dir. It
// may be called more than once.
func (w *Warm) Destroy() { w.destroyed.Do(w.destroy) }

// passesNet reports whether w's network namespace may serve the slot's
// next child (see heldNet): the slot is kept, pid 1 is reaped (so no
// process is left in the namespace), w ran no session, its gate saw no IP
// socket (a child whose Prepare failed before the gate has none), and the
// namespace reads as it did when new.
func (w *Warm) passesNet(leaked, empty bool) bool {
	return !leaked && empty && !w.session && w.ip != nil && !w.ip.used.Load() && w.net.untouched()
}

func (w *Warm) destroy() {
	if w.conn != nil {
		w.conn.Close() // an unused child reads EOF and exits
	}
	closeAll([]*os.File{w.stdin, w.out, w.err})
	closeFDs(w.child)
	// Closed before pid 1 is killed, so that /work goes with the child's
	// mount namespace in pid 1's exit, as /tmp and /dev/shm do.
	if w.work >= 0 {
		unix.Close(w.work)
	}
	// The child dies by its pid 1's pidfd at once: the kernel kills the
	// rest of its PID namespace, and the death of pid 1 is the teardown
	// of the address space and of the mount and IPC namespaces. Waiting for the zygote to reap
	// it leaves the cgroup's freezer, slow on v1, only for whatever else
	// the job left, and its emptiness to one read: a zombie still counts in
	// pids.current, though no cgroup.procs lists it.
	// Once pid 1 is reaped, its namespaces are empty (its death kills and
	// reaps every other process of its PID namespace first), and its
	// mount namespace is gone with the tmpfs pages (its exit unmounts it,
	// before the zygote can reap it).
	empty := false
	if w.pidfd >= 0 {
		_ = unix.PidfdSendSignal(w.pidfd, unix.SIGKILL, nil, 0)
		if w.exited != nil {
			t := time.NewTimer(time.Second)
			select {
			case _, empty = <-w.exited:
			case <-t.C:
			}
			t.Stop()
		}
	}
	// The slot's next child gets the cgroup, once reset: its pages are
	// uncharged now that the tmpfs is gone.
	leaked := false
	if w.cg != nil {
		if err := w.cg.Reset(); err != nil {
			// Not a failure: the slot makes a new cgroup, as it would
			// without reuse. Now and then a little more memory than the
			// reset allows stays charged after the reclaim (the soak saw
			// 1.3 MiB once in 90 runs).
			if !errors.Is(err, cgroup.ErrNotReusable) {
				w.z.e.log.Debug("warm slot cgroup not reused", "cgroup", w.cg.Path(), "err", err)
			}
			if err := w.cg.Destroy(); err != nil {
				w.z.e.log.Error("destroy warm cgroup", "sandbox", w.id, "err", err)
				leaked = true
			}
			w.cg = nil
		}
	}
	if w.pidfd >= 0 {
		unix.Close(w.pidfd)
	}
	if w.job != nil {
		w.job.Close()
	}
	if w.jobStat >= 0 {
		unix.Close(w.jobStat)
	}
	if w.ip != nil {
		defer w.ip.close() // after the check: its processes are gone
	}
	if w.net != nil && !w.passesNet(leaked, empty) {
		w.net.close() // torn down by the kernel's workers, in the background
		w.net = nil
	}
	if !leaked {
		w.z.releaseSlot(w.slot, w.cg, w.net)
	}
	w.z.live.Done()
}
