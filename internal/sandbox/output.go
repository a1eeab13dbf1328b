package sandbox

import (
	"os"
	"time"

	"boxer"
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

// startCapture reads r; each piece kept is also given to each, if not
// nil, as it is read (see boxer.Job.Output).
func startCapture(r *os.File, limit int64, each func([]byte)) *capture {
	c := &capture{r: r, limit: limit, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer r.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			if keep := min(int64(n), c.limit-int64(len(c.out.Data))); keep > 0 {
				c.out.Data = append(c.out.Data, buf[:keep]...)
				if each != nil {
					each(c.out.Data[len(c.out.Data)-int(keep):])
				}
			}
			c.out.Bytes += int64(n)
			if err != nil {
				return
			}
		}
	}()
	return c
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
