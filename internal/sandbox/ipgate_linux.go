package sandbox

import (
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// ipGate is boxer's end of a warm child's seccomp listener. The child's
// filter (seccomp.NotifyIP) holds each IP socket the job asks for until the
// gate lets it go on; the gate notes that there was one, before letting it
// go on. A namespace whose job never had an IP socket can have nothing of
// the job's in it that /proc/net does not show (see heldNet).
//
// The calls arrive on the runtime's poller, one goroutine per gate, parked
// while the job makes none: most jobs make none, and a gate costs them a
// descriptor and that goroutine.
//
// Each answer costs boxer about what the call costs the job (a review,
// 2026-12-07: 16 to 22 us each on a slow VM), in boxer's process, outside
// the job's cgroup and its CPU limit: a job making sockets in a loop from
// a few threads took half of one of boxer's cores. So a gate answers a
// burst of gateBurst calls, then gateRate a second; a call waits for its
// turn in the job's own time (the gate sleeps, and costs nothing
// meanwhile). What agents run makes a handful of sockets, if any.
type ipGate struct {
	f    *os.File
	used atomic.Bool
	// budget is made at the first call, by the goroutine that answers.
	budget *rate.Limiter
}

const (
	gateBurst = 1000
	gateRate  = 1000 // a second
)

// seccompNotif and seccompNotifResp are struct seccomp_notif and struct
// seccomp_notif_resp (include/uapi/linux/seccomp.h), which x/sys/unix
// does not declare.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// watchIP starts answering the listener fd, which it owns from then on.
func watchIP(fd int) (*ipGate, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	g := &ipGate{f: os.NewFile(uintptr(fd), "seccomp-listener")}
	rc, err := g.f.SyscallConn()
	if err != nil {
		g.f.Close()
		return nil, err
	}
	// rc.Read calls drain at once and again each time the poller finds
	// the listener readable, until drain says there is nothing more to
	// come or the gate is to pause; it fails once close has closed the
	// file. The pause is outside rc.Read, which close would wait for.
	go func() {
		for {
			var done bool
			var pause time.Duration
			err := rc.Read(func(fd uintptr) bool {
				done, pause = g.drain(int(fd))
				return done || pause > 0
			})
			if err != nil || done {
				return
			}
			time.Sleep(pause)
		}
	}()
	return g, nil
}

// drain lets every call waiting on the listener go on, having noted them,
// until the budget says to pause. It reports done once the listener has
// nothing more to say: no process is left that could call.
func (g *ipGate) drain(fd int) (done bool, pause time.Duration) {
	for {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(p, 0); err != nil || n == 0 {
			return false, 0
		}
		if p[0].Revents&unix.POLLIN == 0 {
			if p[0].Revents&(unix.POLLHUP|unix.POLLNVAL) != 0 {
				return true, 0 // every process of the filter is gone
			}
			// POLLERR: a signal interrupted the kernel's wait for the
			// listener's lock (seccomp_notify_poll). Nothing is lost.
			continue
		}
		var req seccompNotif
		if e := notifIoctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&req)); e != 0 {
			if e == unix.ENOENT {
				continue // the caller died while it waited, having made nothing
			}
			// Never seen: the call will wait until the run ends, and
			// the namespace is not passed on.
			g.used.Store(true)
			return true, 0
		}
		// Noted before the call goes on: once the job's processes are
		// gone, used is true if a socket was made.
		g.used.Store(true)
		resp := seccompNotifResp{id: req.id, flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		_ = notifIoctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp)) // ENOENT: the caller died meanwhile
		if g.budget == nil {
			g.budget = rate.NewLimiter(gateRate, gateBurst)
		}
		if d := g.budget.Reserve().Delay(); d > 0 {
			return false, d
		}
	}
}

// notifIoctl makes one of the listener's ioctls, again while it fails with
// EINTR: RECV and SEND take the listener's lock interruptibly, and a SEND
// given up would leave its call waiting for good.
func notifIoctl(fd int, req uintptr, arg unsafe.Pointer) unix.Errno {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		if e != unix.EINTR {
			return e
		}
	}
}

// close stops the gate. A call that then asks fails with ENOSYS; call it
// once the job's processes are gone.
func (g *ipGate) close() { g.f.Close() }
