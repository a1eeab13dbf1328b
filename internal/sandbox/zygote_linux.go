package sandbox

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"boxer"
	"boxer/internal/cgroup"
	"boxer/internal/sandbox/nsinit"
	"boxer/internal/sandbox/warm"

	"golang.org/x/sys/unix"
)

// zygoteStartTimeout bounds the zygote's start, pre-imports included.
var zygoteStartTimeout = 2 * time.Minute

// forkTimeout bounds the wait for the zygote to fork a child.
var forkTimeout = setupTimeout

// ZygoteConfig shapes a warm pool's zygote.
type ZygoteConfig struct {
	// PreImports are modules the zygote imports once, so every job forked
	// from it starts with them loaded and their pages shared.
	PreImports []string
	// Learn are pre-imports (each one of warm.Samples) whose first use
	// the zygote learns as it learns print(2+2)'s: each child then copies
	// the pages that use writes before its job, not one fault at a time in
	// it. Every child pays for that copy, in CPU at its preparation and
	// in memory, whether its job uses the module or not.
	Learn []string
	// Slots bounds the warm children that may exist at once. Default 64,
	// or as many as the engine's id span has room for where that is fewer
	// (see StartZygote).
	Slots int
	// MemoryBytes caps the zygote's own cgroup (the interpreter and its
	// pre-imports; each child is charged to its own). Default 1 GiB. The
	// pages each child copies before it is moved into its own cgroup
	// (pin and pretouch in zygote_speed.py) are charged here too, and the
	// limit grows by Slots times their size once the zygote has learned
	// it.
	MemoryBytes int64
	// KeepNet keeps a child's network namespace for its slot's next child
	// when its job made no IP socket and left the namespace untouched (see
	// heldNet). Each child's seccomp filter then asks boxer about its IP
	// sockets (seccomp.NotifyIP); without seccomp nothing is kept.
	KeepNet bool
}

// Zygote is a long-lived sandbox whose program, package warm's zygote.py,
// forks warm children: each is isolated before any job exists and serves
// exactly one.
//
// The zygote sandbox is an ordinary sandbox (pid 1, mounts, cgroup) whose
// program keeps its capabilities inside the sandbox's user namespace, runs
// under seccomp.Zygote, and never runs caller code. boxer talks to it over
// a SOCK_SEQPACKET socket; the messages, and each child's, are drawn and
// declared in one file, warm/protocol.go.
type Zygote struct {
	e        *Engine
	sb       *sandbox
	ctrl     *packetConn
	nofile   uint64 // the zygote's hard RLIMIT_NOFILE: no warm job may have more
	userBase uint32 // host id of the zygote's uid UID
	// nslots is how many child slots z has: a slot's child runs its job
	// as uid UID+slot and its pid 1 as UID+nslots+slot. free holds a
	// token for each free slot. freeMu guards freeSlots, the free slots,
	// the last freed on top, so that a slot freed is the next one taken
	// and z uses as few slots as its load needs: each keeps the cgroup its
	// last child had, Reset, for the next (see Warm.destroy). freeSlots is
	// nil once Close has destroyed those cgroups.
	nslots    int
	keepNet   bool             // see ZygoteConfig.KeepNet
	defaults  cgroup.Resources // a default job's, which a child takes once ready (Prepare)
	free      chan struct{}
	freeMu    sync.Mutex
	freeSlots []freeSlot
	log       *capture // the zygote's own stderr, for the log if it dies

	// Preimported lists every module the pre-imports loaded; Missing the
	// pre-imports that could not be imported (not installed), which the
	// zygote went without.
	Preimported []string
	Missing     []string
	// Unlearned are the modules of ZygoteConfig.Learn whose first use
	// failed in the zygote's sample, each with why: their jobs run as
	// well, at the CPU of faulting on the pages one at a time.
	Unlearned []string
	// LearnedPages counts the pages of the zygote that every child copies
	// right after its fork: those a sample child wrote in its whole life
	// (see _learn in zygote.py).
	LearnedPages int
	// PinnedPages counts those of them the zygote pinned, so that a fork
	// copies them at once: each child copies the others after its fork.
	// All of them, where io_uring works and RLIMIT_MEMLOCK has room; fewer
	// where a mapping holds huge pages or the kernel refuses a file's
	// pages; 0 where nothing can be pinned (see pin in zygote_speed.py).
	PinnedPages int
	// HugeText counts the bytes of the interpreter's code the zygote moved
	// onto huge pages, 0 where the kernel has none to give (see
	// text_on_huge_pages in zygote_speed.py).
	HugeText int

	forkMu  sync.Mutex    // one fork request in flight at a time
	replies chan warm.Msg // replies to requests; a stale one is dropped (see deliver)
	mu      sync.Mutex    // guards exits
	exits   map[int]chan uint32
	// dead is cancelled when the zygote is gone: a wait selects on its
	// Done, or registers on it with context.AfterFunc, which costs no
	// goroutine per wait.
	dead     context.Context
	markDead context.CancelFunc
	closing  sync.Once
	closed   chan struct{} // closed when Close has removed the sandbox

	forks   atomic.Int64   // children forked so far
	live    sync.WaitGroup // children not yet destroyed
	retired atomic.Bool    // no more children; closes once live ones are gone
}

