package main

import (
	"net"
	"sync"
)

// connLimit is a listener that holds at most n connections open at once:
// Accept waits while n are open, so a flood of idle or slow clients queues
// in the kernel's backlog instead of using up the server's descriptors,
// which sandboxes and the database need too.
type connLimit struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newConnLimit(l net.Listener, n int) *connLimit {
	return &connLimit{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *connLimit) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back once, on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
