package sandbox

import (
	"bytes"
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// A warm child's network namespace is the dearest kernel object it has:
// made with its loopback up, then torn down by the kernel's workers, it
// cost about 15% of the machine's CPU per print(2+2) under load (perf,
// 2026-12-03: copy_net_ns 7.8%, cleanup_net 5.8%, and RCU callbacks). So
// a slot keeps its child's namespace for its next child, as it keeps its
// cgroup, when the job left nothing in it (ZygoteConfig.KeepNet). Nothing
// can reset a namespace a job used: TIME_WAIT sockets on loopback, which
// the next job sees in /proc/net/tcp and in a refused bind, and the
// counters of /proc/net/dev, snmp and netstat, readable over netlink too,
// outlive its processes. A namespace whose job used the network is torn
// down as before, and the slot's next child makes a fresh one.
//
// "Left nothing" is decided first by what the job did, then by what the
// namespace shows:
//
//   - No IP socket. The job's seccomp filter (seccomp.NotifyIP) holds
//     every AF_INET and AF_INET6 socket and socketpair call until boxer has
//     noted it (ipGate). Everything a namespace keeps of IP comes from
//     such a socket, some of it in no file at all: a TCP connect to
//     127.0.0.1 that fails after its route lookup (EADDRNOTAVAIL: no local
//     port left) sends nothing, moves no per-namespace counter, and leaves
//     a cached route on the CPU it ran on, which the next job would see
//     through the host-wide count in /proc/net/stat/rt_cache, a bit per
//     CPU (found by the second adversarial review, 2026-12-03). Checking
//     what a job did closes such ways without knowing them.
//   - What its files show, read through files opened while it was new,
//     against what they showed then (untouched): unix, since AF_UNIX
//     sockets pass the gate, and a socket left behind by its processes
//     (kept alive by a descriptor in flight in a cycle, until the collector
//     gets to it) holds its name in the namespace; and dev, whose
//     loopback counters every packet moves, in case a packet ever comes of
//     something else than an IP socket. The other files the first reviews
//     found moved (snmp, snmp6 and netstat by a connect with no route,
//     ip6_flowlabel by a lingering flow label, rt6_stats and ipv6_route
//     by a failed IPv6 connect's cached route) move only through an IP
//     socket, which the gate has already seen; they are not read for
//     each job (they cost boxer some 0.1 ms a job: snmp6 alone is 5 KiB
//     of text). TestWarmNetnsKeptOnlyUntouched still compares all of
//     them, as the next job sees them.
//
// The rest of the filter leaves a job only stream sockets of AF_INET and
// AF_INET6 and AF_UNIX ones (no UDP, ICMP, raw or netlink), and refuses
// the IPv6 flow label manager (an exclusive label also sets a flag no file
// shows; see seccomp.Default); the job has no capability over the
// namespace (it is unprivileged, and the namespace belongs to the
// zygote's user namespace), so it can change no interface, route,
// address, rule or sysctl. What an untouched namespace still shares with
// its next child is its identity (its inode in /proc/PID/ns, its cookie),
// as a reused cgroup shares its path: nothing a job wrote.
// TestWarmNetnsKeptOnlyUntouched tries each known way to leave something.
//
// Whether it was kept, though, is a bit job N sets and job N+1 can read
// (the third review, 2026-12-07): a kept namespace is older than the
// child's PID namespace, which its NS_GET_ID (or SO_NETNS_COOKIE) shows,
// and job N decides it by making an IP socket or not. So the next job on
// a slot learns whether the last one made an IP socket, and two
// colluding jobs can pass a bit per job. A reused cgroup is the same kind
// of bit (the last job decides whether its memory can be reset), and
// jobs that share a machine can already pass bits through its load; what
// the bit cannot carry is anything the last job read or wrote.
//
// A job's session (StartSession) never gives its namespace on: its socket
// to boxer could carry a descriptor back to boxer's side.

// netStateFiles are the files of /proc/PID/net whose contents untouched
// compares (see above for why these two).
var netStateFiles = []string{"unix", "dev"}

// netStateMax bounds each file's read. A pristine namespace's are a few
// lines; a file longer than this is not pristine.
const netStateMax = 32 << 10

// heldNet is a network namespace boxer holds for its slot's next child.
type heldNet struct {
	fd       int      // the namespace
	files    []int    // its netStateFiles, opened while it was new
	pristine [][]byte // and what they said then
}

// holdNet holds the network namespace of process pid, which must be new
// (nothing has run in it yet), and notes its state.
func holdNet(pid int) (_ *heldNet, retErr error) {
	dir := "/proc/" + strconv.Itoa(pid)
	fd, err := unix.Open(dir+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	n := &heldNet{fd: fd}
	defer func() {
		if retErr != nil {
			n.close()
		}
	}()
	buf := make([]byte, netStateMax)
	for _, name := range netStateFiles {
		// The open file holds the namespace it was opened in, and reads
		// it anew from offset 0, after pid is gone too.
		f, err := unix.Open(dir+"/net/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, err
		}
		n.files = append(n.files, f)
		b, err := readAt0(f, buf)
		if err != nil {
			return nil, err
		}
		n.pristine = append(n.pristine, bytes.Clone(b))
	}
	return n, nil
}

// untouched reports whether the namespace shows what it showed when it was
// new. Call it once no process is left in it. Each file is read from its
// start for one byte more than it held then, and must give back exactly
// what it held, then nothing: a read cut short for any reason counts as
// touched, which only costs a new namespace.
func (n *heldNet) untouched() bool {
	var small [1024]byte
	for i, f := range n.files {
		want := n.pristine[i]
		buf := small[:]
		if len(want) >= len(buf) {
			buf = make([]byte, len(want)+1)
		}
		m, err := unix.Pread(f, buf[:len(want)+1], 0)
		if err != nil || m != len(want) || !bytes.Equal(buf[:m], want) {
			return false
		}
		if m, err = unix.Pread(f, buf[:1], int64(len(want))); err != nil || m != 0 {
			return false
		}
	}
	return true
}

// readAt0 reads a file of /proc whole into buf from its start, failing
// if it does not fit. A read of a seq_file ends at a page or a record, so
// it reads until the end.
func readAt0(fd int, buf []byte) ([]byte, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return buf[:n], nil
		}
		if n += m; n == len(buf) {
			return nil, errors.New("longer than the read")
		}
	}
}

func (n *heldNet) close() {
	for _, f := range n.files {
		unix.Close(f)
	}
	unix.Close(n.fd)
}