// StartZygote starts a zygote sandbox and waits until its pre-imports are
// done. At most sixteen zygotes may be live per engine, each owning a
// block of ids above the cold sandboxes', and so at most IDSpan/64 - 1
// slots (1,023 with the default span, 63 with the least).
func (e *Engine) StartZygote(ctx context.Context, cfg ZygoteConfig) (_ *Zygote, retErr error) {
	if cfg.Slots == 0 {
		cfg.Slots = min(64, int(e.cfg.IDSpan/64)-1)
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = 1 << 30
	}
	if cfg.Slots < 1 || cfg.Slots >= int(e.cfg.IDSpan/64) {
		return nil, fmt.Errorf("zygote: slots %d out of range", cfg.Slots)
	}
	defaults, err := e.JobLimits(boxer.Limits{})
	if err != nil {
		return nil, fmt.Errorf("zygote: the default job limits: %w", err)
	}
	block := -1
	for k := range e.zygoteIDs {
		if e.zygoteIDs[k].TryLock() {
			block = k
			break
		}
	}
	if block < 0 {
		return nil, fmt.Errorf("zygote: %d zygotes of this engine are live already", len(e.zygoteIDs))
	}
	unlock := e.zygoteIDs[block].Unlock
	// The cold sandboxes use the lower half of the engine's ids; zygote
	// block k is the k-th sixteenth of the upper half.
	base := e.cfg.IDBase + e.cfg.IDSpan/2 + uint32(block)*e.cfg.IDSpan/32
	// Each slot has two uids: its job's, UID+slot, and its pid 1's,
	// UID+Slots+slot (see _drop in zygote.py).
	ids := idMap{root: base, user: base + 1, users: 2 * cfg.Slots, release: unlock}

	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("zygote: socketpair: %w", err)
	}
	childEnd := os.NewFile(uintptr(pair[1]), "zygote-ctrl")
	ctrl, err := newPacketConn(pair[0], "zygote-ctrl")
	if err != nil {
		childEnd.Close()
		unlock()
		return nil, err
	}
	lim := e.cfg.Limits
	lim.CPUs = float64(runtime.NumCPU())
	lim.MemoryBytes = cfg.MemoryBytes
	lim.Pids = 64 + cfg.Slots // a child counts here until boxer moves it to its own cgroup
	// The zygote keeps the default CPU weight: it reports every warm job's
	// exit, so a low weight would make a finished job wait behind a
	// background fork starved by the jobs themselves.
	sb, err := e.prepareWith(ctx, lim, ids, prepareOpts{
		extraFD: childEnd,
		files:   warm.Files(UID, cfg.Slots),
	})
	// Only pid 1 (and through it the zygote) may hold the other end, so
	// that the zygote's death closes the socket.
	childEnd.Close()
	if err != nil {
		ctrl.Close()
		return nil, fmt.Errorf("zygote: %w", err)
	}
	z := &Zygote{
		e: e, sb: sb, ctrl: ctrl, userBase: ids.user, nofile: rlimitOf(e.zygoteRlimits(), unix.RLIMIT_NOFILE).Max,
		nslots: cfg.Slots,
		// Without seccomp nothing tells boxer of a job's IP sockets, and
		// no namespace is kept.
		keepNet:  cfg.KeepNet && e.ipFilter != nil,
		defaults: jobResources(defaults),
		free:     make(chan struct{}, cfg.Slots),
		replies:  make(chan warm.Msg, 1),
		exits:    make(map[int]chan uint32),
		closed:   make(chan struct{}),
	}
	z.dead, z.markDead = context.WithCancel(context.Background())
	defer func() {
		if retErr != nil {
			z.Close()
		}
	}()
	z.freeSlots = make([]freeSlot, 0, cfg.Slots)
	for i := cfg.Slots - 1; i >= 0; i-- {
		z.releaseSlot(i, nil, nil)
	}
	job := nsinit.Job{
		Path:        e.runtime.Path,
		Argv:        warm.Argv,
		Env:         programEnv(),
		Dir:         WorkDir,
		Rlimits:     e.zygoteRlimits(),
		Seccomp:     e.zygoteFilter,
		PassExtraFD: true,
		KeepCaps:    true,
	}
	if err := json.NewEncoder(sb.spec).Encode(&job); err != nil {
		return nil, fmt.Errorf("zygote: send job: %w", err)
	}
	sb.spec.Close()
	sb.spec = nil
	if _, err := sb.await(ctx, nsinit.EventStarted); err != nil {
		return nil, fmt.Errorf("zygote: %w", err)
	}
	sb.stdin.Close()
	sb.stdin = nil
	z.log = startCapture(sb.stderr, 64<<10, nil)
	// The zygote writes nothing to stdout; drained all the same. The
	// capture holds the file: read in a goroutine of its own, sb.stdout
	// could already be nil, and the unreferenced file be closed by the
	// garbage collector.
	startCapture(sb.stdout, 0, nil)
	sb.stdout, sb.stderr = nil, nil
	go z.read()

	wc := warm.Config{Filter: e.filter, SealFilter: e.sealFilter, ProcMasked: nsinit.ProcMasked,
		ProcReadOnly: nsinit.ProcReadOnly, PreImports: cfg.PreImports, Learn: cfg.Learn}
	if z.keepNet {
		wc.Filter, wc.Listen = e.ipFilter, true
	}
	hello, err := wc.Marshal()
	if err != nil {
		return nil, fmt.Errorf("zygote: %w", err)
	}
	if _, err := ctrl.Write(hello); err != nil {
		return nil, fmt.Errorf("zygote: send config: %w", err)
	}
	t := time.NewTimer(zygoteStartTimeout)
	defer t.Stop()
	select {
	case m := <-z.replies:
		if m.Op != warm.OpReady {
			return nil, fmt.Errorf("zygote: got %q, want ready: %s", m.Op, m.Msg)
		}
		z.Preimported, z.Missing, z.Unlearned = m.Preimported, m.Missing, m.Unlearned
		z.LearnedPages, z.PinnedPages, z.HugeText = m.LearnedPages, m.PinnedPages, m.HugeTextBytes
		lim.MemoryBytes += int64(cfg.Slots) * int64(m.LearnedPages) * int64(os.Getpagesize())
		if err := z.sb.cg.Set(resources(lim)); err != nil {
			return nil, fmt.Errorf("zygote: room for its children's copies: %w", err)
		}
	case <-z.dead.Done():
		return nil, fmt.Errorf("zygote died while starting: %s", z.stderrAfterKill())
	case <-t.C:
		return nil, fmt.Errorf("zygote: not ready within %v: %s", zygoteStartTimeout, z.stderrAfterKill())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return z, nil
}

