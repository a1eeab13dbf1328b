package boxer

import "context"

// Runner runs one job to completion in a fresh sandbox. The sandbox engine
// and the warm pool implement it; the HTTP API consumes it.
//
// Run returns a Result for every outcome of the program, including timeout
// and OOM. It returns an error only when boxer itself failed (a setup step,
// the host, the context being cancelled before the program ran).
type Runner interface {
	Run(ctx context.Context, job *Job) (*Result, error)
}
