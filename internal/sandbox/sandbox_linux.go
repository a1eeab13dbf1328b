package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"boxer"
	"boxer/internal/cgroup"
	"boxer/internal/sandbox/nsinit"

	"golang.org/x/sys/unix"
)

// setupTimeout bounds how long a sandbox may take to become ready or to
// start its program; past it the sandbox is broken, not slow.
const setupTimeout = 15 * time.Second

// cloneFlags are the namespaces every sandbox gets. The cgroup namespace is
// added by pid 1 itself once it sits in its run's cgroup.
const cloneFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// sandbox is one prepared or running sandbox: its pid 1, the pipes to it,
// its cgroup and its directories. It serves exactly one job.
type sandbox struct {
	e    *Engine
	id   string
	ids  idMap
	dir  string // <state>/runs/<id>
	work string // <dir>/work, a tmpfs
	cg   cgroup.Cgroup
	cmd  *exec.Cmd

	spec    *os.File           // write end of the spec pipe
	reports chan nsinit.Report // closed when pid 1 closes its report pipe
	exited  chan struct{}      // closed once pid 1 is reaped
	stdin   *os.File           // write end of the program's stdin
	stdout  *os.File           // read end of the program's stdout
	stderr  *os.File           // read end of the program's stderr
}

// idMap is how a sandbox's ids map to the host's: its root to root, and
// its users UID..UID+users-1 to user..user+users-1.
type idMap struct {
	root, user uint32
	users      int
	release    func() // returns the ids once nothing of the sandbox is left
}

// prepareOpts are what a zygote sandbox adds to a plain one.
type prepareOpts struct {
	extraFD *os.File      // becomes FDExtra in pid 1
	files   []nsinit.File // more generated files; same paths replace the defaults
	weight  int           // the cgroup's CPU weight; 0 is the default
}

// prepare builds a sandbox up to the point where it waits for its job:
// namespaces, root filesystem and cgroup exist; no program runs yet.
func (e *Engine) prepare(ctx context.Context, lim boxer.Limits) (*sandbox, error) {
	slot, err := e.ids.get()
	if err != nil {
		return nil, err
	}
	ids := idMap{root: e.ids.root(slot), user: e.ids.user(slot), users: 1, release: func() { e.ids.put(slot) }}
	return e.prepareWith(ctx, lim, ids, prepareOpts{})
}

func (e *Engine) prepareWith(ctx context.Context, lim boxer.Limits, ids idMap, opts prepareOpts) (sb *sandbox, retErr error) {
	var err error
	sb = &sandbox{e: e, id: newID(), ids: ids}
	sb.dir = filepath.Join(e.runsDir, sb.id)
	sb.work = filepath.Join(sb.dir, "work")
	defer func() {
		if retErr != nil {
			sb.destroy()
		}
	}()
	// 0711: the sandbox's pid 1, an unprivileged host uid, must be able to
	// reach the mount points below by path, and nothing more. Chmod too:
	// Mkdir's mode is cut by the umask, which may be 077.
	if err := os.Mkdir(sb.dir, 0o711); err != nil {
		return sb, fmt.Errorf("create sandbox dir: %w", err)
	}
	if err := os.Chmod(sb.dir, 0o711); err != nil {
		return sb, fmt.Errorf("create sandbox dir: %w", err)
	}
	for _, d := range []string{"root", "work"} {
		if err := os.Mkdir(filepath.Join(sb.dir, d), 0o700); err != nil {
			return sb, fmt.Errorf("create sandbox dir: %w", err)
		}
	}
	if err := mountWork(sb.work, ids.user, lim.DiskBytes, e.cfg.TmpInodes); err != nil {
		return sb, err
	}
	res := resources(lim)
	res.Weight = opts.weight
	sb.cg, err = e.cgroups.Create(sb.id, res)
	if err != nil {
		return sb, fmt.Errorf("create cgroup: %w", err)
	}
	if err := sb.startInit(opts.extraFD); err != nil {
		return sb, err
	}
	setup := e.setup
	setup.Files = mergeFiles(setup.Files, opts.files)
	setup.Root = filepath.Join(sb.dir, "root")
	setup.Work = sb.work
	setup.TmpBytes = lim.DiskBytes
	if err := json.NewEncoder(sb.spec).Encode(&setup); err != nil {
		return sb, fmt.Errorf("send setup: %w", err)
	}
	if _, err := sb.await(ctx, nsinit.EventReady); err != nil {
		return sb, err
	}
	// pid 1 has its mounts and no longer walks host paths: close the
	// run's directory to everyone else on the host, who could otherwise
	// reach the work dir's tmpfs through it.
	if err := os.Chmod(sb.dir, 0o700); err != nil {
		return sb, fmt.Errorf("close sandbox dir: %w", err)
	}
	return sb, nil
}

// mergeFiles returns base with extra added; an extra file replaces the base
// file of the same path.
func mergeFiles(base, extra []nsinit.File) []nsinit.File {
	out := make([]nsinit.File, 0, len(base)+len(extra))
	for _, f := range base {
		if !slices.ContainsFunc(extra, func(x nsinit.File) bool { return x.Path == f.Path }) {
			out = append(out, f)
		}
	}
	return append(out, extra...)
}

