package nsinit

// The warm path's messages: boxer and a warm pool's zygote (zygote.py, the
// program of an ordinary sandbox whose pid 1 is this package's Init), and
// boxer and each warm child. They travel as JSON, one message per
// SOCK_SEQPACKET packet; zygote.py reads and writes the same fields, which
// internal/sandbox's TestZygoteSpeaksTheProtocol holds it to. (Two messages
// are not JSON: the zygote's config, lines it reads before it may import
// json, and the fork request, five integers the zygote's loop unpacks into
// one reused buffer; both are described where boxer writes them, in
// zygote_linux.go.)
//
//	boxer -> zygote  config, then fork requests, each with a job socket
//	zygote -> boxer  WarmMsg: OpReady once, then OpForked or OpError for
//	                 each request and OpExited for each child
//	child -> boxer   WarmMsg: OpHello, OpReady with the work dir's fd, or
//	                 OpError
//	boxer -> child   WarmMsg: OpGo, then a WarmJob with its stdin, stdout
//	                 and stderr
//
// The sequence and what each side does between the messages are drawn at
// Warm in zygote_linux.go and warm_linux.go.

// Ops of a WarmMsg.
const (
	OpHello  = "hello"  // child: forked; its pid is in the message's credentials
	OpGo     = "go"     // boxer: the child is in its cgroup, go on isolating
	OpReady  = "ready"  // child: isolated, waiting for its job; zygote: pre-imports done
	OpError  = "error"  // child: set-up failed; zygote: a fork request failed
	OpForked = "forked" // zygote: a child is forked
	OpExited = "exited" // zygote: a child (its pid 1) has exited
)

// WarmMsg is every message of the warm path but the job itself.
type WarmMsg struct {
	Op string `json:"op"`
	// ID is the fork request an OpForked or a failed fork's OpError answers.
	ID int64 `json:"id,omitempty"`
	// Pid is the child's, in the zygote's PID namespace (OpForked,
	// OpExited); Status its wait status (OpExited).
	Pid    int    `json:"pid,omitempty"`
	Status uint32 `json:"status,omitempty"`
	// The zygote's OpReady: every module its pre-imports loaded, and what
	// it did to make forks cheap (see Zygote in zygote_linux.go).
	Preimported   []string `json:"preimported,omitempty"`
	HugeTextBytes int      `json:"huge_text_bytes,omitempty"`
	LearnedPages  int      `json:"learned_pages,omitempty"`
	PinnedPages   int      `json:"pinned_pages,omitempty"`
	// Msg says what failed (OpError).
	Msg string `json:"msg,omitempty"`
}

// WarmJob is the job a warm child runs in its own process, as python would
// run `python FILE ARGS` (Form "file"), `python -c CODE ARGS` ("command")
// or `python -m MODULE ARGS` ("module").
type WarmJob struct {
	Form   string   `json:"form"`
	Target string   `json:"target"` // the file, the code or the module
	Args   []string `json:"args"`
	// OrigArgv is the job's whole command, sys.orig_argv.
	OrigArgv []string `json:"orig_argv"`
	// Rlimits are set just before the job's code runs: a cold run's.
	Rlimits []Rlimit `json:"rlimits"`
}
