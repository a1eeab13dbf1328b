package transplant

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Copy makes the user-space state of dst, a process waiting in a system
// call, a copy of src's (see the package doc); src is stopped meanwhile
// and let go unchanged. keepFd is the descriptor of dst's that stays its
// own (a session kernel's socket to boxer). Both processes must be
// children of one zygote, and each run one thread. check, called with src
// stopped, refuses a source for the caller's reasons. If the copy takes
// longer than timeout, dst is killed.
//
// On an error dst is in no state to run and must be destroyed.
func Copy(src, dst, keepFd int, check func() error, timeout time.Duration) (retErr error) {
	runtime.LockOSThread() // ptrace's requests must come from the thread that attached
	defer runtime.UnlockOSThread()
	watchdog := time.AfterFunc(timeout, func() { _ = unix.Kill(dst, unix.SIGKILL) })
	defer watchdog.Stop()

	s, err := seize(src, time.Now().Add(seizeWait))
	if err != nil {
		return fmt.Errorf("stop the session: %w", err)
	}
	sregs, rerr := restartRegs(s.saved)
	defer func() {
		if rerr != nil {
			_ = s.release(nil) // stopped at the seize: the kernel restarts its call
		} else if err := s.release(&sregs); err != nil && retErr == nil {
			retErr = err
		}
	}()
	if rerr != nil {
		return &RefusedError{rerr.Error()}
	}
	if err := onlyThread(src); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	st, err := inspect(s)
	if err != nil {
		return err
	}

	// A failed copy kills the fork (so does the watchdog), and waits for
	// its death while attached: a tracee that dies stays a zombie of its
	// tracer until the tracer waits for it, and its own parent, the
	// fork's sandbox, would wait for it forever.
	var d *tracee
	released := false
	defer func() {
		if retErr != nil {
			_ = unix.Kill(dst, unix.SIGKILL)
			if d != nil && !released {
				_ = d.release(nil)
			}
			reapTracee(dst)
		}
	}()
	if d, err = seize(dst, time.Now().Add(seizeWait)); err != nil {
		return fmt.Errorf("stop the fork: %w", err)
	}
	if err := onlyThread(dst); err != nil {
		return err
	}
	if err := build(d, st, keepFd); err != nil {
		return err
	}
	if err := d.setXstate(st.xstate); err != nil {
		return err
	}
	regs := sregs
	released = true
	return d.release(&regs)
}

// reapTracee waits, for up to five seconds, for pid, killed, to be
// reported dead to this process as its tracer; a process it no longer
// traces (it detached) is not its to wait for, and returns at once.
func reapTracee(pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil, got == pid && (ws.Exited() || ws.Signaled()):
			return
		case time.Now().After(deadline):
			return
		}
		time.Sleep(time.Millisecond) // polling: a killed process ends within moments
	}
}

// state is what is carried from the source.
type state struct {
	pid        int
	regs       unix.PtraceRegs
	xstate     []byte
	maps       []vma
	startBrk   uint64
	brk        uint64
	sigactions [nsig + 1][]byte // rt_sigaction's struct, by signal; nil: the default action
	sigmask    []byte
	altstack   []byte
	itimers    [3][]byte
	umask      uintptr
	cwd        string
	comm       string
	fds        []fdState
	rlimits    map[int]unix.Rlimit
}

const nsig = 64

// atFdcwd is AT_FDCWD as a system call argument.
const atFdcwd = ^uintptr(99)

// ssDisable is sigaltstack's SS_DISABLE.
const ssDisable = 2

type fdState struct {
	fd      int
	path    string // "" for none (a pipe, a socket)
	flags   int
	pos     int64
	regular bool
}

// seizeWait is how long a process found running is waited for to make a
// system call, where it can be stopped.
const seizeWait = 2 * time.Second

// scratchSize is the memory set aside in a tracee for the arguments and
// results of injected calls.
const scratchSize = 64 << 10

func onlyThread(pid int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	if len(tasks) != 1 {
		return &RefusedError{fmt.Sprintf("the session runs %d threads; a fork takes a session with one (join or stop the others first)", len(tasks))}
	}
	return nil
}

