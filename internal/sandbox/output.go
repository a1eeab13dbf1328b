package sandbox

import (
	"errors"
	"os"
	"sync"
	"time"

	"boxer"

	"golang.org/x/sys/unix"
)

// capture reads a stream to EOF, keeping the first limit bytes and counting
// the rest. It never stops reading: a program is never blocked on a full
// pipe, nor killed for talking.
type capture struct {
	r     *os.File
	limit int64
	out   boxer.Output
	done  chan struct{}
}

// readBufs holds the buffers captures read into: a warm job has two
// captures, and a fresh 64 KiB buffer each was most of what a job
// allocated (zeroed, and faulted in again once the scavenger returned it).
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// startCapture reads r; each piece kept is also given to each, if not
// nil, as it is read (see boxer.Job.Output).
func startCapture(r *os.File, limit int64, each func([]byte)) *capture {
	c := &capture{r: r, limit: limit, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer r.Close()
		bp := readBufs.Get().(*[]byte)
		defer readBufs.Put(bp)
		buf := *bp
		for {
			n, err := r.Read(buf)
			c.keep(buf[:n], each)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.drain(buf, each)
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// keep keeps what of b fits within the limit, and counts all of it.
func (c *capture) keep(b []byte, each func([]byte)) {
	if keep := min(int64(len(b)), c.limit-int64(len(c.out.Data))); keep > 0 {
		c.out.Data = append(c.out.Data, b[:keep]...)
		if each != nil {
			each(c.out.Data[len(c.out.Data)-int(keep):])
		}
	}
	c.out.Bytes += int64(len(b))
}

// maxDrain bounds what drain reads: a pipe holds 64 KiB unless its writer
// grew it, to at most 1 MiB unprivileged (fs.pipe-max-size).
const maxDrain = 1 << 20

// drain reads what the stream holds already, without waiting for more, once
// waitAtMost has cut the wait: the cut ends the wait for writers outside
// the run, never the reading of what the run wrote before it. (The reader
// may not have been scheduled since: a session's grace is 100 ms, and an
// emulated CPU, or a loaded host, can keep a goroutine waiting longer.) A
// writer that keeps writing is read up to maxDrain. Every captured stream
// is an os.Pipe, non-blocking for the runtime's poller, so a read never
// waits.
func (c *capture) drain(buf []byte, each func([]byte)) {
	if c.r.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc, err := c.r.SyscallConn()
	if err != nil {
		return
	}
	for read := 0; read < maxDrain; {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			for {
				n, rerr = unix.Read(int(fd), buf)
				if rerr != unix.EINTR {
					return true // done, data or not: never wait for readiness
				}
			}
		})
		if err != nil || rerr != nil || n <= 0 {
			return
		}
		c.keep(buf[:n], each)
		read += n
	}
}

// wait returns the captured output once the stream has hit EOF.
func (c *capture) wait() boxer.Output {
	<-c.done
	c.out.Truncated = c.out.Bytes > int64(len(c.out.Data))
	if c.out.Data == nil {
		c.out.Data = []byte{}
	}
	return c.out
}

// waitAtMost is wait for a stream whose writers are all dead, so that EOF
// is due at once. If it has not come within grace, something outside the
// run holds the stream open: reading stops there, and cut reports it.
func (c *capture) waitAtMost(grace time.Duration) (out boxer.Output, cut bool) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		cut = true
		_ = c.r.SetReadDeadline(time.Now())
	}
	return c.wait(), cut
}
