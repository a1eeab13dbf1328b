package api

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"boxer"
)

// A run's answer is in memory from the moment the engine hands back its
// result (stdout, stderr, every artifact's bytes) until the last byte of
// its response is written: as raw bytes, as the strings of the response
// and as the encoded body, a few times the result's size. Run slots bound
// how many results exist at once, but a result outlives its slot while it
// is encoded and sent, to a client as slow as it likes. The answer budget
// bounds the bytes of those: a result takes its share before its run slot
// is given back, and holds it until its response is out. A result that
// finds the budget spent waits, slot held, which holds off new runs until
// answers drain: under a flood of large answers the server slows down
// instead of growing without bound.
type answers struct {
	sem   *semaphore.Weighted
	total int64
}

// answerFree is the size below which an answer takes nothing: the
// everyday answer, a few KiB, never waits.
const answerFree = 1 << 20

// answerFactor is how many times its result's bytes an answer holds at its
// peak: the raw bytes, the response's strings (base64 is 4/3 of the raw)
// and the encoded body.
const answerFactor = 4

func newAnswers(total int64) *answers {
	return &answers{sem: semaphore.NewWeighted(total), total: total}
}

// cost is what res's answer holds at its peak, at most the whole budget:
// a result larger than it is answered alone.
func (a *answers) cost(res *boxer.Result) int64 {
	n := int64(len(res.Stdout.Data) + len(res.Stderr.Data))
	for _, art := range res.Artifacts {
		n += int64(len(art.Content))
	}
	if n*answerFactor < answerFree {
		return 0
	}
	return min(n*answerFactor, a.total)
}

// take waits for res's share of the budget and returns its release, which
// may be called more than once.
func (a *answers) take(ctx context.Context, res *boxer.Result) (func(), error) {
	n := a.cost(res)
	if n == 0 {
		return func() {}, nil
	}
	if err := a.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { a.sem.Release(n) }), nil
}
