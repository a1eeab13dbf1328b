package sandbox

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"boxer"

	"golang.org/x/sys/unix"
)

// When the process that runs the engine dies, its sandboxes die too: pid 1
// carries Pdeathsig, and its death takes the PID namespace with it.
func TestSandboxesDieWithSupervisor(t *testing.T) {
	e := newTestEngine(t, nil) // only for its skip checks and a clean state dir
	sup := exec.Command(os.Args[0], "-test.run=^TestSupervisorHelper$")
	sup.Env = append(os.Environ(), "BOXER_TEST_SUPERVISOR="+e.cfg.StateDir+"-sup")
	stdout, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	defer sup.Process.Kill()
	// The helper prints a line once its sandbox's program runs.
	buf := make([]byte, 64)
	if n, err := stdout.Read(buf); err != nil || n == 0 {
		t.Fatalf("supervisor never reported a running sandbox: %v", err)
	}
	sandboxPids := processesInIDRange(&Engine{cfg: supervisorConfig("")})
	if len(sandboxPids) == 0 {
		t.Fatal("no sandbox process found while the supervisor runs")
	}
	var pidfds []int
	for _, pid := range sandboxPids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			pidfds = append(pidfds, fd)
		}
	}
	if err := sup.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = sup.Wait()
	// A pidfd turns readable when its process exits: wait on each.
	for _, fd := range pidfds {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 10_000)
		unix.Close(fd)
		if err != nil || n != 1 {
			t.Fatalf("a sandbox process outlived its supervisor by 10s (poll %d, %v)", n, err)
		}
	}
	// What the dead supervisor left (its cgroup, its work dir mount) is
	// removed by the next engine that starts on the same state dir.
	next, err := New(context.Background(), supervisorConfig(e.cfg.StateDir+"-sup"))
	if err != nil {
		t.Fatal(err)
	}
	assertNoTraces(t, next)
	next.Close()
	os.RemoveAll(e.cfg.StateDir + "-sup")
	removeCgroupBases("boxer-test-sup")
}

func supervisorConfig(dir string) Config {
	return Config{StateDir: dir, CgroupName: "boxer-test-sup", IDBase: supervisorIDBase, MaxSandboxes: 4}
}

const supervisorIDBase = 1_900_000_000 // above every derived id block

// TestSupervisorHelper is the supervisor that TestSandboxesDieWithSupervisor
// kills: it runs one sandbox whose program sleeps.
func TestSupervisorHelper(t *testing.T) {
	dir := os.Getenv("BOXER_TEST_SUPERVISOR")
	if dir == "" {
		t.Skip("helper process for TestSandboxesDieWithSupervisor")
	}
	e, err := New(context.Background(), supervisorConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// Report once the program has started: it creates a file first.
		for {
			if m, _ := globWork(e, "running"); len(m) > 0 {
				os.Stdout.WriteString("running\n")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, _ = e.Run(context.Background(), &boxer.Job{
		Argv:   []string{"python", "-c", "import os, time\nopen('running','w').close()\nif os.fork() == 0: os.setsid()\ntime.sleep(300)"},
		Limits: boxer.Limits{WallTime: 5 * time.Minute},
	})
}