// zygoteOpenFiles is the zygote's RLIMIT_NOFILE: room for the descriptors
// of its children.
const zygoteOpenFiles = 8192

// zygoteRlimits are the zygote's own limits: no core dumps, and
// zygoteOpenFiles open files, or what the host allows. Its other limits
// are boxer's, inherited.
//
// Its hard open-files limit is also the most a warm job may have (see
// Engine.WarmFits): a child sets the job's limits just before the job's
// code runs, and cannot raise them. A job that asks for more runs cold.
func (e *Engine) zygoteRlimits() []nsinit.Rlimit { return e.host.clamp(wantedZygoteRlimits()) }

// wantedZygoteRlimits are the zygote's limits before the host's cut.
func wantedZygoteRlimits() []nsinit.Rlimit {
	return []nsinit.Rlimit{
		{Resource: unix.RLIMIT_NOFILE, Cur: zygoteOpenFiles, Max: zygoteOpenFiles},
		{Resource: unix.RLIMIT_CORE},
	}
}

// read dispatches the zygote's messages until its socket closes. Then the
// zygote is gone, and with it every child: each pending exit channel is
// closed, so that no run waits for a status that will never come.
func (z *Zygote) read() {
	defer func() {
		z.mu.Lock()
		for pid, ch := range z.exits {
			close(ch)
			delete(z.exits, pid)
		}
		z.mu.Unlock()
		z.markDead()
	}()
	buf := make([]byte, 1<<16)
	for {
		n, err := z.ctrl.Read(buf)
		if err != nil || n == 0 {
			return
		}
		m, err := warm.Decode(buf[:n])
		if err != nil {
			z.e.log.Error("zygote: bad message", "err", err)
			return
		}
		switch m.Op {
		case warm.OpForked:
			z.mu.Lock()
			z.exits[m.Pid] = make(chan uint32, 1)
			z.mu.Unlock()
			z.deliver(m)
		case warm.OpExited:
			z.mu.Lock()
			ch := z.exits[m.Pid]
			delete(z.exits, m.Pid)
			z.mu.Unlock()
			if ch != nil {
				ch <- m.Status
			}
		default:
			z.deliver(m)
		}
	}
}