// inspect reads src's state, running read-only calls in it.
func inspect(s *tracee) (*state, error) {
	st := &state{pid: s.pid, regs: s.saved, rlimits: map[int]unix.Rlimit{}}
	var err error
	if st.maps, err = readMaps(s.pid); err != nil {
		return nil, err
	}
	for _, v := range st.maps {
		if v.shared() && (v.anonymous() || v.path == "/dev/zero (deleted)" || strings.HasPrefix(v.path, "/SYSV") ||
			strings.HasPrefix(v.path, "/memfd:") || strings.HasPrefix(v.path, "[anon_shmem:")) {
			return nil, &RefusedError{"the session maps shared memory (mmap MAP_SHARED|MAP_ANONYMOUS, SysV or memfd), which a copy could not share"}
		}
	}
	if st.startBrk, err = startBrk(s.pid); err != nil {
		return nil, err
	}
	if st.xstate, err = s.getXstate(); err != nil {
		return nil, err
	}
	ps, err := readStatus(s.pid)
	if err != nil {
		return nil, err
	}
	st.umask = ps.umask
	b, err := s.call(unix.SYS_BRK, 0)
	if err != nil {
		return nil, fmt.Errorf("brk: %w", err)
	}
	st.brk = uint64(b)
	scratch, err := s.call(unix.SYS_MMAP, 0, scratchSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
	if err != nil {
		return nil, fmt.Errorf("scratch memory: %w", err)
	}
	read := func(n int) ([]byte, error) {
		buf := make([]byte, n)
		_, err := s.mem.ReadAt(buf, int64(scratch))
		return buf, err
	}
	err = func() error {
		for sig := 1; sig <= nsig; sig++ {
			if ps.handled&sigBit(sig) == 0 {
				continue
			}
			if _, err := s.call(unix.SYS_RT_SIGACTION, uintptr(sig), 0, scratch, 8); err != nil {
				if err == unix.EINVAL {
					continue
				}
				return fmt.Errorf("rt_sigaction %d: %w", sig, err)
			}
			if st.sigactions[sig], err = read(32); err != nil {
				return err
			}
		}
		if _, err := s.call(unix.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, 0, scratch, 8); err != nil {
			return fmt.Errorf("rt_sigprocmask: %w", err)
		}
		if st.sigmask, err = read(8); err != nil {
			return err
		}
		if _, err := s.call(unix.SYS_SIGALTSTACK, 0, scratch); err != nil {
			return fmt.Errorf("sigaltstack: %w", err)
		}
		if st.altstack, err = read(24); err != nil {
			return err
		}
		for which := range st.itimers {
			if _, err := s.call(unix.SYS_GETITIMER, uintptr(which), scratch); err != nil {
				return fmt.Errorf("getitimer: %w", err)
			}
			if st.itimers[which], err = read(32); err != nil {
				return err
			}
		}
		return nil
	}()
	if _, uerr := s.call(unix.SYS_MUNMAP, scratch, scratchSize); err == nil && uerr != nil {
		err = fmt.Errorf("free scratch memory: %w", uerr)
	}
	if err != nil {
		return nil, err
	}
	if err := readProc(st); err != nil {
		return nil, err
	}
	return st, nil
}

// procStatus is what a fork needs of /proc/PID/status: the umask, and
// the signals whose action is not the default (SigIgn, SigCgt) with
// SIGCHLD, whose flags matter even at the default action (SA_NOCLDWAIT).
// The other signals are at the default action, whose flags and mask do
// nothing until a handler is set, which sets its own: a fork carries them
// as the default, and so skips two injected calls for each.
type procStatus struct {
	umask   uintptr
	handled uint64
}

func readStatus(pid int) (procStatus, error) {
	ps := procStatus{umask: 0o022, handled: sigBit(int(unix.SIGCHLD))}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	found := 0
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				ps.umask = uintptr(m)
			}
		}
		for _, field := range []string{"SigIgn:", "SigCgt:"} {
			if v, ok := strings.CutPrefix(line, field); ok {
				m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					return ps, fmt.Errorf("/proc/%d/status: %s %w", pid, field, err)
				}
				ps.handled |= m
				found++
			}
		}
	}
	if found != 2 {
		return ps, fmt.Errorf("/proc/%d/status shows no SigIgn and SigCgt", pid)
	}
	return ps, nil
}

