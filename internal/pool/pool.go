package pool

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"boxer"
	"boxer/internal/sandbox"
)

// Config shapes the pool. The zero value is a disabled pool.
type Config struct {
	// Min is how many warm children are kept ready when idle; 0 disables
	// the pool.
	Min int
	// Max bounds the children that exist at once (ready or running).
	Max int
	// PreImports are imported once in the zygote and shared by every job.
	PreImports []string
	// ZygoteMemoryBytes caps the zygote's own cgroup.
	ZygoteMemoryBytes int64
	// RotateAfter replaces the zygote after it has forked this many
	// children (0: never). Every child of one zygote shares its hash
	// seed, stack canary and address layout; a fresh zygote draws new
	// ones. The old zygote stays until its last job is done.
	RotateAfter int64
}

// Validate reports a configuration the pool cannot run with.
func (c Config) Validate() error {
	if c.Min < 0 || c.Max < 0 || (c.Min > 0 && c.Max < c.Min) {
		return errors.New("pool: want 0 <= min <= max")
	}
	return nil
}

// Pool runs jobs on warm children when it can and cold sandboxes
// otherwise. It implements boxer.Runner and is safe for concurrent use.
type Pool struct {
	eng *sandbox.Engine
	cfg Config
	log *slog.Logger

	ready    chan *sandbox.Warm // prepared children, at most Max
	wake     chan struct{}      // nudges the refiller
	stop     chan struct{}
	closed   sync.WaitGroup
	spent    sync.WaitGroup // children being destroyed after their job
	retiring sync.WaitGroup // rotated-out zygotes not yet closed

	mu       sync.Mutex
	zyg      *sandbox.Zygote // nil while (re)starting
	inflight int             // warm jobs running now
}

var _ boxer.Runner = (*Pool)(nil)

// New starts the pool's zygote and fills it to Min. With Min 0 it returns
// a pool that runs every job cold.
func New(ctx context.Context, eng *sandbox.Engine, cfg Config, log *slog.Logger) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{eng: eng, cfg: cfg, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if cfg.Min == 0 {
		return p, nil
	}
	p.ready = make(chan *sandbox.Warm, cfg.Max)
	z, err := p.startZygote(ctx)
	if err != nil {
		return nil, err
	}
	p.zyg = z
	p.closed.Add(1)
	go p.refill()
	return p, nil
}

func (p *Pool) startZygote(ctx context.Context) (*sandbox.Zygote, error) {
	t := time.Now()
	z, err := p.eng.StartZygote(ctx, sandbox.ZygoteConfig{
		PreImports:  p.cfg.PreImports,
		Slots:       p.cfg.Max,
		MemoryBytes: p.cfg.ZygoteMemoryBytes,
	})
	if err == nil {
		p.log.Info("warm pool zygote ready", "preimports", p.cfg.PreImports,
			"modules_loaded", len(z.Preimported), "learned_pages", z.LearnedPages, "took", time.Since(t).Round(time.Millisecond))
	}
	return z, err
}

// Enabled reports whether jobs may run warm.
func (p *Pool) Enabled() bool { return p.cfg.Min > 0 }

// Run runs job warm if its command and limits allow, cold otherwise.
func (p *Pool) Run(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
	form, ok := p.eng.WarmForm(job.Argv)
	lim := job.Limits.WithDefaults(p.eng.Limits())
	if !p.Enabled() || !ok || lim.DiskBytes != p.eng.Limits().DiskBytes || (job.Runtime != "" && job.Runtime != p.eng.Runtime().Name) {
		return p.eng.Run(ctx, job)
	}
	if err := sandbox.ValidateLimits(lim); err != nil {
		return nil, boxer.Errorf(boxer.ECodeInvalidRequest, "%v", err)
	}
	t0 := time.Now()
	w, err := p.take(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.log.Warn("no warm sandbox, running cold", "err", err)
		return p.eng.Run(ctx, job)
	}
	defer p.done()
	// A spent child is destroyed after the result is returned: its
	// processes are already dead (Run waits for that); what is left is
	// its cgroup directory, its work dir and its namespaces, whose
	// teardown need not delay the answer.
	defer func() {
		p.spent.Add(1)
		go func() {
			defer p.spent.Done()
			w.Destroy()
		}()
	}()
	acquired := time.Since(t0)
	res, err := w.Run(ctx, job, lim, form)
	if err != nil {
		return nil, err
	}
	res.Timing.Acquire = acquired
	res.Timing.Run = res.Wall
	res.Timing.Collect = time.Since(t0) - acquired - res.Wall
	return res, nil
}

