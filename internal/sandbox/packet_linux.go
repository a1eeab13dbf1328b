package sandbox

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A warm child costs boxer a socket and three pipes, made while it is
// prepared and closed once its job is done. The standard wrappers make
// each one dearer in system calls than the work it carries: net.FileConn
// dups a socket and asks it four questions, os.Pipe puts both ends of a
// pipe on the runtime's poller, and handing an end to the child through
// File.Fd takes it off again. Here boxer's end alone is on the poller and
// the child's end stays a plain, blocking descriptor, as the child needs.

// packetConn is boxer's end of a SOCK_SEQPACKET socket, a zygote's or a
// warm child's, on the runtime's poller: the part of *net.UnixConn they
// use.
type packetConn struct {
	f  *os.File
	rc syscall.RawConn
}

// newPacketConn takes fd, a blocking socket, and makes it non-blocking.
// It closes fd on failure.
func newPacketConn(fd int, name string) (*packetConn, error) {
	// F_SETFL ignores the access mode: O_NONBLOCK alone is the new set.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &packetConn{f: f, rc: rc}, nil
}

// ReadMsgUnix reads one packet and its control message, receiving any
// descriptors close-on-exec, as *net.UnixConn's does. n is 0 at the peer's
// close.
func (c *packetConn) ReadMsgUnix(b, oob []byte) (n, oobn, flags int, _ *net.UnixAddr, err error) {
	rerr := c.rc.Read(func(fd uintptr) bool {
		n, oobn, flags, _, err = unix.Recvmsg(int(fd), b, oob, unix.MSG_CMSG_CLOEXEC)
		return err != unix.EAGAIN
	})
	if rerr != nil {
		err = rerr
	}
	return n, oobn, flags, nil, err
}

// WriteMsgUnix sends b as one packet, with oob as its control message.
func (c *packetConn) WriteMsgUnix(b, oob []byte, _ *net.UnixAddr) (n, oobn int, err error) {
	werr := c.rc.Write(func(fd uintptr) bool {
		n, err = unix.SendmsgN(int(fd), b, oob, nil, 0)
		return err != unix.EAGAIN
	})
	if werr != nil {
		err = werr
	}
	if err != nil {
		return 0, 0, err
	}
	return n, len(oob), nil
}

// Read reads one packet; n is 0 at the peer's close.
func (c *packetConn) Read(b []byte) (int, error) {
	n, _, _, _, err := c.ReadMsgUnix(b, nil)
	return n, err
}

// Write sends b as one packet.
func (c *packetConn) Write(b []byte) (int, error) {
	n, _, err := c.WriteMsgUnix(b, nil, nil)
	return n, err
}

func (c *packetConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *packetConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }
func (c *packetConn) Close() error                       { return c.f.Close() }

// jobPipe makes a pipe between boxer and a child: boxer's end (the read
// end if boxerReads) is non-blocking, on the runtime's poller; the child's
// is a blocking descriptor for the caller to send and close.
func jobPipe(boxerReads bool) (mine *os.File, theirs int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, fmt.Errorf("pipe: %w", err)
	}
	m, t := p[0], p[1]
	if !boxerReads {
		m, t = p[1], p[0]
	}
	if _, err := unix.FcntlInt(uintptr(m), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(m)
		unix.Close(t)
		return nil, -1, fmt.Errorf("pipe: %w", err)
	}
	return os.NewFile(uintptr(m), "pipe"), t, nil
}

// closeFDs closes every descriptor of fds.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