// sigBit is signal sig's bit in a mask of /proc/PID/status.
func sigBit(sig int) uint64 { return 1 << (sig - 1) }

// readProc reads what else /proc shows of st.pid: working directory,
// name, descriptors, rlimits (readStatus has its umask).
func readProc(st *state) error {
	pid := st.pid
	var err error
	if st.cwd, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return err
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return err
	}
	st.comm = strings.TrimSuffix(string(comm), "\n")
	if st.fds, err = readFds(pid); err != nil {
		return err
	}
	for _, r := range []int{unix.RLIMIT_CORE, unix.RLIMIT_CPU, unix.RLIMIT_DATA, unix.RLIMIT_FSIZE, unix.RLIMIT_NOFILE,
		unix.RLIMIT_STACK, unix.RLIMIT_AS, unix.RLIMIT_NPROC, unix.RLIMIT_MEMLOCK, unix.RLIMIT_MSGQUEUE,
		unix.RLIMIT_SIGPENDING, unix.RLIMIT_NICE, unix.RLIMIT_RTPRIO, unix.RLIMIT_RTTIME, unix.RLIMIT_LOCKS} {
		var l unix.Rlimit
		if err := unix.Prlimit(pid, r, nil, &l); err != nil {
			return fmt.Errorf("prlimit %d: %w", r, err)
		}
		st.rlimits[r] = l
	}
	return nil
}

func readFds(pid int) ([]fdState, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []fdState
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := fdState{fd: n}
		target, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue // closed meanwhile: it is not there to copy
		}
		if strings.HasPrefix(target, "/") && !strings.HasSuffix(target, " (deleted)") {
			f.path = target
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, n))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "pos":
				f.pos, _ = strconv.ParseInt(v, 10, 64)
			case "flags":
				fl, _ := strconv.ParseInt(v, 8, 64)
				f.flags = int(fl)
			}
		}
		if fi, err := os.Stat(dir + "/" + e.Name()); err == nil && fi.Mode().IsRegular() {
			f.regular = true
		}
		out = append(out, f)
	}
	return out, nil
}

// startBrk is the start of pid's program break: field 47 of
// /proc/PID/stat.
func startBrk(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:])) // from field 3
	if i < 0 || len(f) < 45 {
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	return strconv.ParseUint(f[44], 10, 64)
}

// build makes d's state st's, all but the registers.
func build(d *tracee, st *state, keepFd int) error {
	dmaps, err := readMaps(d.pid)
	if err != nil {
		return err
	}
	dstart, err := startBrk(d.pid)
	if err != nil {
		return err
	}
	if dstart != st.startBrk {
		return fmt.Errorf("program breaks start at %#x and %#x: not children of one zygote", st.startBrk, dstart)
	}
	for _, name := range []string{"[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]"} {
		a, b := findPath(st.maps, name), findPath(dmaps, name)
		if (a == nil) != (b == nil) || a != nil && (a.start != b.start || a.end != b.end) {
			return fmt.Errorf("%s differs: not children of one zygote", name)
		}
	}
	gv := containing(dmaps, d.gadget)
	if gv == nil || !has(st.maps, *gv) {
		return errors.New("the fork's system call instruction is in memory its parent has changed")
	}
	scratch, err := scratchAddr(st.maps, dmaps)
	if err != nil {
		return err
	}
	if _, err := d.call(unix.SYS_MMAP, uintptr(scratch), scratchSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0); err != nil {
		return fmt.Errorf("scratch memory: %w", err)
	}
	b := &builder{d: d, st: st, scratch: scratch}
	steps := []struct {
		name string
		f    func() error
	}{
		{"mappings", func() error { return b.mappings(dmaps) }},
		{"descriptors", func() error { return b.descriptors(keepFd) }},
		{"signals", b.signals},
		{"process settings", b.settings},
	}
	for _, step := range steps {
		if err := step.f(); err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	plan, err := b.plan()
	if err != nil {
		return fmt.Errorf("pages: %w", err)
	}
	for _, r := range plan.drop {
		if _, err := d.call(unix.SYS_MADVISE, uintptr(r.start), uintptr(r.end-r.start), unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("drop pages %x-%x: %w", r.start, r.end, err)
		}
	}
	if _, err := d.call(unix.SYS_MUNMAP, uintptr(scratch), scratchSize); err != nil {
		return fmt.Errorf("free scratch memory: %w", err)
	}
	// Last: no call runs in d after its memory is the source's.
	return copyPages(st.pid, d, plan.copy)
}

type builder struct {
	d       *tracee
	st      *state
	scratch uint64
}

// put writes b into the scratch memory at off and returns its address.
func (b *builder) put(off uint64, data []byte) (uintptr, error) {
	if off+uint64(len(data)) > scratchSize {
		return 0, errors.New("argument too long")
	}
	if _, err := b.d.mem.WriteAt(data, int64(b.scratch+off)); err != nil {
		return 0, err
	}
	return uintptr(b.scratch + off), nil
}

func (b *builder) cstring(s string) (uintptr, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return 0, errors.New("NUL in a path")
	}
	return b.put(0, append([]byte(s), 0))
}