// deliver hands m to whoever waits for a reply without ever blocking the
// reader, which must go on delivering exits. A reply still buffered when
// the next comes answers a request whose caller gave up waiting: it is
// dropped.
func (z *Zygote) deliver(m warm.Msg) {
	for {
		select {
		case z.replies <- m:
			return
		default:
			select {
			case <-z.replies:
			default:
			}
		}
	}
}

// fork asks the zygote for a child that gets sock as its job socket. It
// returns a channel that receives the child's wait status, or closes if
// the zygote dies. (The child's pid comes from the child itself, in the
// credentials of its first message: the zygote's numbers are its own PID
// namespace's.)
func (z *Zygote) fork(req warm.ForkRequest, sock int) (<-chan uint32, error) {
	z.forkMu.Lock()
	defer z.forkMu.Unlock()
	req.ID = z.forks.Add(1)
	if _, _, err := z.ctrl.WriteMsgUnix(req.Marshal(), unix.UnixRights(sock), nil); err != nil {
		return nil, fmt.Errorf("zygote: fork request: %w", err)
	}
	t := time.NewTimer(forkTimeout)
	defer t.Stop()
	for {
		select {
		case m := <-z.replies:
			// A reply to an earlier request that timed out is not
			// ours: its child was given up and exits on its own, or its
			// fork failed. (A malformed request's refusal carries no id.)
			if (m.Op == warm.OpForked || m.Op == warm.OpError && m.ID != 0) && m.ID != req.ID {
				continue
			}
			if m.Op != warm.OpForked {
				return nil, fmt.Errorf("zygote: got %q, want forked: %s", m.Op, m.Msg)
			}
			z.mu.Lock()
			ch := z.exits[m.Pid]
			z.mu.Unlock()
			return ch, nil
		case <-z.dead.Done():
			return nil, errors.New("zygote died")
		case <-t.C:
			return nil, fmt.Errorf("zygote: no fork within %v", forkTimeout)
		}
	}
}

