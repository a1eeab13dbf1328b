//go:build amd64 || arm64

package seccomp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// probeRun is what one re-executed probe did.
type probeRun struct {
	outcome string // the line it printed, or "signal=NAME" when killed
	stdout  string
	stderr  string
	code    int
}

// runProbe re-execs the test binary as the probe name, with the filter
// installed unless filtered is false, and extra arguments and environment.
// It fails the test when the child neither prints an outcome nor dies by a
// signal.
func runProbe(t *testing.T, name string, filtered bool, args, env []string) probeRun {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(append(os.Environ(), probeEnv+"="+name), env...)
	if !filtered {
		cmd.Env = append(cmd.Env, noFilterEnv+"=1")
	}
	// No controlling terminal, so that vhangup and TIOCSTI, were they let
	// through, would have no terminal to act on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()

	r := probeRun{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			r.outcome = "signal=" + unix.SignalName(ws.Signal())
			return r
		}
		r.code = ws.ExitStatus()
	default:
		t.Fatalf("probe %q: %v", name, err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	r.outcome = lines[len(lines)-1]
	return r
}

// TestInstalledPolicy installs the default filter in a child process per
// probe and checks what the kernel does with each refused family, the
// argument checks (with the high-bit bypass attempts), the foreign-ABI kills
// and a set of calls that must keep working.
//
// Each refusal is also tried without the filter, as root: if the kernel gave
// the same answer on its own, the case would prove nothing.
func TestInstalledPolicy(t *testing.T) {
	for _, p := range probes() {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var control probeRun
			if p.want != ok {
				control = runProbe(t, p.name, false, nil, nil)
				if control.code != 0 {
					t.Fatalf("unfiltered control exited %d; stderr:\n%s", control.code, control.stderr)
				}
				if control.outcome == unavailable {
					t.Skip("the call faults even without a filter, so seccomp never sees it " +
						"(int 0x80 on a kernel without IA32 emulation, as in PVM guests); " +
						"TestDefaultKillsForeignABIs checks the rule in the VM")
				}
			}
			r := runProbe(t, p.name, true, nil, nil)
			if r.code != 0 {
				t.Fatalf("probe exited %d; stderr:\n%s", r.code, r.stderr)
			}
			if r.outcome != p.want {
				t.Fatalf("got %s, want %s; stderr:\n%s", r.outcome, p.want, r.stderr)
			}
			switch {
			case p.want == ok:
			case control.outcome != p.want:
				t.Logf("without the filter: %s", control.outcome)
			case p.want == wantENOSYS || p.want == wantEAFNOSP:
				// The syscall or socket family is compiled out of this
				// kernel; the filter's answer is right but indistinct here.
				t.Logf("without the filter: %s as well (not built into this kernel)", control.outcome)
			default:
				t.Errorf("without the filter the kernel also gives %s: the case does not test the filter", control.outcome)
			}
		})
	}
}

// TestProbesCoverRefusals keeps TestInstalledPolicy complete: every syscall
// the default policy refuses outright has a probe expecting EPERM.
func TestProbesCoverRefusals(t *testing.T) {
	probed := map[int]bool{}
	for _, p := range probes() {
		if p.want == wantEPERM && p.nr >= 0 {
			probed[p.nr] = true
		}
	}
	for _, r := range Default().Rules {
		if len(r.Checks) == 0 && r.Action == Errno(unix.EPERM) && !probed[int(r.Nr)] {
			t.Errorf("syscall %d is refused with EPERM but has no probe", r.Nr)
		}
	}
}

func TestInstallRejectsEmptyFilter(t *testing.T) {
	tests := []struct {
		name string
		f    Filter
	}{
		{"empty", nil},
		{"too long", make(Filter, unix.BPF_MAXINSNS+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Install fails before any system call, so this is safe in
			// the test process itself.
			if err := Install(tt.f); err == nil {
				t.Fatal("Install succeeded, want an error")
			}
		})
	}
}
