// Package served starts the boxer binary as a user would, for the
// benchmarks: built from this checkout, serving on a free loopback port
// with its own state and data dirs, on its default flags unless a
// benchmark names one. It also holds the few figures they share.
package served

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"boxer/internal/observe"
	"boxer/internal/sandbox"
)

// Build builds cmd/boxer into dir and returns the binary's path; with
// BOXER_BENCH_BIN set, it returns that binary instead (a machine without
// a Go toolchain, such as test/guest's).
func Build(dir string) (string, error) {
	if bin := os.Getenv("BOXER_BENCH_BIN"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(dir, "boxer")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/boxer").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Server is a running `boxer serve`.
type Server struct {
	Cmd    *exec.Cmd
	URL    string
	Client *http.Client
	state  string // its state dir, removed when it stops
}

// Start starts bin serve with its data under dir/name, on the defaults a
// user gets plus extra, and waits until it serves.
func Start(bin, dir, name string, extra ...string) (*Server, error) {
	state := filepath.Join("/run", "boxer-bench-"+name+"-"+strconv.Itoa(os.Getpid()))
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, name),
		"--state-dir", state}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	url, err := observe.Serving(stderr, nil)
	if err != nil {
		cmd.Wait()
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	return &Server{Cmd: cmd, URL: url, Client: &http.Client{Transport: tr}, state: state}, nil
}

// Stop interrupts the server, waits for it and removes its state dir,
// with what it left mounted if it was killed.
func (s *Server) Stop() {
	if s.Cmd.ProcessState == nil { // not yet waited for (killed)
		s.Cmd.Process.Signal(os.Interrupt)
		s.Cmd.Wait()
	}
	if err := sandbox.RemoveStateDir(s.state); err != nil {
		fmt.Fprintln(os.Stderr, "remove the state dir:", err)
	}
}

// Post sends body as JSON to path and returns the decoded answer and the
// round trip. An answer other than 2xx is an error.
func (s *Server) Post(path string, body any, answer any) (time.Duration, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	t := time.Now()
	resp, err := s.Client.Post(s.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, out)
	}
	if answer != nil {
		if err := json.Unmarshal(out, answer); err != nil {
			return 0, fmt.Errorf("POST %s: %v in %s", path, err, out)
		}
	}
	return d, nil
}

// Pct is the p-th percentile of d.
func Pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// Ms formats d in milliseconds, right-aligned.
func Ms(d time.Duration) string { return fmt.Sprintf("%7.1fms", float64(d)/1e6) }

// Delete sends DELETE to path; an answer other than 2xx is an error.
func (s *Server) Delete(path string) error {
	req, err := http.NewRequest(http.MethodDelete, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("DELETE %s: %d %s", path, resp.StatusCode, out)
	}
	return nil
}