// take returns a ready child, or prepares one now if none is ready.
func (p *Pool) take(ctx context.Context) (*sandbox.Warm, error) {
	p.mu.Lock()
	p.inflight++
	z := p.zyg
	p.mu.Unlock()
	// The refiller is nudged when the job is done, not now: preparing a
	// child (a fork and a namespace set-up) would compete with this job
	// for the CPU, and hold up the zygote while the job's exit is due.
	select {
	case w := <-p.ready:
		return w, nil
	default:
	}
	if z == nil {
		p.done()
		return nil, errors.New("zygote restarting")
	}
	w, err := z.Prepare(ctx)
	if err != nil {
		p.done()
	}
	return w, err
}

func (p *Pool) done() {
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
	p.nudge()
}

func (p *Pool) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// target is how many children should be ready: Min plus the jobs in
// flight, so that a burst finds the next child prepared, within Max.
func (p *Pool) target() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return min(p.cfg.Min+p.inflight, p.cfg.Max-p.inflight)
}

// refill keeps the ready queue at target, and replaces a dead zygote.
func (p *Pool) refill() {
	defer p.closed.Done()
	backoff := 100 * time.Millisecond
	for {
		p.mu.Lock()
		z := p.zyg
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-z.Dead():
			p.replaceZygote(&backoff)
			continue
		default:
		}
		if p.cfg.RotateAfter > 0 && z.Forks() >= p.cfg.RotateAfter {
			p.rotate(z)
			continue
		}
		// Shrink back to the target after a burst: each ready child holds
		// a process, a cgroup and descriptors for nothing.
		for len(p.ready) > p.target() {
			select {
			case w := <-p.ready:
				w.Destroy()
			default:
			}
		}
		if len(p.ready) >= p.target() {
			select {
			case <-p.stop:
				return
			case <-z.Dead():
			case <-p.wake:
			}
			continue
		}
		w, err := z.Prepare(context.Background())
		if err != nil {
			p.log.Warn("prepare warm sandbox", "err", err)
			select {
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			continue
		}
		p.ready <- w
	}
}

// rotate starts a fresh zygote and retires old, which closes once its
// running jobs are done. If the fresh one cannot start, old serves on and
// rotation is tried again later.
func (p *Pool) rotate(old *sandbox.Zygote) {
	z, err := p.startZygote(context.Background())
	if err != nil {
		p.log.Error("rotate zygote: start a fresh one", "err", err)
		select {
		case <-p.stop:
		case <-time.After(10 * time.Second):
		}
		return
	}
	p.mu.Lock()
	p.zyg = z
	p.mu.Unlock()
	p.drain() // unused children of the old zygote
	old.Retire()
	p.retiring.Add(1)
	go func() {
		defer p.retiring.Done()
		<-old.Closed()
	}()
	p.log.Info("zygote rotated", "after_forks", old.Forks())
}

// replaceZygote discards the children of a dead zygote and starts another.
func (p *Pool) replaceZygote(backoff *time.Duration) {
	p.mu.Lock()
	old := p.zyg
	p.zyg = nil
	p.mu.Unlock()
	p.log.Error("zygote died; replacing it")
	p.drain()
	old.Close()
	for {
		z, err := p.startZygote(context.Background())
		if err == nil {
			p.mu.Lock()
			p.zyg = z
			p.mu.Unlock()
			*backoff = 100 * time.Millisecond
			return
		}
		p.log.Error("start zygote", "err", err)
		select {
		case <-p.stop:
			p.mu.Lock()
			p.zyg = old // keep a closed zygote so refill sees it dead and stops
			p.mu.Unlock()
			return
		case <-time.After(*backoff):
		}
		*backoff = min(2**backoff, 10*time.Second)
	}
}

func (p *Pool) drain() {
	for {
		select {
		case w := <-p.ready:
			w.Destroy()
		default:
			return
		}
	}
}

// Settle waits until every spent child has been destroyed.
func (p *Pool) Settle() { p.spent.Wait() }

// Close stops refilling, destroys the ready children and the zygote. Jobs
// still running on warm children are killed with the zygote.
func (p *Pool) Close() {
	if !p.Enabled() {
		return
	}
	close(p.stop)
	p.closed.Wait()
	p.drain()
	p.spent.Wait()
	p.retiring.Wait()
	p.mu.Lock()
	if p.zyg != nil {
		p.zyg.Close()
	}
	p.mu.Unlock()
}
