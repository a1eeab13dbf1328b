package cgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// systemd reports whether systemd is this host's init, the one to ask for a
// scope.
func (f fsys) systemd() bool {
	if f.h.startScope != nil {
		return !f.h.noSystemd
	}
	return isDir("/run/systemd/system") // sd_booted(3)'s test
}

// scopeTimeout bounds the whole exchange with systemd: it answers in
// milliseconds unless it is wedged, and boxer should then say so rather
// than hang at start.
const scopeTimeout = 10 * time.Second

// startScope asks systemd for the transient scope unit, with boxer's own
// process in it and its cgroup delegated (Delegate=yes: systemd leaves the
// subtree to boxer), and waits until systemd has moved boxer there. The
// scope lives as long as it holds a process; systemd removes it after boxer
// and its runs have gone.
func (f fsys) startScope(unit string) error {
	if f.h.startScope != nil {
		return f.h.startScope(unit, f.h.pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scopeTimeout)
	defer cancel()
	// systemd's private socket needs no dbus-daemon; the system bus is the
	// way in where the socket is not reachable (another mount namespace).
	conn, err := sdbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		var busErr error
		if conn, busErr = sdbus.NewSystemConnectionContext(ctx); busErr != nil {
			return fmt.Errorf("cgroup: connect to systemd: %w", errors.Join(err, busErr))
		}
	}
	defer conn.Close()
	props := []sdbus.Property{
		sdbus.PropDescription("boxer sandboxes"),
		sdbus.PropSlice("system.slice"),
		sdbus.PropPids(uint32(f.h.pid)),
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
	}
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, unit, "fail", props, done); err != nil {
		return fmt.Errorf("cgroup: systemd: start %s: %w", unit, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("cgroup: systemd: start %s: job %s", unit, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cgroup: systemd: start %s: no answer in %v", unit, scopeTimeout)
	}
}
