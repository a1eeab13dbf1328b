package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// spawner starts every sandbox's pid 1 from one OS thread that lives as
// long as the engine.
//
// The thread has no supplementary groups, so that no pid 1 inherits
// boxer's: a sandbox's user namespace can then deny setgroups(2) from the
// start (/proc/PID/setgroups "deny", as unprivileged container runtimes
// do), and no process in it can ever set a group again. Credentials belong
// to a thread, so boxer's other threads keep theirs.
//
// Pdeathsig fires when the thread that forked the child exits, not the
// process: a pid 1 started from an ordinary goroutine dies whenever the Go
// runtime retires that thread (which it does when a goroutine exits while
// locked to it). Starting from a locked thread that never exits makes the
// signal mean what boxer needs: boxer itself is gone.
type spawner struct {
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	runtime.LockOSThread()
	// Never unlocked: when loop returns (the engine closes), the thread
	// exits and every sandbox still running gets its Pdeathsig.
	//
	// The raw call, not syscall.Setgroups, which changes every thread.
	var err error
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
		err = fmt.Errorf("drop supplementary groups: %w", errno)
	}
	for r := range s.reqs {
		if err != nil {
			r.done <- err
			continue
		}
		r.done <- r.cmd.Start()
	}
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.reqs <- spawnReq{cmd, done}
	return <-done
}

func (s *spawner) close() { close(s.reqs) }
