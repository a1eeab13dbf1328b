package transplant

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tracee is a process seized and stopped in a system call, whose thread
// boxer's tracing thread can make run system calls of its choosing. Every
// call on it must come from that one OS thread (ptrace's rule).
type tracee struct {
	pid int
	mem *os.File // /proc/PID/mem
	// saved are the registers at the stop; gadget the address of the
	// syscall instruction the process was stopped after, which injected
	// calls run.
	saved  unix.PtraceRegs
	gadget uint64
	// held are signals that arrived while traced: held back, and sent
	// again once the process is let go.
	held []unix.Signal
}

// Linux's restart codes, which a system call interrupted by a stop leaves
// in rax (include/linux/errno.h).
const (
	erestartsys          = 512
	erestartnointr       = 513
	erestartnohand       = 514
	erestartRestartblock = 516
)

// seize attaches to pid and stops it in a system call: where it was
// interrupted (a session kernel between cells waits in recvmsg), or, if
// it was running, at its next one, which is held back and made again when
// it is let go. The syscall instruction it stopped after is where
// injected calls run. A process that makes no system call before deadline
// is not waiting (errNotWaiting).
func seize(pid int, deadline time.Time) (_ *tracee, retErr error) {
	const opts = unix.PTRACE_O_EXITKILL | unix.PTRACE_O_TRACESYSGOOD
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, opts, 0, 0); e != 0 {
		return nil, fmt.Errorf("ptrace seize %d: %w", pid, e)
	}
	t := &tracee{pid: pid}
	defer func() {
		if retErr != nil {
			_ = t.release(nil)
		}
	}()
	if err := unix.PtraceInterrupt(pid); err != nil {
		return nil, fmt.Errorf("ptrace interrupt %d: %w", pid, err)
	}
	for {
		ws, err := t.wait()
		if err != nil {
			return nil, err
		}
		if int(ws)>>16 == unix.PTRACE_EVENT_STOP {
			break
		}
		if sig := ws.StopSignal(); sig != unix.SIGTRAP|0x80 {
			t.held = append(t.held, sig)
		}
		if err := unix.PtraceSyscall(pid, 0); err != nil {
			return nil, err
		}
	}
	var err error
	if t.mem, err = os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0); err != nil {
		return nil, err
	}
	if err := unix.PtraceGetRegs(pid, &t.saved); err != nil {
		return nil, fmt.Errorf("registers of %d: %w", pid, err)
	}
	if int64(t.saved.Orig_rax) < 0 {
		if err := t.toNextCall(deadline); err != nil {
			return nil, err
		}
	}
	insn := make([]byte, 2)
	if _, err := t.mem.ReadAt(insn, int64(t.saved.Rip-2)); err != nil || insn[0] != 0x0f || insn[1] != 0x05 {
		return nil, errNotWaiting
	}
	t.gadget = t.saved.Rip - 2
	return t, nil
}

// toNextCall runs the tracee, stopped outside a system call, to the entry
// of its next one, which it turns into getpid: saved then makes it again on release
// (restartRegs), as if the call had been interrupted before it began. If
// no call comes by deadline, a SIGCONT (held, and sent again) ends the
// wait.
func (t *tracee) toNextCall(deadline time.Time) error {
	nudge := time.AfterFunc(time.Until(deadline), func() { _ = unix.Kill(t.pid, unix.SIGCONT) })
	defer nudge.Stop()
	for {
		if err := unix.PtraceSyscall(t.pid, 0); err != nil {
			return err
		}
		ws, err := t.wait()
		if err != nil {
			return err
		}
		if sig := ws.StopSignal(); sig != unix.SIGTRAP|0x80 {
			if int(ws)>>16 == 0 {
				t.held = append(t.held, sig)
			}
			if time.Now().After(deadline) {
				return errNotWaiting
			}
			continue
		}
		if err := unix.PtraceGetRegs(t.pid, &t.saved); err != nil {
			return err
		}
		// Made getpid instead: a skipped call (number -1) is one the
		// sandbox's seccomp filter kills the process for.
		skip := t.saved
		skip.Orig_rax = unix.SYS_GETPID
		if err := unix.PtraceSetRegs(t.pid, &skip); err != nil {
			return err
		}
		if err := t.toSyscallStop(); err != nil {
			return err
		}
		t.saved.Rax = -erestartnointr & (1<<64 - 1)
		return nil
	}
}

var errNotWaiting = &RefusedError{"the session's interpreter is busy (caller code runs between cells)"}

// wait waits for the next stop, which it returns; an exit is an error.
func (t *tracee) wait() (unix.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(t.pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ws, fmt.Errorf("wait for %d: %w", t.pid, err)
		}
		if !ws.Stopped() {
			return ws, fmt.Errorf("process %d ended (status %#x)", t.pid, uint32(ws))
		}
		return ws, nil
	}
}