// Dead is closed when the zygote has died; its warm children die with it.
func (z *Zygote) Dead() <-chan struct{} { return z.dead.Done() }

// Forks counts the children forked so far.
func (z *Zygote) Forks() int64 { return z.forks.Load() }

// Retire stops z from preparing children and closes it once every child
// it prepared has been destroyed, so that jobs running on them finish.
// A pool retires a zygote to replace it with a fresh one: each zygote's
// children share its hash seed, stack canary and address layout.
func (z *Zygote) Retire() {
	if z.retired.Swap(true) {
		return
	}
	go func() {
		z.live.Wait()
		z.Close()
	}()
}

// stderrAfterKill kills the zygote sandbox and returns what the zygote
// wrote to its stderr, for diagnosing a failed start.
func (z *Zygote) stderrAfterKill() string {
	z.sb.kill()
	if z.log == nil {
		return "(no output)"
	}
	out := z.log.wait()
	return strings.TrimSpace(string(out.Data))
}

// Close kills the zygote and every child it forked, and removes the
// zygote sandbox. It may be called more than once.
func (z *Zygote) Close() {
	z.closing.Do(func() {
		z.ctrl.Close()
		z.sb.destroy()
		z.freeMu.Lock()
		free := z.freeSlots
		z.freeSlots = nil
		z.freeMu.Unlock()
		for _, f := range free {
			if f.net != nil {
				f.net.close()
			}
			if f.cg == nil {
				continue
			}
			if err := f.cg.Destroy(); err != nil {
				z.e.log.Error("destroy warm slot cgroup", "cgroup", f.cg.Path(), "err", err)
			}
		}
		close(z.closed)
	})
}

// freeSlot is a free child slot, the cgroup its last child had, reset for
// the next, and that child's network namespace, which its job left
// untouched (see heldNet); either nil if it has none.
type freeSlot struct {
	slot int
	cg   cgroup.Cgroup
	net  *heldNet
}

// takeSlot waits for a free slot and takes the one freed last, with its
// cgroup if it kept one.
func (z *Zygote) takeSlot(ctx context.Context) (freeSlot, error) {
	select {
	case <-z.free:
	case <-z.dead.Done():
		return freeSlot{}, errors.New("zygote died")
	case <-ctx.Done():
		return freeSlot{}, ctx.Err()
	}
	z.freeMu.Lock()
	defer z.freeMu.Unlock()
	if len(z.freeSlots) == 0 {
		return freeSlot{}, errors.New("zygote closed")
	}
	f := z.freeSlots[len(z.freeSlots)-1]
	z.freeSlots = z.freeSlots[:len(z.freeSlots)-1]
	return f, nil
}

// releaseSlot frees slot for the next child, with cg, its last child's
// cgroup, when that could be Reset (else nil), and net, its network
// namespace, when untouched (else nil). Once z is closed, cg is destroyed
// and net closed instead.
func (z *Zygote) releaseSlot(slot int, cg cgroup.Cgroup, net *heldNet) {
	z.freeMu.Lock()
	closed := z.freeSlots == nil
	if !closed {
		z.freeSlots = append(z.freeSlots, freeSlot{slot, cg, net})
	}
	z.freeMu.Unlock()
	if closed {
		if net != nil {
			net.close()
		}
		if cg != nil {
			if err := cg.Destroy(); err != nil {
				z.e.log.Error("destroy warm slot cgroup", "cgroup", cg.Path(), "err", err)
			}
		}
		return
	}
	z.free <- struct{}{}
}

// Closed is closed once Close has removed the zygote sandbox.
func (z *Zygote) Closed() <-chan struct{} { return z.closed }
