package sandbox

import (
	"os/exec"
	"runtime"
)

// spawner starts every sandbox's pid 1 from one OS thread that lives as
// long as the engine.
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
	for r := range s.reqs {
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