// mappings makes d's mappings the source's: unmaps what the source lacks,
// sets the program break, maps what d lacks, and extends the stack.
func (b *builder) mappings(dmaps []vma) error {
	d, st := b.d, b.st
	for _, v := range dmaps {
		if v.special() || v.start == b.scratch || has(st.maps, v) {
			continue
		}
		if _, err := d.call(unix.SYS_MUNMAP, uintptr(v.start), uintptr(v.end-v.start)); err != nil {
			return fmt.Errorf("unmap %v: %w", v, err)
		}
	}
	if got, err := d.call(unix.SYS_BRK, uintptr(st.brk)); err != nil || uint64(got) != st.brk {
		return fmt.Errorf("brk %#x: got %#x (%v)", st.brk, got, err)
	}
	for _, v := range st.maps {
		if v.special() || has(dmaps, v) {
			continue
		}
		if err := b.mapOne(v); err != nil {
			return fmt.Errorf("map %v: %w", v, err)
		}
	}
	ss, ds := findPath(st.maps, "[stack]"), findPath(dmaps, "[stack]")
	if ss == nil || ds == nil || ss.end != ds.end {
		return errors.New("the stacks differ: not children of one zygote")
	}
	if ss.start < ds.start {
		if _, err := d.call(unix.SYS_MMAP, uintptr(ss.start), uintptr(ds.start-ss.start), ss.prot(),
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED, ^uintptr(0), 0); err != nil {
			return fmt.Errorf("extend the stack: %w", err)
		}
	}
	got, err := readMaps(d.pid)
	if err != nil {
		return err
	}
	want := expected(st.maps, ds)
	if a, b := normalize(want, b.scratch), normalize(got, b.scratch); !equalLayouts(a, b) {
		return fmt.Errorf("layouts differ after the copy:\nwant %v\ngot  %v", a, b)
	}
	return nil
}

