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

// limiter bounds the runs in flight to a number of slots and the runs
// waiting for one to a queue. Waiting is bounded in length (queue), in time
// (maxWait) and by the request's context, so a client that goes away stops
// waiting. After drain, it refuses new runs, sends the waiting ones away and
// lets callers wait for the running ones to finish.
type limiter struct {
	slots   chan struct{} // a token per running run
	maxWait time.Duration
	stop    chan struct{} // closed by drain
	onQueue func()        // test hook: a run started waiting
	report  func(running, queued int)

	// inflight counts running runs, for drain to wait on.
	inflight sync.WaitGroup

	maxQueue int

	mu       sync.Mutex
	queued   int
	draining bool
}

func newLimiter(slots, queue int, maxWait time.Duration, report func(running, queued int)) *limiter {
	return &limiter{
		slots:    make(chan struct{}, slots),
		maxWait:  maxWait,
		stop:     make(chan struct{}),
		report:   report,
		maxQueue: queue,
	}
}

// acquire takes a run slot, waiting in the queue if there is room. On
// success the caller must call release exactly once when the run is over.
// It fails with errBusy, errDraining or the context's error.
func (l *limiter) acquire(ctx context.Context) (release func(), err error) {
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
	if l.queued >= l.maxQueue {
		l.mu.Unlock()
		return nil, errBusy
	}
	l.queued++
	l.mu.Unlock()
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

func (l *limiter) leaveQueue(err error) error {
	l.mu.Lock()
	l.queued--
	l.mu.Unlock()
	l.changed()
	return err
}

func (l *limiter) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
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
