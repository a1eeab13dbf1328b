package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"boxer"
	"boxer/internal/sandbox"
	"boxer/internal/sandbox/warm"
)

// Config shapes the pool. The zero value is a disabled pool.
type Config struct {
	// Min is how many warm children each zygote keeps ready when idle; 0
	// disables the pool.
	Min int
	// Max bounds each zygote's children that exist at once (ready or
	// running).
	Max int
	// PreImports are imported once in the zygote and shared by every job.
	PreImports []string
	// Lean adds a second zygote without the pre-imports, for the jobs
	// whose code names none of them (see names). Its children cost less
	// CPU to make and to end; with no pre-imports it changes nothing.
	Lean bool
	// OwnLanes are pre-imports that each get a lane of their own when Lean
	// is on: a zygote holding the lean pre-imports and that module, which
	// learns the pages the module's first use writes (sandbox.ZygoteConfig's
	// Learn), so that each of its children copies them while it is being
	// prepared instead of one fault at a time in its job. Each must be one
	// of warm.Samples; one that is not among PreImports gets no lane. A job
	// goes there when it names that module and no pre-import the lane's
	// zygote does not hold (see laneFor).
	OwnLanes []string
	// LeanPreImports are imported by every zygote, the lean one too:
	// modules cheap to hold that much of the code jobs run imports. They
	// do not route a job (see doc.go).
	LeanPreImports []string
	// ZygoteMemoryBytes caps the zygote's own cgroup.
	ZygoteMemoryBytes int64
	// KeepNetns keeps a warm slot's network namespace for its next job
	// when the last made no IP socket and left it untouched
	// (sandbox.ZygoteConfig.KeepNet). boxer serve turns it on.
	KeepNetns bool
	// RotateAfter replaces the zygote after it has forked this many
	// children (0: never). Every child of one zygote shares its hash
	// seed, stack canary and address layout; a fresh zygote draws new
	// ones. The old zygote stays until its last job is done.
	RotateAfter int64
}

// AllPreImports are the modules of the zygote with the pre-imports: the
// lean ones, then the others.
func (c Config) AllPreImports() []string {
	all := slices.Clone(c.LeanPreImports)
	for _, m := range c.PreImports {
		if !slices.Contains(all, m) {
			all = append(all, m)
		}
	}
	return all
}

// Validate reports a configuration the pool cannot run with.
func (c Config) Validate() error {
	if c.Min < 0 || c.Max < 0 || (c.Min > 0 && c.Max < c.Min) {
		return errors.New("pool: want 0 <= min <= max")
	}
	for _, m := range c.OwnLanes {
		if !slices.Contains(warm.Samples, m) {
			return fmt.Errorf("pool: a lane of its own for %q: want one of %v", m, warm.Samples)
		}
	}
	return nil
}

// Pool runs jobs on warm children when it can and cold sandboxes
// otherwise. It implements boxer.Runner and is safe for concurrent use.
type Pool struct {
	eng *sandbox.Engine
	cfg Config
	log *slog.Logger

	// lanes[0] has the pre-imports; lanes[1], if Lean, has none; the
	// others are OwnLanes'.
	lanes []*lane
	// topNames are the pre-imports' top-level package names: a job that
	// names one goes to lanes[0] or an own lane (see laneFor).
	topNames []string

	// missingMu guards missing: the pre-imports found not installed, each
	// warned of once (a rotated zygote finds them missing again).
	missingMu sync.Mutex
	missing   map[string]bool

	stop     chan struct{}
	closed   sync.WaitGroup
	spent    sync.WaitGroup // children being destroyed after their job
	retiring sync.WaitGroup // rotated-out zygotes not yet closed
}

// Unit is what the pool hands out: a sandbox prepared before its job
// exists, which runs exactly one job (as a cold sandbox would run it, see
// internal/sandbox's TestWarmSemanticsMatchCold) and is then destroyed. A
// warm child of a zygote (*sandbox.Warm) is one.
type Unit interface {
	Run(ctx context.Context, job *boxer.Job) (*boxer.Result, error)
	Destroy()
}

var _ Unit = (*sandbox.Warm)(nil)

// lane is one zygote with its ready children and their refiller.
type lane struct {
	p          *Pool
	name       string
	preImports []string
	own        string // an own lane's module, whose first use its zygote learns; "" for the others
	// holds are the pre-imports' top-level names its zygote holds, once
	// started (an own lane's module may bring another: matplotlib brings
	// numpy); nil for lanes[0] and lanes[1], which laneFor does not ask.
	holds  []string
	ready  chan Unit     // prepared children, at most Max
	wake   chan struct{} // nudges the refiller
	served atomic.Int64  // jobs run on its children

	mu       sync.Mutex
	zyg      *sandbox.Zygote // nil while (re)starting
	inflight int             // warm jobs running now
}

