// Package warm is the child side of boxer's warm path: zygote.py, the
// program of a long-lived sandbox that forks one isolated, unprivileged
// child per future job, its speed steps (zygote_speed.py), and the
// protocol boxer speaks with the zygote and with each child, all of it in
// this file.
//
// It plays for a warm run the part package nsinit plays for a cold one:
// the code on the far side of the sandbox's wall, kept apart from the
// parent side. The parent side, internal/sandbox's Zygote and Warm,
// starts the zygote as an ordinary sandbox (its pid 1 is nsinit's), gives
// each child its cgroup, files and limits, and collects its result as it
// does a cold run's.
//
// zygote.py's parts, each reviewable alone:
//
//	security  _isolate (namespaces, /proc, tmpfs, loopback), _drop (uids,
//	          capabilities, seccomp, the job's process), _fresh_child
//	speed     zygote_speed.py: learn a job's pages, pin them, move the
//	          interpreter's code onto huge pages; none of it is needed for
//	          isolation, and a step that fails costs speed only
//	protocol  _job, _error, _zygote_ready and the fixed messages, held to
//	          this file's structs by TestZygoteSpeaksTheProtocol
//
// # Messages
//
// Every message is one SOCK_SEQPACKET packet. Most are a JSON Msg. Three
// are not JSON: the zygote's Config, lines it reads before it may import
// json; the ForkRequest, six integers the zygote's loop unpacks into one
// reused buffer (every page the loop writes is a copy-on-write fault after
// each fork); and the Job, NUL-ended fields the child splits in the job's
// wall time.
//
// # The zygote
//
// boxer holds one end of the zygote's control socket; the zygote gets the
// other as fd 3.
//
//	boxer                                    zygote
//	Config                             ->    imports, limits itself, moves its
//	                                         code to huge pages, gc.freeze,
//	                                         learns a job's pages, pins them,
//	                                         seals io_uring
//	                                   <-    Msg OpReady: pre-imported modules,
//	                                         huge text, learned and pinned
//	                                         pages
//	ForkRequest + a job socket         ->    fork into a new PID namespace
//	                                   <-    Msg OpForked (pid, request id), or
//	                                         OpError (a request it could not
//	                                         read, or a failed fork)
//	                                   <-    Msg OpExited: a child's pid 1 is
//	                                         gone (pid, wait status)
//
// # A child
//
// A child is two processes sharing one address space: its pid 1, which
// the zygote forked into a PID namespace of its own, and the job's
// process, pid 2, which pid 1 clones (_drop). On its job socket:
//
//	boxer                                    pid 1 (forked by the zygote)
//	                                         setsid: a session of its own;
//	                                         FreshNet: unshare net ns, lo up
//	                                   <-    Msg OpHello, with SCM_CREDENTIALS
//	move pid 1 (pid from the credentials)
//	into its cgroup
//	Msg OpGo (+ a net ns fd unless     ->    join that net ns; unshare mount/
//	FreshNet)                                IPC/cgroup ns, its own /proc,
//	                                         tmpfs /work /tmp /dev/shm,
//	                                         setresuid (no
//	                                         caps), seccomp (with a listener
//	                                         if Config.Listen), clone pid 2
//	                                         and wait for its exit or exec
//	                                         pid 2: setsid, setresuid,
//	                                         walks a job's path once
//	                                         (_rehearse)
//	                                   <-    Msg OpReady + fd of /work (and
//	                                         the listener's), with
//	                                         SCM_CREDENTIALS (pid 2's), or
//	                                         OpError
//	answer the listener (IP sockets)
//	SIGSTOP pid 1 (it stops when it
//	wakes); pidfd of pid 2; a default
//	job's cgroup limits; the CPU used        wait
//	   (a pool keeps it here)
//	the job's other limits, files via
//	the fd
//	Job + stdin, stdout, stderr        ->    closes the socket, runs the job
//	                                         in-process, exits
//	pid 2's pidfd turns readable: its wait status is read from its zombie
//	(/proc/PID/stat); after the answer, SIGKILL pid 1 and with it the
//	namespaces (boxer keeps the network namespace for the slot's next
//	child if the job left it untouched)
//
// # A session
//
// A session's child takes the same path up to its Job, whose Form is
// FormSession. It keeps the job socket, and pid 2 runs zygote_session.py's
// kernel, cell after cell, until boxer closes the socket or kills it. From
// the first cell on, caller code shares the process and can write to the
// socket: boxer reads every CellMsg as untrusted.
//
//	boxer                                    pid 2 (the kernel)
//	Job (Form session) + stdio         ->    imports the kernel, waits
//	Cell + the cell's stdout, stderr   ->    runs it in __main__ (SIGINT
//	                                         interrupts it), flushes, draws
//	                                         pyplot's open figures
//	                                   <-    CellMsg OpFigure chunks (PNGs,
//	                                         each prefixed by its length)
//	                                   <-    CellMsg OpDone
//	close the socket                   ->    exits
package warm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"boxer/internal/sandbox/nsinit"
)

