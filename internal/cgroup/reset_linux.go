package cgroup

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// A warm pool runs one job after another in the cgroup of each of its
// slots instead of making and removing one per job: on a v1 host that is
// five directories made and removed, about 1.3 ms of the machine's CPU
// (bench/floor), and a third of boxer's own system calls per job. Reset is
// what makes a used cgroup as good as a new one for the next job:
//
//   - no task of the last job is left (Kill);
//   - the memory the last job left charged is given back: pages of host
//     files it read first, kernel objects such as negative dentries. A new
//     cgroup starts at zero, and a reused one must too, or the next job
//     would run with less memory and report a peak it never reached. What
//     the kernel cannot reclaim, and the per-CPU charge stock (up to 64
//     pages a CPU, which belongs to no job), stays; over resetSlack, the
//     cgroup is not reused;
//   - the figures Stats reports start again: the memory peak (v1's
//     max_usage_in_bytes is reset; v2's memory.peak is reset for the
//     descriptor Stats reads it through, Linux 6.12 on), the OOM kills and
//     the CPU time (counted from the values at the reset).
//
// Its limits are not reset: Set writes them in full before the next job.

// resetSlack is the most memory a reset cgroup may hold still charged: the
// charge stock of a few CPUs, never a job's data. A cgroup holding more is
// not reused.
const resetSlack = 1 << 20

// ErrNotReusable is Reset's error where the kernel cannot make a used
// cgroup as good as a new one (cgroup v2 before Linux 6.12, whose
// memory.peak cannot be reset; memory.reclaim needs 5.19). Destroy the
// cgroup and Create another.
var ErrNotReusable = errors.New("cgroup: this kernel cannot reset a cgroup's memory peak (Linux 6.12 on cgroup v2)")

func (c *v1Cgroup) Reset() error {
	if err := c.Kill(); err != nil {
		return err
	}
	// force_empty reclaims every page charged to an empty memory cgroup.
	// It drains every CPU's charge stock first, a cost worth paying only
	// when something is charged.
	usage := c.file("memory", "memory.usage_in_bytes")
	if n, err := c.held.readInt(usage); err != nil {
		return err
	} else if n > resetSlack {
		if err := c.fs.write(c.file("memory", "memory.force_empty"), "0"); err != nil {
			return err
		}
		if err := notCharged(c.held, usage); err != nil {
			return err
		}
	}
	// A write resets the peak to the current use.
	if err := c.held.write(c.file("memory", "memory.max_usage_in_bytes"), "0"); err != nil {
		return err
	}
	return restartCounters(&c.base, c.Stats)
}

func (c *v2Cgroup) Reset() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return errors.New("cgroup: reset of a destroyed cgroup")
	}
	if c.noReset.Load() {
		return ErrNotReusable
	}
	if err := killV2(c.fs, c.dir); err != nil {
		return err
	}
	if c.peak < 0 {
		fd, err := retryEINTR(func() (int, error) {
			return unix.Open(c.file("memory.peak"), unix.O_RDWR|unix.O_CLOEXEC, 0)
		})
		if err != nil || !exists(c.file("memory.reclaim")) {
			if err == nil {
				unix.Close(fd)
			}
			c.noReset.Store(true)
			return ErrNotReusable
		}
		c.peak = fd
	}
	current := c.file("memory.current")
	if n, err := c.held.readInt(current); err != nil {
		return err
	} else if n > resetSlack {
		// EAGAIN when less than asked could be reclaimed: what is left is
		// measured next.
		if err := c.fs.write(c.file("memory.reclaim"), strconv.FormatInt(n, 10)); err != nil && !errors.Is(err, unix.EAGAIN) {
			return err
		}
		if err := notCharged(c.held, current); err != nil {
			return err
		}
	}
	// memory.peak takes writes from Linux 6.12; before that the write
	// fails with EINVAL (the file opens for writing all the same).
	if _, err := retryEINTR(func() (int, error) { return unix.Pwrite(c.peak, []byte("reset"), 0) }); err != nil {
		unix.Close(c.peak)
		c.peak = -1
		if errors.Is(err, unix.EINVAL) {
			c.noReset.Store(true)
			return ErrNotReusable
		}
		return newFileError("write", c.file("memory.peak"), err)
	}
	return restartCounters(&c.base, c.stats)
}

// restartCounters makes base, which stats subtracts, what the counters
// hold now, so that stats counts from here.
func restartCounters(base *Stats, stats func() (Stats, error)) error {
	*base = Stats{}
	st, err := stats()
	if err != nil {
		return err
	}
	*base = Stats{OOMKills: st.OOMKills, CPU: st.CPU}
	return nil
}

// notCharged checks that the memory use in file is at most resetSlack.
func notCharged(h *held, file string) error {
	n, err := h.readInt(file)
	if err != nil {
		return err
	}
	if n > resetSlack {
		return fmt.Errorf("cgroup: %d bytes stay charged after reclaim (%s)", n, file)
	}
	return nil
}

// readPeak reads memory.peak through fd, the descriptor its reset was
// written through.
func readPeak(fd int, file string) (int64, error) {
	buf := make([]byte, 32)
	n, err := retryEINTR(func() (int, error) { return unix.Pread(fd, buf, 0) })
	if err != nil {
		return 0, newFileError("read", file, err)
	}
	return parseInt(file, string(buf[:n]))
}