var _ boxer.Runner = (*Pool)(nil)

// New starts the pool's zygotes and fills them to Min. With Min 0 it
// returns a pool that runs every job cold.
func New(ctx context.Context, eng *sandbox.Engine, cfg Config, log *slog.Logger) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{eng: eng, cfg: cfg, log: log, stop: make(chan struct{})}
	if cfg.Min == 0 {
		return p, nil
	}
	p.lanes = []*lane{p.newLane("preimports", cfg.AllPreImports(), "")}
	if cfg.Lean && len(cfg.PreImports) > 0 {
		p.lanes = append(p.lanes, p.newLane("lean", cfg.LeanPreImports, ""))
		for _, m := range cfg.PreImports {
			if top := topName(m); top != "" && !slices.Contains(p.topNames, top) {
				p.topNames = append(p.topNames, top)
			}
		}
		for _, m := range cfg.OwnLanes {
			if slices.Contains(cfg.PreImports, m) {
				p.lanes = append(p.lanes, p.newLane(m, append(slices.Clone(cfg.LeanPreImports), m), m))
			}
		}
	}
	// The zygotes start side by side: each takes from a fraction of a
	// second to a few seconds, mostly importing and learning on one CPU.
	errs := make([]error, len(p.lanes))
	var started sync.WaitGroup
	for i, l := range p.lanes {
		started.Go(func() { l.zyg, errs[i] = l.startZygote(ctx) })
	}
	started.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, l := range p.lanes {
			if l.zyg != nil {
				l.zyg.Close()
			}
		}
		return nil, err
	}
	// An own lane whose module is not installed would be a second lean
	// lane: no job goes there (see laneFor), and its zygote and children
	// hold memory for nothing.
	p.lanes = slices.DeleteFunc(p.lanes, func(l *lane) bool {
		if l.own == "" || !slices.Contains(l.zyg.Missing, l.own) {
			return false
		}
		p.log.Info("warm pool: no own lane for a module that is not installed", "module", l.own)
		l.zyg.Close()
		return true
	})
	for _, l := range p.lanes[min(2, len(p.lanes)):] {
		for _, m := range l.zyg.Preimported {
			if top := topName(m); slices.Contains(p.topNames, top) && !slices.Contains(l.holds, top) {
				l.holds = append(l.holds, top)
			}
		}
	}
	for _, l := range p.lanes {
		p.closed.Add(1)
		go l.refill()
	}
	return p, nil
}

func (p *Pool) newLane(name string, preImports []string, own string) *lane {
	return &lane{p: p, name: name, preImports: preImports, own: own,
		ready: make(chan Unit, p.cfg.Max), wake: make(chan struct{}, 1)}
}

func (l *lane) startZygote(ctx context.Context) (*sandbox.Zygote, error) {
	t := time.Now()
	var learn []string
	if l.own != "" {
		learn = []string{l.own}
	}
	z, err := l.p.eng.StartZygote(ctx, sandbox.ZygoteConfig{
		PreImports:  l.preImports,
		Learn:       learn,
		Slots:       l.p.cfg.Max,
		MemoryBytes: l.p.cfg.ZygoteMemoryBytes,
		KeepNet:     l.p.cfg.KeepNetns,
	})
	if err == nil {
		l.p.warnMissing(z.Missing)
		l.p.log.Info("warm pool zygote ready", "lane", l.name, "preimports", l.preImports,
			"modules_loaded", len(z.Preimported), "learned_pages", z.LearnedPages, "pinned_pages", z.PinnedPages, "huge_text_bytes", z.HugeText, "took", time.Since(t).Round(time.Millisecond))
		for _, why := range z.Unlearned {
			l.p.log.Warn("warm pool zygote could not learn a module's first use: its jobs run, at more CPU each", "lane", l.name, "err", why)
		}
		switch {
		case z.LearnedPages == 0:
			l.p.log.Warn("warm pool zygote learned no pages: every child takes its copy-on-write faults one by one, at more CPU per job "+
				"(its sample child could not read its own pagemap: see _learn in zygote.py)", "lane", l.name)
		// An own lane learns more than the kernel's default RLIMIT_MEMLOCK
		// (8 MiB) lets a zygote pin, and pin pins all or nothing: its
		// children copy the pages while they are prepared. Pinning the
		// first 8 MiB made pytest jobs no cheaper (machine CPU per job at
		// concurrency 4, 2026-12-07), so that is expected, not warned of.
		case z.PinnedPages < z.LearnedPages && l.own == "":
			l.p.log.Warn("warm pool zygote pinned fewer pages than it learned: each child copies the rest after its fork, at more CPU per job "+
				"(io_uring disabled or missing, RLIMIT_MEMLOCK too low, or huge pages in the way: see pin in zygote_speed.py)",
				"lane", l.name, "learned_pages", z.LearnedPages, "pinned_pages", z.PinnedPages)
		}
	}
	return z, err
}