// mapOne maps v in d: a file again by its path (in d's own view), or
// anonymous memory; a private mapping of a file d cannot open becomes
// anonymous memory holding every page (copyAll).
func (b *builder) mapOne(v vma) error {
	d := b.d
	fixed := uintptr(unix.MAP_FIXED)
	if v.shared() {
		fixed |= unix.MAP_SHARED
	} else {
		fixed |= unix.MAP_PRIVATE
	}
	if !v.anonymous() && !copyAll(v) {
		p, err := b.cstring(v.path)
		if err != nil {
			return err
		}
		mode := uintptr(unix.O_RDONLY)
		if v.shared() && v.perms[1] == 'w' {
			mode = unix.O_RDWR
		}
		fd, err := d.call(unix.SYS_OPENAT, atFdcwd, p, mode|unix.O_CLOEXEC, 0)
		if err == nil {
			_, err = d.call(unix.SYS_MMAP, uintptr(v.start), uintptr(v.end-v.start), v.prot(), fixed, fd, uintptr(v.offset))
			if _, cerr := d.call(unix.SYS_CLOSE, fd); err == nil && cerr != nil {
				err = cerr
			}
			return err
		}
		if v.shared() {
			return &RefusedError{fmt.Sprintf("the session maps %s shared, and it cannot be opened again", v.path)}
		}
		return fmt.Errorf("open %s: %w", v.path, err)
	}
	if v.shared() {
		return &RefusedError{"the session maps shared anonymous memory"}
	}
	_, err := d.call(unix.SYS_MMAP, uintptr(v.start), uintptr(v.end-v.start), v.prot(), fixed|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
	return err
}

// copyAll reports whether every page of v is copied, present or not: a
// private mapping of a deleted file, whose pages only the source can
// read.
func copyAll(v vma) bool {
	return !v.anonymous() && !v.special() && !v.shared() && strings.HasSuffix(v.path, " (deleted)")
}

// expected is the layout d should have: the source's, with copyAll
// mappings anonymous and d's longer stack (dstack) kept.
func expected(src []vma, dstack *vma) []vma {
	out := make([]vma, 0, len(src)+1)
	for _, v := range src {
		if copyAll(v) {
			v.path, v.inode, v.dev, v.offset = "", 0, "00:00", 0
		}
		if v.path == "[stack]" {
			if v.start < dstack.start {
				out = append(out, vma{start: v.start, end: dstack.start, perms: v.perms, dev: "00:00"})
			}
			v.start = dstack.start
		}
		out = append(out, v)
	}
	return out
}

// normalize merges adjacent mappings that differ only where the kernel
// splits or merges them (consecutive parts of one file, or anonymous
// memory with the same rights), and drops the scratch mapping; file
// identity is the path (d's copy of a work file is another inode).
func normalize(in []vma, scratch uint64) []vma {
	var out []vma
	for _, v := range in {
		if v.start == scratch {
			continue
		}
		if strings.HasPrefix(v.path, "[anon:") {
			v.path = ""
		}
		v.dev, v.inode = "", 0
		if n := len(out); n > 0 {
			p := &out[n-1]
			contiguous := p.end == v.start && p.perms == v.perms && p.path == v.path && !v.special()
			if contiguous && (v.path == "" || p.offset+(p.end-p.start) == v.offset) {
				p.end = v.end
				continue
			}
		}
		out = append(out, v)
	}
	return out
}

func equalLayouts(a, b []vma) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func has(maps []vma, v vma) bool {
	for _, u := range maps {
		if u == v {
			return true
		}
	}
	return false
}

func findPath(maps []vma, path string) *vma {
	for i := range maps {
		if maps[i].path == path {
			return &maps[i]
		}
	}
	return nil
}

func containing(maps []vma, addr uint64) *vma {
	for i := range maps {
		if maps[i].start <= addr && addr < maps[i].end {
			return &maps[i]
		}
	}
	return nil
}

// scratchAddr is an address free in both layouts, with room around it,
// where d's scratch memory goes: it must not be where a mapping of the
// source's will be.
func scratchAddr(a, b []vma) (uint64, error) {
	all := append(append([]vma{}, a...), b...)
	sort.Slice(all, func(i, j int) bool { return all[i].start < all[j].start })
	const room = 4 << 20
	end := uint64(1 << 32)
	for _, v := range all {
		if v.start >= end+2*room {
			return end + room, nil
		}
		end = max(end, v.end)
	}
	return 0, errors.New("no free address range for scratch memory")
}

// descriptors gives d the source's descriptors, but keepFd, opened again
// by path with the same flags and offset, or /dev/null for those without
// a path or that d cannot open; d's others are closed.
func (b *builder) descriptors(keepFd int) error {
	d := b.d
	mine, err := readFds(d.pid)
	if err != nil {
		return err
	}
	want := map[int]bool{}
	for _, f := range b.st.fds {
		want[f.fd] = true
	}
	for _, f := range mine {
		if f.fd != keepFd && !want[f.fd] {
			if _, err := d.call(unix.SYS_CLOSE, uintptr(f.fd)); err != nil {
				return fmt.Errorf("close %d: %w", f.fd, err)
			}
		}
	}
	const keep = unix.O_ACCMODE | unix.O_APPEND | unix.O_NONBLOCK | unix.O_DIRECTORY | unix.O_PATH |
		unix.O_NOFOLLOW | unix.O_DIRECT | unix.O_NOATIME | unix.O_SYNC | unix.O_DSYNC | unix.O_LARGEFILE
	for _, f := range b.st.fds {
		if f.fd == keepFd {
			continue
		}
		fd, err := uintptr(0), errors.New("no path")
		if f.path != "" {
			var p uintptr
			if p, err = b.cstring(f.path); err != nil {
				return err
			}
			fd, err = d.call(unix.SYS_OPENAT, atFdcwd, p, uintptr(f.flags&keep|unix.O_CLOEXEC), 0)
		}
		if err != nil {
			p, perr := b.cstring("/dev/null")
			if perr != nil {
				return perr
			}
			if fd, err = d.call(unix.SYS_OPENAT, atFdcwd, p, unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
				return fmt.Errorf("open /dev/null: %w", err)
			}
		} else if f.regular && f.pos > 0 {
			if _, err := d.call(unix.SYS_LSEEK, fd, uintptr(f.pos), 0); err != nil {
				return fmt.Errorf("seek %s: %w", f.path, err)
			}
		}
		cloexec := uintptr(f.flags & unix.O_CLOEXEC)
		if int(fd) == f.fd {
			if cloexec == 0 {
				if _, err := d.call(unix.SYS_FCNTL, fd, unix.F_SETFD, 0); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := d.call(unix.SYS_DUP3, fd, uintptr(f.fd), cloexec); err != nil {
			return fmt.Errorf("dup3 to %d: %w", f.fd, err)
		}
		if _, err := d.call(unix.SYS_CLOSE, fd); err != nil {
			return err
		}
	}
	return nil
}

// signals gives d the source's dispositions, mask and alternate stack.
func (b *builder) signals() error {
	d, st := b.d, b.st
	// The signals whose action is not the default in either: the source's
	// are set, the fork's own others reset to the default.
	ds, err := readStatus(d.pid)
	if err != nil {
		return err
	}
	dfl := make([]byte, 32)
	for sig := 1; sig <= nsig; sig++ {
		act := st.sigactions[sig]
		if act == nil && ds.handled&sigBit(sig) != 0 {
			act = dfl
		}
		if act == nil || sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		p, err := b.put(0, act)
		if err != nil {
			return err
		}
		if _, err := d.call(unix.SYS_RT_SIGACTION, uintptr(sig), p, 0, 8); err != nil {
			return fmt.Errorf("rt_sigaction %d: %w", sig, err)
		}
	}
	p, err := b.put(0, st.sigmask)
	if err != nil {
		return err
	}
	if _, err := d.call(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, p, 0, 8); err != nil {
		return fmt.Errorf("rt_sigprocmask: %w", err)
	}
	if p, err = b.put(0, st.altstack); err != nil {
		return err
	}
	_, err = d.call(unix.SYS_SIGALTSTACK, p, 0)
	if err == unix.EINVAL && binary.LittleEndian.Uint32(st.altstack[8:])&ssDisable != 0 {
		err = nil // already without one
	}
	if err != nil {
		return fmt.Errorf("sigaltstack: %w", err)
	}
	return nil
}

// settings gives d the source's interval timers, umask, working
// directory, name and rlimits (never above d's own).
func (b *builder) settings() error {
	d, st := b.d, b.st
	for which, it := range st.itimers {
		p, err := b.put(0, it)
		if err != nil {
			return err
		}
		if _, err := d.call(unix.SYS_SETITIMER, uintptr(which), p, 0); err != nil {
			return fmt.Errorf("setitimer: %w", err)
		}
	}
	if _, err := d.call(unix.SYS_UMASK, st.umask); err != nil {
		return err
	}
	if !strings.HasSuffix(st.cwd, " (deleted)") {
		p, err := b.cstring(st.cwd)
		if err != nil {
			return err
		}
		if _, err := d.call(unix.SYS_CHDIR, p); err != nil {
			return fmt.Errorf("chdir %s: %w", st.cwd, err)
		}
	}
	name := make([]byte, 16)
	copy(name[:15], st.comm)
	p, err := b.put(0, name)
	if err != nil {
		return err
	}
	if _, err := d.call(unix.SYS_PRCTL, unix.PR_SET_NAME, p); err != nil {
		return fmt.Errorf("set name: %w", err)
	}
	for r, l := range st.rlimits {
		var mine unix.Rlimit
		if err := unix.Prlimit(d.pid, r, nil, &mine); err != nil {
			return err
		}
		if l.Max > mine.Max || l == mine {
			continue
		}
		if err := unix.Prlimit(d.pid, r, &l, nil); err != nil {
			return fmt.Errorf("prlimit %d: %w", r, err)
		}
	}
	return nil
}

type span struct{ start, end uint64 }

// pagePlan says which of d's pages are dropped (the source has none
// there: d reads zeros or the file then) and which copied from the source.
type pagePlan struct{ drop, copy []span }

func (b *builder) plan() (*pagePlan, error) {
	spm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", b.st.pid))
	if err != nil {
		return nil, err
	}
	defer spm.Close()
	dpm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", b.d.pid))
	if err != nil {
		return nil, err
	}
	defer dpm.Close()
	dmaps, err := readMaps(b.d.pid)
	if err != nil {
		return nil, err
	}
	p := &pagePlan{}
	add := func(list *[]span, a uint64) {
		if n := len(*list); n > 0 && (*list)[n-1].end == a {
			(*list)[n-1].end += pageSize
			return
		}
		*list = append(*list, span{a, a + pageSize})
	}
	if ss, ds := findPath(b.st.maps, "[stack]"), findPath(dmaps, "[stack]"); ds != nil && ds.start < ss.start {
		p.drop = append(p.drop, span{ds.start, ss.start}) // below the source's stack: never written there
	}
	var vs []vma
	for _, v := range b.st.maps {
		if v.shared() || v.special() && v.path != "[heap]" && v.path != "[stack]" {
			continue // shared files hold their own pages; the kernel's mappings are the same
		}
		vs = append(vs, v)
	}
	// Both sides' entries at once: the kernel's walk of the page tables
	// is most of a fork's time.
	var (
		sps  [][]uint64
		serr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		sps, serr = readPagemaps(spm, vs)
	}()
	dps, derr := readPagemaps(dpm, vs)
	<-done
	if err := errors.Join(serr, derr); err != nil {
		return nil, err
	}
	for k, v := range vs {
		sp, dp := sps[k], dps[k]
		all := copyAll(v)
		for i := range sp {
			a := v.start + uint64(i)*pageSize
			s, d := sp[i], dp[i]
			sOwn := s&pmSwapped != 0 || s&pmPresent != 0 && s&pmFile == 0
			dOwn := d&pmSwapped != 0 || d&pmPresent != 0 && d&pmFile == 0
			switch {
			case all || sOwn:
				same := s&pmPresent != 0 && d&pmPresent != 0 && s&pmPFN != 0 && s&pmPFN == d&pmPFN
				if !same {
					add(&p.copy, a)
				}
			case dOwn:
				add(&p.drop, a)
			}
		}
	}
	return p, nil
}

// copyPages copies the spans from the source's memory to d's.
func copyPages(src int, d *tracee, spans []span) error {
	sm, err := os.Open(fmt.Sprintf("/proc/%d/mem", src))
	if err != nil {
		return err
	}
	defer sm.Close()
	buf := make([]byte, 1<<20)
	for _, r := range spans {
		for a := r.start; a < r.end; {
			n := min(uint64(len(buf)), r.end-a)
			if _, err := sm.ReadAt(buf[:n], int64(a)); err != nil {
				return fmt.Errorf("read %x: %w", a, err)
			}
			if _, err := d.mem.WriteAt(buf[:n], int64(a)); err != nil {
				return fmt.Errorf("write %x: %w", a, err)
			}
			a += n
		}
	}
	return nil
}
