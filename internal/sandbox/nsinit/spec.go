package nsinit

// Arg0 is argv[0] of a process that must run as a sandbox's pid 1.
const Arg0 = "boxer-nsinit"

// Fixed descriptors of the protocol (see the package doc).
const (
	FDSpec   = 3
	FDReport = 4
	FDStdin  = 5
	FDStdout = 6
	FDStderr = 7
	// FDExtra, when the parent passes it, becomes the program's fd 3 (a
	// warm pool's zygote gets its control socket this way).
	FDExtra = 8
)

// Setup describes the sandbox's root filesystem and identity. Paths named
// Source or Root are host paths; Target and Path are paths inside the
// sandbox.
type Setup struct {
	// Root is an empty host directory on which the new root is assembled.
	Root string `json:"root"`
	// Work is the host path of the run's work dir (a tmpfs the parent
	// mounted and filled); it appears at WorkDir, writable.
	Work    string `json:"work"`
	WorkDir string `json:"work_dir"`
	// Binds are host paths made visible read-only, at the same path.
	Binds []Bind `json:"binds"`
	// Symlinks are created in the new root (e.g. /bin -> usr/bin).
	Symlinks []Symlink `json:"symlinks"`
	// Files are generated files written into the new root (e.g. /etc/passwd).
	Files []File `json:"files"`
	// Devices are host device nodes bound into /dev (e.g. "null").
	Devices []string `json:"devices"`
	// TmpBytes and TmpInodes size /tmp and /dev/shm.
	TmpBytes  int64  `json:"tmp_bytes"`
	TmpInodes int64  `json:"tmp_inodes"`
	Hostname  string `json:"hostname"`
	// Sysctls are written below /proc/sys before it is made read-only:
	// names relative to it (e.g. "user/max_inotify_instances"), only ones
	// the sandbox's own namespaces own.
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

// Bind is a read-only bind mount of a host file or directory.
type Bind struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Symlink is a symbolic link Path -> Target inside the sandbox.
type Symlink struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// File is a generated file inside the sandbox.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    uint32 `json:"mode"`
}

// Rlimit is one resource limit applied to the program.
type Rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// Job is the program to start in a ready sandbox.
type Job struct {
	// Path is the executable, inside the sandbox.
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	UID  int      `json:"uid"`
	GID  int      `json:"gid"`
	// Rlimits are set on pid 1 before the fork, so the program inherits them.
	Rlimits []Rlimit `json:"rlimits"`
	// Seccomp is the marshalled BPF program (internal/seccomp), installed
	// last before the fork. Empty only when the operator disabled seccomp.
	Seccomp []byte `json:"seccomp"`
	// PassExtraFD gives the program FDExtra as its fd 3.
	PassExtraFD bool `json:"pass_extra_fd,omitempty"`
	// KeepCaps leaves the capability bounding set whole, so a program run
	// as UID 0 keeps its capabilities in the sandbox's user namespace. Only
	// a warm pool's zygote asks for it: it needs them to give each child
	// its own namespaces and mounts, and it never runs caller code.
	KeepCaps bool `json:"keep_caps,omitempty"`
}

// Report events, child -> parent.
const (
	EventReady   = "ready"
	EventStarted = "started"
	EventExited  = "exited"
	EventError   = "error"
)

// Report is one message from pid 1 to the parent.
type Report struct {
	Event string `json:"event"`
	// WaitStatus is the program's raw wait(2) status (EventExited).
	WaitStatus uint32 `json:"wait_status,omitempty"`
	// Step names the setup step that failed (EventError), e.g. "pivot_root".
	Step  string `json:"step,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Msg   string `json:"msg,omitempty"`
}