// Enabled reports whether jobs may run warm.
func (p *Pool) Enabled() bool { return p.cfg.Min > 0 }

// Ready is how many warm sandboxes wait for a job now, by lane:
// "preimports", and if the pool keeps them "lean" and each own lane, named
// by its module.
func (p *Pool) Ready() map[string]int {
	out := make(map[string]int, len(p.lanes))
	for _, l := range p.lanes {
		out[l.name] = len(l.ready)
	}
	return out
}

// Run runs job warm if its command and limits allow, cold otherwise.
func (p *Pool) Run(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
	warm, err := p.eng.Warmable(job)
	if err != nil {
		return nil, err
	}
	if !p.Enabled() || !warm {
		return p.eng.Run(ctx, job)
	}
	l := p.laneFor(job)
	t0 := time.Now()
	w, err := l.take(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.log.Warn("no warm sandbox, running cold", "lane", l.name, "err", err)
		return p.eng.Run(ctx, job)
	}
	defer l.done()
	l.served.Add(1)
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
	res, err := w.Run(ctx, job)
	if err != nil {
		return nil, err
	}
	res.Timing.Acquire = acquired
	res.Timing.Run = res.Wall
	res.Timing.Collect = time.Since(t0) - acquired - res.Wall
	return res, nil
}

// laneFor picks the lean lane for a job whose code names none of the
// pre-imports; an own lane for a job that names its module and nothing its
// zygote does not hold; and the pre-imports' lane otherwise. The code is
// read for nothing else, and only to save time: isolation and semantics
// are the same on every lane but for sys.modules, which holds the modules
// of the pre-imports the lane's zygote holds (as the pool's configuration
// declares), and at least those the job names. A job that reaches a
// pre-import without naming it (through __import__ of a built string, or
// a data file it runs) may run on a lane without it and pay for the
// import.
func (p *Pool) laneFor(job *boxer.Job) *lane {
	if len(p.lanes) == 1 {
		return p.lanes[0]
	}
	var seen []string
	form, _ := p.eng.WarmForm(job.Argv)
	if form.Kind != "file" {
		seen = named([]byte(form.Target), p.topNames, seen)
	}
	for _, f := range job.Files {
		if strings.HasSuffix(f.Path, ".py") {
			seen = named(f.Content, p.topNames, seen)
		}
	}
	if len(seen) == 0 {
		return p.lanes[1]
	}
	for _, l := range p.lanes[2:] {
		if slices.Contains(seen, topName(l.own)) && !slices.ContainsFunc(seen, func(top string) bool {
			return !slices.Contains(l.holds, top)
		}) {
			return l
		}
	}
	return p.lanes[0]
}

func topName(module string) string {
	top, _, _ := strings.Cut(module, ".")
	return top
}

// names reports whether code contains any of words as a whole
// identifier: "numpy" in "import numpy as np" or "numpy.random", not in
// "numpyro" or "my_numpy".
func names(code []byte, words []string) bool {
	return len(named(code, words, nil)) > 0
}

// named returns seen with each of words that code names (see names) and
// seen does not hold yet appended.
func named(code []byte, words, seen []string) []string {
	for _, w := range words {
		if w == "" || slices.Contains(seen, w) {
			continue
		}
		word := []byte(w)
		for at := 0; ; {
			i := bytes.Index(code[at:], word)
			if i < 0 {
				break
			}
			start, end := at+i, at+i+len(w)
			if (start == 0 || !identByte(code[start-1])) && (end == len(code) || !identByte(code[end])) {
				seen = append(seen, w)
				break
			}
			at = end
		}
	}
	return seen
}

func identByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// take returns a ready child, or prepares one now if none is ready.
func (l *lane) take(ctx context.Context) (Unit, error) {
	l.mu.Lock()
	l.inflight++
	z := l.zyg
	l.mu.Unlock()
	// The refiller is nudged when the job is done, not now: preparing a
	// child (a fork and a namespace set-up) would compete with this job
	// for the CPU, and hold up the zygote while the job's exit is due.
	select {
	case w := <-l.ready:
		return w, nil
	default:
	}
	if z == nil {
		l.done()
		return nil, errors.New("zygote restarting")
	}
	w, err := z.Prepare(ctx)
	if err != nil {
		l.done()
		return nil, err // not w: a nil *sandbox.Warm is no nil Unit
	}
	return w, nil
}

func (l *lane) done() {
	l.mu.Lock()
	l.inflight--
	l.mu.Unlock()
	l.nudge()
}

func (l *lane) nudge() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// target is how many children should be ready: Min plus the jobs in
// flight, so that a burst finds the next child prepared, within Max. More
// jobs than Max can be in flight (the ones beyond wait in Prepare for a
// slot), and then none should be: never fewer than none, or the refiller
// would spin trying to shrink an empty queue.
func (l *lane) target() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, min(l.p.cfg.Min+l.inflight, l.p.cfg.Max-l.inflight))
}

