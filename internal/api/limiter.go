package api

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Reasons acquire refuses a run.
var (
	errBusy     = errors.New("every run slot and the wait queue are full")
	errDraining = errors.New("the server is shutting down")
)

// limiter bounds the runs in flight to a number of slots and admits runs to
// wait for one by their expected wait: the runs ahead of it, divided among
// the slots, times how long a run has held its slot lately (a moving
// average). A queue of a hundred print(2+2)s is a wait of a fraction of a
// second and is admitted; a queue of ten 30-second runs is not. Two hard
// bounds keep memory bounded whatever the runs cost: how many may wait
// (queue) and the bytes their jobs hold (queueBytes). Waiting is bounded
// in time too (maxWait), and by the request's context, so a client that
// goes away stops waiting. After drain, it refuses new runs, sends the
// waiting ones away and lets callers wait for the running ones to finish.
type limiter struct {
	slots   chan struct{} // a token per running run
	maxWait time.Duration
	stop    chan struct{} // closed by drain
	onQueue func()        // test hook: a run started waiting
	report  func(running, queued int)

	// inflight counts running runs, for drain to wait on.
	inflight sync.WaitGroup

	maxQueue      int
	maxQueueBytes int64
	maxExpected   time.Duration // 0: no bound but the queue's

	mu          sync.Mutex
	queued      int
	queuedBytes int64
	held        time.Duration // moving average of a run's time in its slot; 0 until one ends
	draining    bool
}

// limits shape a limiter.
type limits struct {
	slots, queue int
	queueBytes   int64
	maxWait      time.Duration // the longest a run waits
	maxExpected  time.Duration // the longest expected wait a run is admitted to
}

func newLimiter(c limits, report func(running, queued int)) *limiter {
	return &limiter{
		slots:         make(chan struct{}, c.slots),
		maxWait:       c.maxWait,
		stop:          make(chan struct{}),
		report:        report,
		maxQueue:      c.queue,
		maxQueueBytes: c.queueBytes,
		maxExpected:   c.maxExpected,
	}
}

// expectedLocked is how long a run that joins the queue now should wait.
// l.mu is held.
func (l *limiter) expectedLocked() time.Duration {
	return time.Duration(l.queued+1) * l.held / time.Duration(cap(l.slots))
}

// expected is expectedLocked for callers that do not hold l.mu.
func (l *limiter) expected() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expectedLocked()
}

// acquire takes a run slot for a job of size bytes, waiting in the queue
// if it is admitted there. On success the caller must call release exactly
// once when the run is over. It fails with errBusy, errDraining or the
// context's error.
func (l *limiter) acquire(ctx context.Context, size int64) (release func(), err error) {
	l.mu.Lock()
	if l.draining {
		l.mu.Unlock()
		return nil, errDraining
	}
	// Fast path: a free slot, taken under mu so that drain's Wait cannot
	// start between the check of draining and the Add.
	select {
	case l.slots <- struct{}{}:
		l.inflight.Add(1)
		l.mu.Unlock()
		l.changed()
		return l.releaser(), nil
	default:
	}
	if l.queueFullLocked(size) {
		l.mu.Unlock()
		return nil, errBusy
	}
	l.queued++
	l.queuedBytes += size
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.queuedBytes -= size
		l.mu.Unlock()
	}()
	l.changed()
	if l.onQueue != nil {
		l.onQueue()
	}

	timer := time.NewTimer(l.maxWait)
	defer timer.Stop()
	for {
		select {
		case l.slots <- struct{}{}:
			l.mu.Lock()
			l.queued--
			if l.draining { // drain began while we waited: give the slot back
				l.mu.Unlock()
				<-l.slots
				l.changed()
				return nil, errDraining
			}
			l.inflight.Add(1)
			l.mu.Unlock()
			l.changed()
			return l.releaser(), nil
		case <-ctx.Done():
			return nil, l.leaveQueue(ctx.Err())
		case <-timer.C:
			return nil, l.leaveQueue(errBusy)
		case <-l.stop:
			return nil, l.leaveQueue(errDraining)
		}
	}
}

// queueFullLocked reports whether a run of size bytes that finds no free
// slot is refused rather than queued. Caller holds mu.
func (l *limiter) queueFullLocked(size int64) bool {
	return l.queued >= l.maxQueue || l.queuedBytes+size > l.maxQueueBytes && l.queued > 0 ||
		l.maxExpected > 0 && l.expectedLocked() > l.maxExpected
}

// refuses reports whether acquire would refuse a run of size bytes now
// (busy), for a caller that must answer before it waits: an async run.
func (l *limiter) refuses(size int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots) == cap(l.slots) && l.queueFullLocked(size)
}

func (l *limiter) leaveQueue(err error) error {
	l.mu.Lock()
	l.queued--
	l.mu.Unlock()
	l.changed()
	return err
}

func (l *limiter) releaser() func() {
	var once sync.Once
	start := time.Now()
	return func() {
		once.Do(func() {
			d := time.Since(start)
			l.mu.Lock()
			if l.held == 0 {
				l.held = d
			} else {
				l.held += (d - l.held) / 8
			}
			l.mu.Unlock()
			<-l.slots
			l.inflight.Done()
			l.changed()
		})
	}
}

// counts reports runs executing and waiting.
func (l *limiter) counts() (running, queued int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots), l.queued
}

func (l *limiter) changed() {
	if l.report != nil {
		l.report(l.counts())
	}
}

// drain refuses new runs and sends the waiting ones away with errDraining.
// Runs in flight go on; wait for them with idle.
func (l *limiter) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.draining {
		l.draining = true
		close(l.stop)
	}
}

// isDraining reports whether drain has been called.
func (l *limiter) isDraining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// idle returns a channel closed when no run is in flight. Call after drain,
// when no new run can start.
func (l *limiter) idle() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		l.inflight.Wait()
		close(done)
	}()
	return done
}