// Config is the zygote's first message: newline-separated lines, read with
// os alone. Its pre-imports are its last lines, one module each.
type Config struct {
	Filter     []byte // the job's seccomp program; nil without seccomp
	SealFilter []byte // the zygote's own, installed once it is ready
	// ProcMasked and ProcReadOnly are what each child's /proc hides and
	// makes read-only: a cold sandbox's (nsinit.ProcMasked, ProcReadOnly).
	ProcMasked, ProcReadOnly []string
	// Listen has each child install Filter with a listener
	// (SECCOMP_FILTER_FLAG_NEW_LISTENER), which it sends to boxer with
	// OpReady: Filter then asks boxer about some calls (see
	// seccomp.NotifyIP).
	Listen bool
	// PreImports are the modules the zygote imports once, before forking.
	PreImports []string
	// Learn are pre-imports whose first use the zygote learns too, each
	// one of Samples: it runs it in a throwaway child, as it runs
	// print(2+2), and has each child copy the pages it wrote before the
	// child's job (_learn in zygote.py). A line "+module" each.
	Learn []string
}

// Samples are the pre-imports whose first use zygote.py knows how to run
// (its _SAMPLES): a pytest run of a small test file, a matplotlib chart
// saved as a PNG.
var Samples = []string{"matplotlib.pyplot", "pytest"}

// Marshal encodes c, or says which pre-import cannot be a line or which
// module to learn is no pre-import with a sample.
func (c Config) Marshal() ([]byte, error) {
	for _, m := range c.PreImports {
		if m == "" || strings.ContainsAny(m, "\n\x00") || strings.HasPrefix(m, "+") {
			return nil, fmt.Errorf("invalid pre-import %q", m)
		}
	}
	for _, m := range c.Learn {
		if !slices.Contains(c.PreImports, m) || !slices.Contains(Samples, m) {
			return nil, fmt.Errorf("cannot learn the first use of %q: want a pre-import among %v", m, Samples)
		}
	}
	listen := ""
	if c.Listen {
		listen = "listen"
	}
	lines := []string{hex.EncodeToString(c.Filter), hex.EncodeToString(c.SealFilter),
		strings.Join(c.ProcMasked, " "), strings.Join(c.ProcReadOnly, " "), listen}
	for _, m := range c.PreImports {
		if slices.Contains(c.Learn, m) {
			m = "+" + m
		}
		lines = append(lines, m)
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// ForkRequest asks the zygote for one child. It travels as six
// little-endian int64s in field order (zygote.py's _FORK_REQ), with the
// child's job socket as its one descriptor.
type ForkRequest struct {
	ID        int64 // echoed in the reply
	UID       int64 // the job's
	InitUID   int64 // the child's pid 1's (see _drop in zygote.py)
	DiskBytes int64 // the size of the child's /work and /tmp
	Inodes    int64 // and their inodes
	// FreshNet is 1 if the child makes its own network namespace before
	// its hello, 0 if boxer sends it one to join with OpGo (an earlier
	// child's, which its job left untouched).
	FreshNet int64
}

// Marshal encodes r.
func (r ForkRequest) Marshal() []byte {
	b := make([]byte, 0, 48)
	for _, v := range [...]int64{r.ID, r.UID, r.InitUID, r.DiskBytes, r.Inodes, r.FreshNet} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// Ops of a Msg.
const (
	OpHello  = "hello"  // child: forked; its pid is in the message's credentials
	OpGo     = "go"     // boxer: the child is in its cgroup, go on isolating
	OpReady  = "ready"  // child: isolated, waiting for its job; zygote: pre-imports done
	OpError  = "error"  // child: set-up failed; zygote: a fork request failed
	OpForked = "forked" // zygote: a child is forked
	OpExited = "exited" // zygote: a child (its pid 1) has exited
)

// Msg is every message of the warm path but the Config, the ForkRequest
// and the Job.
type Msg struct {
	Op string `json:"op"`
	// ID is the fork request an OpForked or a failed fork's OpError answers.
	ID int64 `json:"id,omitempty"`
	// Pid is the child's, in the zygote's PID namespace (OpForked,
	// OpExited); Status its wait status (OpExited).
	Pid    int    `json:"pid,omitempty"`
	Status uint32 `json:"status,omitempty"`
	// The zygote's OpReady: every module its pre-imports loaded, the
	// pre-imports it could not import (not installed), those of
	// Config.Learn whose first use failed in its sample (each with why),
	// and what it did to make forks cheap (see zygote_speed.py).
	Preimported   []string `json:"preimported,omitempty"`
	Missing       []string `json:"missing,omitempty"`
	Unlearned     []string `json:"unlearned,omitempty"`
	HugeTextBytes int      `json:"huge_text_bytes,omitempty"`
	LearnedPages  int      `json:"learned_pages,omitempty"`
	PinnedPages   int      `json:"pinned_pages,omitempty"`
	// Msg says what failed (OpError).
	Msg string `json:"msg,omitempty"`
}

// Decode reads one Msg of the zygote's or a child's. A field boxer does
// not know is an error, not a field ignored: zygote.py and Msg must say
// the same (TestZygoteSpeaksTheProtocol).
func Decode(b []byte) (Msg, error) {
	var m Msg
	return m, decodeStrict(b, &m)
}

// decodeStrict decodes b, one JSON value and nothing after it, into v,
// refusing a field v does not have.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil && d.More() {
		err = fmt.Errorf("trailing data after the message")
	}
	return err
}

// MaxCommandBytes bounds the bytes of a command a child takes: its Job,
// each byte escaped to at most six, must fit one packet on the job socket
// (SocketBuffer, which the kernel cuts to twice net.core.wmem_max, 416 KiB
// at its default) and zygote.py's MAX_MSG. A longer command runs cold.
const MaxCommandBytes = 64 << 10

// SocketBuffer is the send buffer boxer asks for on a job socket.
const SocketBuffer = 1 << 20

// Job is the job a warm child runs in its own process, as python would
// run `python FILE ARGS` (Form "file"), `python -c CODE ARGS` ("command")
// or `python -m MODULE ARGS` ("module").
type Job struct {
	Form   string
	Target string // the file, the code or the module
	Args   []string
	// Argv0 is the command's first word: with the form's flag, the target
	// and the args it is the whole command, sys.orig_argv.
	Argv0 string
	// Rlimits are set just before the job's code runs: a cold run's.
	Rlimits []nsinit.Rlimit
}

// Marshal encodes j as the child reads it (_job): form, target, argv0, the
// number of rlimits, each rlimit's resource, cur and max in decimal, then
// the args, each field ended by a NUL. Not JSON: the child decodes it in
// the job's wall time, where splitting bytes touches fewer cold pages than
// json.loads (a paced warm run's p50 2.15 -> 2.10 ms, 2026-12-07). A NUL in
// a string is an error, as in an argument to exec.
func (j Job) Marshal() ([]byte, error) {
	n := 32 * (len(j.Rlimits) + 1)
	for _, s := range append([]string{j.Form, j.Target, j.Argv0}, j.Args...) {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, fmt.Errorf("warm job: an argument holds a NUL byte")
		}
		n += len(s) + 1
	}
	b := make([]byte, 0, n)
	for _, s := range []string{j.Form, j.Target, j.Argv0} {
		b = append(append(b, s...), 0)
	}
	b = append(strconv.AppendInt(b, int64(len(j.Rlimits)), 10), 0)
	for _, r := range j.Rlimits {
		b = append(strconv.AppendInt(b, int64(r.Resource), 10), 0)
		b = append(strconv.AppendUint(b, r.Cur, 10), 0)
		b = append(strconv.AppendUint(b, r.Max, 10), 0)
	}
	for _, s := range j.Args {
		b = append(append(b, s...), 0)
	}
	return b, nil
}