// startInit starts pid 1 and wires its pipes.
func (sb *sandbox) startInit(extra *os.File) error {
	var parentEnds, childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("pipe: %w", err)
		}
		return r, w, nil
	}
	specR, specW, err := pipe()
	if err != nil {
		return err
	}
	repR, repW, err := pipe()
	if err != nil {
		return err
	}
	inR, inW, err := pipe()
	if err != nil {
		return err
	}
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	errR, errW, err := pipe()
	if err != nil {
		return err
	}
	childEnds = []*os.File{specR, repW, inR, outW, errW}
	parentEnds = []*os.File{specW, repR, inW, outR, errR}
	sb.spec, sb.stdin, sb.stdout, sb.stderr = specW, inW, outR, errR

	idmap := []syscall.SysProcIDMap{
		{ContainerID: 0, HostID: int(sb.ids.root), Size: 1},
		{ContainerID: UID, HostID: int(sb.ids.user), Size: sb.ids.users},
	}
	attr := &syscall.SysProcAttr{
		Cloneflags:  cloneFlags,
		UidMappings: idmap,
		GidMappings: idmap,
		// setgroups is denied: pid 1 inherits no supplementary groups
		// (see spawner), so none need emptying.
		GidMappingsEnableSetgroups: false,
		Credential:                 &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		// If boxer dies, pid 1 dies, and with it the PID namespace.
		Pdeathsig: syscall.SIGKILL,
	}
	if fd, ok := sb.cg.FD(); ok {
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
	files := []*os.File{specR, repW, inR, outW, errW}
	if extra != nil {
		files = append(files, extra)
	}
	sb.cmd = &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{nsinit.Arg0},
		Env:         []string{}, // pid 1's environ is readable in the sandbox: keep it empty
		Stderr:      repW,
		ExtraFiles:  files,
		SysProcAttr: attr,
	}
	if err := sb.e.spawn.start(sb.cmd); err != nil {
		for _, f := range parentEnds {
			f.Close()
		}
		sb.spec, sb.stdin, sb.stdout, sb.stderr = nil, nil, nil, nil
		return fmt.Errorf("start sandbox init: %w", err)
	}
	sb.exited = make(chan struct{})
	go func() {
		_ = sb.cmd.Wait()
		close(sb.exited)
	}()
	if _, ok := sb.cg.FD(); !ok {
		if err := sb.cg.Add(sb.cmd.Process.Pid); err != nil {
			return fmt.Errorf("move sandbox init into its cgroup: %w", err)
		}
	}
	sb.reports = make(chan nsinit.Report, 4)
	go readReports(repR, sb.reports)
	return nil
}

// readReports decodes pid 1's reports until it closes the pipe. A line that
// is not a report (a Go panic in pid 1) becomes an error report.
func readReports(r *os.File, out chan<- nsinit.Report) {
	defer close(out)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		var rep nsinit.Report
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil || rep.Event == "" {
			rep = nsinit.Report{Event: nsinit.EventError, Step: "sandbox init", Msg: sc.Text()}
		}
		out <- rep
	}
}

// await waits for pid 1 to report event. An error report, pid 1's death or
// the setup timeout is an error: the sandbox cannot be used.
func (sb *sandbox) await(ctx context.Context, event string) (nsinit.Report, error) {
	t := time.NewTimer(setupTimeout)
	defer t.Stop()
	select {
	case rep, ok := <-sb.reports:
		switch {
		case !ok:
			return rep, errors.New("sandbox init exited during setup")
		case rep.Event == nsinit.EventError:
			return rep, &SetupError{Step: rep.Step, Errno: syscall.Errno(rep.Errno), Msg: rep.Msg}
		case rep.Event != event:
			return rep, fmt.Errorf("sandbox init: got %q, want %q", rep.Event, event)
		}
		return rep, nil
	case <-t.C:
		return nsinit.Report{}, fmt.Errorf("sandbox init: no %q within %v", event, setupTimeout)
	case <-ctx.Done():
		return nsinit.Report{}, ctx.Err()
	}
}

// SetupError is a failed step of the sandbox's child side.
type SetupError struct {
	Step  string
	Errno syscall.Errno
	Msg   string
}

func (e *SetupError) Error() string { return "sandbox setup: " + e.Msg }
func (e *SetupError) Unwrap() error { return e.Errno }

// kill ends every process of the sandbox: SIGKILL to pid 1 takes the whole
// PID namespace with it. It is idempotent.
func (sb *sandbox) kill() {
	if sb.cmd != nil && sb.cmd.Process != nil {
		_ = sb.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// destroy kills what runs and removes every trace of the sandbox: processes,
// cgroup, mounts, directories, its id slot. It logs what it cannot undo.
func (sb *sandbox) destroy() {
	log := sb.e.log.With("sandbox", sb.id)
	if sb.spec != nil {
		sb.spec.Close()
	}
	if sb.cmd != nil && sb.cmd.Process != nil {
		sb.kill()
		<-sb.exited
	}
	closeAll([]*os.File{sb.stdin, sb.stdout, sb.stderr})
	leaked := false
	if sb.cg != nil {
		if err := sb.cg.Destroy(); err != nil {
			log.Error("destroy cgroup", "err", err)
			leaked = true
		}
	}
	if err := unmountWork(sb.work); err != nil {
		log.Error("unmount work dir", "err", err)
		leaked = true
	}
	if err := os.RemoveAll(sb.dir); err != nil {
		log.Error("remove sandbox dir", "err", err)
		leaked = true
	}
	if !leaked && sb.ids.release != nil {
		// Ids whose cgroup or files outlived the sandbox are not handed
		// out again: they might still own something.
		sb.ids.release()
	}
}

func resources(l boxer.Limits) cgroup.Resources {
	return cgroup.Resources{CPUs: l.CPUs, MemoryBytes: l.MemoryBytes, Pids: l.Pids}
}

// backgroundWeight is the CPU weight of a warm child's set-up, done ahead
// of its job: a tenth of a job's, so that on a busy host a running job
// gets the CPU first and refilling the pool waits.
const backgroundWeight = 10

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// closeAll closes every file of files that is not nil.
func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
