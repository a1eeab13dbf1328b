package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"boxer"
)

// An answer of a megabyte and more takes answerFactor times its result's
// bytes from the budget, at most all of it; a second one waits until the
// first is released; small answers never wait.
func TestAnswerBudget(t *testing.T) {
	a := newAnswers(6 << 20)
	big := &boxer.Result{Artifacts: []boxer.Artifact{{Content: make([]byte, 1<<20)}}}
	huge := &boxer.Result{Stdout: boxer.Output{Data: make([]byte, 8<<20)}}
	small := &boxer.Result{Stdout: boxer.Output{Data: make([]byte, 200<<10)}}
	if got := []int64{a.cost(big), a.cost(huge), a.cost(small)}; got[0] != 4<<20 || got[1] != 6<<20 || got[2] != 0 {
		t.Fatalf("costs %v, want [4 MiB, the whole 6 MiB, 0]", got)
	}
	ctx := context.Background()
	first, err := a.take(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.take(short, big); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second 4 MiB answer in a 6 MiB budget: %v, want it to wait", err)
	}
	for range 100 {
		done, err := a.take(short, small)
		if err != nil {
			t.Fatalf("a small answer waited: %v", err)
		}
		done()
	}
	first()
	first() // a second release gives back nothing more
	second, err := a.take(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	if a.sem.TryAcquire(3 << 20) {
		t.Fatal("released twice: the budget has more than it should")
	}
	second()
}