// refill keeps the ready queue at target, and replaces a dead zygote.
func (l *lane) refill() {
	p := l.p
	defer p.closed.Done()
	backoff := 100 * time.Millisecond
	for {
		l.mu.Lock()
		z := l.zyg
		l.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-z.Dead():
			l.replaceZygote(&backoff)
			continue
		default:
		}
		if p.cfg.RotateAfter > 0 && z.Forks() >= p.cfg.RotateAfter {
			l.rotate(z)
			continue
		}
		// Shrink back to the target after a burst: each ready child holds
		// a process, a cgroup and descriptors for nothing.
		for len(l.ready) > l.target() {
			select {
			case w := <-l.ready:
				w.Destroy()
			default:
			}
		}
		if len(l.ready) >= l.target() {
			select {
			case <-p.stop:
				return
			case <-z.Dead():
			case <-l.wake:
			}
			continue
		}
		w, err := z.Prepare(context.Background())
		if err != nil {
			p.log.Warn("prepare warm sandbox", "lane", l.name, "err", err)
			select {
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			continue
		}
		l.ready <- w
	}
}

// rotate starts a fresh zygote and retires old, which closes once its
// running jobs are done. If the fresh one cannot start, old serves on and
// rotation is tried again later.
func (l *lane) rotate(old *sandbox.Zygote) {
	p := l.p
	z, err := l.startZygote(context.Background())
	if err != nil {
		p.log.Error("rotate zygote: start a fresh one", "lane", l.name, "err", err)
		select {
		case <-p.stop:
		case <-time.After(10 * time.Second):
		}
		return
	}
	l.mu.Lock()
	l.zyg = z
	l.mu.Unlock()
	l.drain() // unused children of the old zygote
	old.Retire()
	p.retiring.Add(1)
	go func() {
		defer p.retiring.Done()
		<-old.Closed()
	}()
	p.log.Info("zygote rotated", "lane", l.name, "after_forks", old.Forks())
}

// replaceZygote discards the children of a dead zygote and starts another.
func (l *lane) replaceZygote(backoff *time.Duration) {
	p := l.p
	l.mu.Lock()
	old := l.zyg
	l.zyg = nil
	l.mu.Unlock()
	p.log.Error("zygote died; replacing it", "lane", l.name)
	l.drain()
	old.Close()
	for {
		z, err := l.startZygote(context.Background())
		if err == nil {
			l.mu.Lock()
			l.zyg = z
			l.mu.Unlock()
			*backoff = 100 * time.Millisecond
			return
		}
		p.log.Error("start zygote", "lane", l.name, "err", err)
		select {
		case <-p.stop:
			l.mu.Lock()
			l.zyg = old // keep a closed zygote so refill sees it dead and stops
			l.mu.Unlock()
			return
		case <-time.After(*backoff):
		}
		*backoff = min(2**backoff, 10*time.Second)
	}
}

func (l *lane) drain() {
	for {
		select {
		case w := <-l.ready:
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
	for _, l := range p.lanes {
		l.drain()
	}
	p.spent.Wait()
	p.retiring.Wait()
	for _, l := range p.lanes {
		l.mu.Lock()
		if l.zyg != nil {
			l.zyg.Close()
		}
		l.mu.Unlock()
	}
}

// warnMissing warns once of each pre-import a zygote could not import: it
// serves without it, and a job that imports it fails as it would under a
// bare python3.
func (p *Pool) warnMissing(mods []string) {
	p.missingMu.Lock()
	defer p.missingMu.Unlock()
	for _, m := range mods {
		if p.missing[m] {
			continue
		}
		if p.missing == nil {
			p.missing = map[string]bool{}
		}
		p.missing[m] = true
		pkg := DebianPackage(m)
		p.log.Warn("a pre-import is not installed: serving without it (--pool-preimport)", "module", m,
			"debian_package", pkg, "fix", "apt-get install "+pkg+", then restart boxer")
	}
}

// DebianPackage is the Debian package that provides Python module mod:
// python3- and its top-level name, lower case, as Debian names them (and
// names the pre-imports boxer defaults to), but for the modules whose
// package is named otherwise.
func DebianPackage(mod string) string {
	top, _, _ := strings.Cut(mod, ".")
	top = strings.ToLower(top)
	if pkg, ok := map[string]string{
		"sklearn":  "python3-sklearn",
		"yaml":     "python3-yaml",
		"pil":      "python3-pil",
		"bs4":      "python3-bs4",
		"dateutil": "python3-dateutil",
		"cv2":      "python3-opencv",
	}[top]; ok {
		return pkg
	}
	return "python3-" + top
}