// toSyscallStop resumes the tracee until its next system call stop (entry
// or exit), holding back any signal that arrives on the way.
func (t *tracee) toSyscallStop() error {
	return t.resumeUntil(unix.SIGTRAP|0x80, func() error { return unix.PtraceSyscall(t.pid, 0) }, "syscall")
}

// resumeUntil resumes the tracee with resume (ptrace's request named how)
// until it stops with want, holding back any other signal that arrives
// on the way; an event stop (a group stop) has nothing to hold.
func (t *tracee) resumeUntil(want unix.Signal, resume func() error, how string) error {
	for {
		if err := resume(); err != nil {
			return fmt.Errorf("ptrace %s %d: %w", how, t.pid, err)
		}
		ws, err := t.wait()
		if err != nil {
			return err
		}
		switch sig := ws.StopSignal(); {
		case sig == want:
			return nil
		case int(ws)>>16 != 0:
		default:
			t.held = append(t.held, sig)
		}
	}
}

// call makes the tracee run system call nr with args and returns its
// result. The tracee runs nothing else: its registers are set to the
// call at the gadget, and it is single-stepped over that one instruction
// (one stop a call, where stopping at the call's entry and exit would be
// two), then checked to have made nr there.
func (t *tracee) call(nr uintptr, args ...uintptr) (uintptr, error) {
	r := t.saved
	r.Rip, r.Rax, r.Orig_rax = t.gadget, uint64(nr), ^uint64(0)
	var a [6]uint64
	for i, v := range args {
		a[i] = uint64(v)
	}
	r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9 = a[0], a[1], a[2], a[3], a[4], a[5]
	if err := unix.PtraceSetRegs(t.pid, &r); err != nil {
		return 0, fmt.Errorf("set registers of %d: %w", t.pid, err)
	}
	if err := t.stepOver(); err != nil {
		return 0, err
	}
	var got unix.PtraceRegs
	if err := unix.PtraceGetRegs(t.pid, &got); err != nil {
		return 0, err
	}
	if got.Orig_rax != uint64(nr) || got.Rip != t.gadget+2 {
		return 0, fmt.Errorf("process %d made system call %d at %#x, not %d", t.pid, int64(got.Orig_rax), got.Rip, nr)
	}
	if ret := int64(got.Rax); ret < 0 && ret > -4096 {
		return 0, syscall.Errno(-ret)
	}
	return uintptr(got.Rax), nil
}

// stepOver resumes the tracee for one instruction, the system call at
// the gadget, holding back any other signal that arrives meanwhile.
func (t *tracee) stepOver() error {
	return t.resumeUntil(unix.SIGTRAP, func() error { return unix.PtraceSingleStep(t.pid) }, "singlestep")
}

// restartRegs are registers r, taken at a stop in a system call, set to
// make that call again when the process resumes, as the kernel does for
// a call interrupted without a handler to run. Injected calls have left
// the tracee at another call's exit, where the kernel restarts nothing.
func restartRegs(r unix.PtraceRegs) (unix.PtraceRegs, error) {
	if int64(r.Orig_rax) < 0 {
		return r, nil
	}
	switch -int64(r.Rax) {
	case erestartsys, erestartnointr, erestartnohand:
		r.Rax, r.Rip = r.Orig_rax, r.Rip-2
	case erestartRestartblock:
		return r, errors.New("the interpreter is in a timed sleep")
	}
	r.Orig_rax = ^uint64(0)
	return r, nil
}

// release sets the tracee's registers to regs (if not nil), lets it go,
// and sends it again the signals held back.
func (t *tracee) release(regs *unix.PtraceRegs) error {
	var err error
	if regs != nil {
		err = unix.PtraceSetRegs(t.pid, regs)
	}
	if derr := unix.PtraceDetach(t.pid); derr != nil && err == nil {
		err = fmt.Errorf("ptrace detach %d: %w", t.pid, derr)
	}
	for _, s := range t.held {
		_ = unix.Kill(t.pid, s)
	}
	t.close()
	return err
}

func (t *tracee) close() {
	if t.mem != nil {
		t.mem.Close()
	}
}

// xstate reads or writes the tracee's extended register state (x87, SSE,
// AVX...): NT_X86_XSTATE, as XSAVE lays it out.
func (t *tracee) getXstate() ([]byte, error) {
	buf := make([]byte, 64<<10)
	iov := unix.Iovec{Base: &buf[0], Len: uint64(len(buf))}
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(t.pid), unix.NT_X86_XSTATE, uintptr(unsafe.Pointer(&iov)), 0, 0); e != 0 {
		return nil, fmt.Errorf("extended registers of %d: %w", t.pid, e)
	}
	return buf[:iov.Len], nil
}

func (t *tracee) setXstate(b []byte) error {
	iov := unix.Iovec{Base: &b[0], Len: uint64(len(b))}
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SETREGSET, uintptr(t.pid), unix.NT_X86_XSTATE, uintptr(unsafe.Pointer(&iov)), 0, 0); e != 0 {
		return fmt.Errorf("set extended registers of %d: %w", t.pid, e)
	}
	return nil
}