// marshalPlain encodes v, strings, ints and slices of them (nothing to
// fail), as JSON without HTML's escapes.
func marshalPlain(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// FormSession is the Form of a Job that makes the child a session's
// kernel (zygote_session.py): Target and Args are empty.
const FormSession = "session"

// Ops of a session's messages.
const (
	OpCell   = "cell"   // boxer: run Code
	OpFigure = "figure" // kernel: a chunk of the cell's figures
	OpDone   = "done"   // kernel: the cell is over
)

// Cell is one cell of a session, sent with the cell's stdout and stderr.
// Seq numbers the session's cells; the kernel's answer carries it, so
// that an answer caller code forged for one cell is never taken for a
// later cell's.
type Cell struct {
	Op   string `json:"op"` // OpCell
	Seq  int64  `json:"seq"`
	Code string `json:"code"`
}

// Marshal encodes c with no more escapes than JSON needs (see Job.Marshal).
func (c Cell) Marshal() []byte { return marshalPlain(c) }

// CellMsg is what a session's kernel sends after a cell: OpFigure chunks,
// then one OpDone.
type CellMsg struct {
	Op  string `json:"op"`
	Seq int64  `json:"seq"` // the Cell's
	// Data is base64 of a chunk of the cell's figures, each a PNG after
	// its length in four big-endian bytes; Last marks the final chunk
	// (OpFigure).
	Data string `json:"data,omitempty"`
	Last bool   `json:"last,omitempty"`
	// ExitCode is what a script of the cell's code would have exited
	// with; Value the repr of a trailing expression (nil if none or
	// None); Error the exception that ended the cell; Interrupted tells
	// that SIGINT, boxer's timeout, did (OpDone).
	ExitCode    int     `json:"exit_code"`
	Value       *string `json:"value,omitempty"`
	Error       string  `json:"error,omitempty"`
	Interrupted bool    `json:"interrupted,omitempty"`
}

// DecodeCellMsg reads one message of a session's kernel, refusing a field
// it does not know: the kernel and CellMsg must say the same, and what
// caller code may have written there is refused rather than guessed at.
func DecodeCellMsg(b []byte) (CellMsg, error) {
	var m CellMsg
	err := decodeStrict(b, &m)
	if err == nil && m.Op != OpFigure && m.Op != OpDone {
		err = fmt.Errorf("unknown op %q", m.Op)
	}
	return m, err
}
