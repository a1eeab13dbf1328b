package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"

	"boxer/internal/sandbox"
)

// This file is what boxer doctor says after its FAIL lines: how to fix
// each failure where boxer runs. Where is detected once (detectEnv, from
// envFacts); each failing check is sorted into a problem (the classify
// functions, by errno where the error carries one); the text for a
// problem on an environment is looked up in one table (fixes).

// envKind is where boxer runs, as far as the fix is concerned.
type envKind int

const (
	envHost envKind = iota // nothing detected: a plain host
	envSystemd
	envDocker
	envPodman
	envKubernetes
)

func (k envKind) String() string {
	return [...]string{"this host", "systemd", "Docker", "Podman", "Kubernetes"}[k]
}

// envFacts are what detectEnv decides from. readEnvFacts gathers them;
// tests write them.
type envFacts struct {
	Kubernetes   bool   // $KUBERNETES_SERVICE_HOST is set: a pod
	Podman       bool   // /run/.containerenv exists
	Docker       bool   // /.dockerenv exists
	SystemdInit  bool   // /run/systemd/system exists: systemd is pid 1
	InvocationID string // $INVOCATION_ID, which systemd sets for a unit's processes
	SelfCgroup   string // /proc/self/cgroup
	Container    string // $container, which Podman (and systemd-nspawn) set in a container
	UserNS       bool   // /proc/self/uid_map maps less than every id: a user namespace
}

// runsOn is the detected environment, what it was detected by (shown with
// the fixes, so that an operator can judge a wrong guess: a VM made from a
// Docker image keeps /.dockerenv), and on systemd the unit boxer runs in,
// when it is in one and its name is known.
type runsOn struct {
	kind   envKind
	by     string
	unit   string
	userns bool // in a user namespace: see fixFor's use of it
}

// readEnvFacts reads the facts through the given functions (os.Getenv,
// a stat, os.ReadFile). It must run before cgroup placement moves boxer
// into a leaf of its own, which changes /proc/self/cgroup.
func readEnvFacts(getenv func(string) string, exists func(string) bool, readFile func(string) ([]byte, error)) envFacts {
	cg, _ := readFile("/proc/self/cgroup")
	uidMap, err := readFile("/proc/self/uid_map")
	return envFacts{
		Container:    getenv("container"),
		UserNS:       err == nil && strings.Join(strings.Fields(string(uidMap)), " ") != "0 0 4294967295",
		Kubernetes:   getenv("KUBERNETES_SERVICE_HOST") != "",
		Podman:       exists("/run/.containerenv"),
		Docker:       exists("/.dockerenv"),
		SystemdInit:  exists("/run/systemd/system"),
		InvocationID: getenv("INVOCATION_ID"),
		SelfCgroup:   string(cg),
	}
}

// detectEnv says where boxer runs. A container is what matters first
// (its runtime decides the flags), Kubernetes before the runtime below it
// (a pod may carry /.dockerenv); then systemd, as init or as boxer's unit.
func detectEnv(f envFacts) runsOn {
	r := detectKind(f)
	r.userns = f.UserNS
	return r
}

func detectKind(f envFacts) runsOn {
	switch {
	case f.Kubernetes:
		return runsOn{kind: envKubernetes, by: "$KUBERNETES_SERVICE_HOST"}
	case f.Podman:
		return runsOn{kind: envPodman, by: "/run/.containerenv"}
	case f.Container == "podman": // podman run --rootfs makes no .containerenv
		return runsOn{kind: envPodman, by: "$container"}
	case f.Docker:
		return runsOn{kind: envDocker, by: "/.dockerenv"}
	}
	unit := serviceOf(f.SelfCgroup)
	switch {
	case unit != "":
		return runsOn{kind: envSystemd, by: "/proc/self/cgroup", unit: unit}
	case f.InvocationID != "":
		return runsOn{kind: envSystemd, by: "$INVOCATION_ID"}
	case f.SystemdInit:
		return runsOn{kind: envSystemd, by: "/run/systemd/system"}
	}
	return runsOn{kind: envHost, by: "no container or systemd found"}
}

// serviceOf is the systemd service a /proc/self/cgroup names, if its
// process sits in one: the path ends in <name>.service, or in a leaf boxer
// made below it (boxer-supervisor). A scope (a login session, a
// container) or a slice is no service.
func serviceOf(procSelfCgroup string) string {
	for _, line := range strings.Split(procSelfCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		p := strings.TrimSuffix(parts[2], "/")
		if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.HasSuffix(p[i+1:], "-supervisor") {
			p = p[:i]
		}
		if name := p[strings.LastIndexByte(p, '/')+1:]; strings.HasSuffix(name, ".service") {
			return name
		}
	}
	return ""
}

func (r runsOn) header() string {
	if r.unit != "" {
		return fmt.Sprintf("How to fix on %s (boxer runs in %s):", r.kind, r.unit)
	}
	return fmt.Sprintf("How to fix on %s (%s):", r.kind, r.by)
}

// problem is the kind of a failing check, which decides its fix.
type problem int

const (
	probNone problem = iota
	probOther
	probRoot
	probCaps
	probUserNS
	probKernel
	probCgroupDelegate // the controllers are not handed down to boxer's cgroup
	probCgroupBusy     // boxer's cgroup holds other processes
	probCgroupScope    // systemd refused boxer a scope of its own
	probCgroupReadOnly
	probCgroupDenied
	probCgroupNotHanded // denied, in a user namespace: the runtime kept the cgroup
	probCgroupSwap
	probRlimit
	probStateDir
	probPython
	probProcMount   // a sandbox's own /proc refused: /proc is masked
	probNamespaces  // a sandbox's namespaces or id maps refused
	probMountDenied // another mount refused: EPERM
	probMountAccess // another mount refused: EACCES
	probIsolation   // a protection not in force inside a sandbox
	probIDs         // the sandboxes' ids are not mapped in boxer's user namespace
	probPayments    // the payment settings are incomplete
	probFacilitator // the facilitator does not answer
	probFacUnsupp   // the facilitator answers that it settles none of boxer's payments
)

// Fix texts several environments or problems share.
const (
	fixDockerCgroup = "--cgroupns=private (on a cgroup v2 host) makes the container's cgroup boxer's own. " +
		"Docker mounts /sys/fs/cgroup read-only unless --privileged: remount it read-write before boxer starts " +
		"(mount -o remount,rw /sys/fs/cgroup in the entrypoint; it needs --cap-add SYS_ADMIN and --security-opt apparmor=unconfined), or use --privileged."
	fixPodmanCgroup = "--cgroupns=private, and --security-opt unmask=ALL: Podman mounts /sys/fs/cgroup read-only by default. Or --privileged."
	fixK8sCgroup    = "Run on cgroup v2 nodes (the container then has a cgroup namespace of its own), with hostUsers: false and " +
		"capabilities.add: [SYS_ADMIN], and start boxer through the image's entrypoint, which remounts /sys/fs/cgroup read-write " +
		"(deploy/kubernetes/deployment.yaml)."
	fixSystemdUnit = "Run boxer as a service of its own with Delegate=yes: install deploy/systemd/boxer.service " +
		"(or, for a try, systemd-run -p Delegate=yes boxer serve)."
)

// fixes holds the text for each problem on each environment. A problem
// without a text for an environment falls back to that of the nearest one
// (Podman to Docker), then to envHost's, the plain-host fix.
var fixes = map[problem]map[envKind]string{
	probOther: {
		envHost: "No fix is known for this message; it names the step that failed and the errno.",
	},
	probRoot: {
		envHost:       "Run boxer as root (sudo boxer ...): every run gets its own namespaces, cgroup and mounts.",
		envSystemd:    "Leave User= out of the unit: boxer runs as root (deploy/systemd/boxer.service).",
		envDocker:     "Run the container as root (no --user, or --user 0), not in rootless mode or with --userns-remap: boxer maps its sandboxes to host ids from 1,500,000,000 up.",
		envKubernetes: "runAsUser: 0 with hostUsers: false: root in the pod's own user namespace (deploy/kubernetes/deployment.yaml).",
	},
	probCaps: {
		envHost:       "Run boxer as root with the full capability set, not under capsh, setpriv or a reduced bounding set.",
		envSystemd:    "CapabilityBoundingSet= in the unit must keep CAP_SYS_ADMIN CAP_SETUID CAP_SETGID CAP_DAC_OVERRIDE (deploy/systemd/boxer.service).",
		envDocker:     "--cap-add SYS_ADMIN (the default set has SETUID, SETGID and DAC_OVERRIDE; after --cap-drop ALL add those too), or --privileged.",
		envKubernetes: "securityContext.capabilities: {drop: [ALL], add: [SYS_ADMIN, SETUID, SETGID, DAC_OVERRIDE]} (deploy/kubernetes/deployment.yaml).",
	},
	probUserNS: {
		envHost: "sysctl -w user.max_user_namespaces=15000, and the same setting in /etc/sysctl.d/. " +
			"(Ubuntu's kernel.apparmor_restrict_unprivileged_userns does not matter: it restricts processes without CAP_SYS_ADMIN, and boxer has it.)",
		envDocker:     "The setting is the host's, not the container's: on the host, sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/).",
		envKubernetes: "The setting is the node's: set user.max_user_namespaces=15000 on the node (its image, or a privileged DaemonSet); a pod cannot.",
	},
	probKernel: {
		envHost: "This kernel was built without it (a container shares the host's kernel): boxer needs CONFIG_USER_NS, CONFIG_PID_NS, CONFIG_NET_NS, " +
			"CONFIG_IPC_NS, CONFIG_UTS_NS, CONFIG_CGROUPS and CONFIG_SECCOMP_FILTER, as Debian's and Ubuntu's kernels have.",
	},
	probCgroupDelegate: {
		envHost:       "Give boxer a cgroup with the cpu, memory and pids controllers handed down to it: " + fixSystemdUnit + " Or name one with --cgroup-parent.",
		envSystemd:    "Delegate=yes in boxer's unit, as deploy/systemd/boxer.service has; from a shell, systemd-run -p Delegate=yes boxer serve.",
		envDocker:     fixDockerCgroup,
		envPodman:     fixPodmanCgroup,
		envKubernetes: fixK8sCgroup,
	},
	probCgroupBusy: {
		envHost:       "boxer shares its cgroup with other processes, and such a cgroup cannot hand controllers down. " + fixSystemdUnit + " Or name an empty cgroup with --cgroup-parent.",
		envSystemd:    "Run boxer alone in its service, with Delegate=yes (deploy/systemd/boxer.service), not beside other processes of one unit.",
		envDocker:     "Make boxer the container's entrypoint (--init is fine) with --cgroupns=private: it then moves the container's processes into a leaf cgroup of its own.",
		envKubernetes: "Run boxer as the container's command, alone in its container, on a cgroup v2 node.",
	},
	probCgroupScope: {
		envHost: "boxer's cgroup holds other processes, and systemd would not give boxer a scope of its own. " + fixSystemdUnit,
	},
	probCgroupReadOnly: {
		envHost:       "/sys/fs/cgroup is mounted read-only: mount -o remount,rw /sys/fs/cgroup.",
		envSystemd:    "Remove ProtectControlGroups= from the unit: it makes /sys/fs/cgroup read-only.",
		envDocker:     fixDockerCgroup,
		envPodman:     fixPodmanCgroup,
		envKubernetes: fixK8sCgroup,
	},
	probCgroupDenied: {
		envHost: "boxer may not create cgroups there: where its cgroup is a hierarchy's root (mode 0555) it needs root with CAP_DAC_OVERRIDE. " +
			"Or give it a cgroup of its own. " + fixSystemdUnit,
		envSystemd: "On cgroup v1, keep CAP_DAC_OVERRIDE in CapabilityBoundingSet= (deploy/systemd/boxer.service has it): systemd gives a unit no cgroup in the freezer hierarchy, " +
			"so boxer makes its own in that hierarchy's root, mode 0555.",
		envDocker:     fixDockerCgroup,
		envPodman:     fixPodmanCgroup,
		envKubernetes: fixK8sCgroup,
	},
	probCgroupNotHanded: {
		envHost: "boxer runs in a user namespace, and its cgroup belongs to a user outside it: the container runtime did not hand the container its cgroup. " +
			"crun does; runc does only with its systemd cgroup driver and a cgroup mount read-write from the start (containerd 2.1+: cgroup_writable = true on the runtime).",
		envKubernetes: "The pod's user namespace (hostUsers: false) does not own its cgroup: the runtime must hand it over. " +
			"CRI-O with crun does; containerd 2.1+ with runc does with cgroup_writable = true on the runtime and the systemd cgroup driver (deploy/kubernetes/README.md).",
	},
	probCgroupSwap: {
		envHost: "On the host (for a container: its host, or node): boot with swapaccount=1 or turn swap off (swapoff -a); otherwise a run can swap past its memory limit.",
	},
	probRlimit: {
		envHost:       "Raise boxer's hard limits before it starts, as root: ulimit -Hn 1048576 (open files), ulimit -Hu unlimited (processes).",
		envSystemd:    "LimitNOFILE=1048576 and LimitNPROC=infinity in the unit, as deploy/systemd/boxer.service has.",
		envDocker:     "--ulimit nofile=1048576:1048576 (and --ulimit nproc=-1:-1 for processes).",
		envKubernetes: "Kubernetes has no ulimit setting: a container gets its runtime's limits (containerd: LimitNOFILE= of containerd.service, or the rlimits of its base_runtime_spec). Raise them on the node.",
	},
	probStateDir: {
		envHost: "Every directory above --state-dir must be searchable by others (chmod o+x): a sandbox's pid 1 runs as an unprivileged id. " +
			"The default, /run/boxer, is.",
		envSystemd: "Keep RuntimeDirectory=boxer, RuntimeDirectoryMode=0711 and BOXER_STATE_DIR=/run/boxer (deploy/systemd/boxer.service).",
	},
	probPython: {
		envHost:   "Install the interpreter (apt-get install python3) or point --python (BOXER_PYTHON) at one; the FAIL line has its error or stderr.",
		envDocker: "The image needs the interpreter: install python3 in it, or point BOXER_PYTHON at one; the FAIL line has its error or stderr.",
	},
	probProcMount: {
		envHost: "The kernel refuses a sandbox its own /proc while paths of boxer's /proc are masked or mounted over: remove those mounts " +
			"(a container runtime's masks, or systemd's ProtectKernelTunables=, ProtectKernelLogs=, ProtectProc=).",
		envSystemd: "Remove ProtectKernelTunables=, ProtectKernelLogs= and ProtectProc= from the unit: their mounts over /proc make the kernel refuse a sandbox its own /proc.",
		envDocker: "--security-opt systempaths=unconfined: Docker's masks over /proc make the kernel refuse a sandbox its own /proc. " +
			"With --security-opt apparmor=unconfined (docker-default denies mount); or --privileged.",
		envPodman: "--security-opt unmask=ALL: Podman's masks over /proc make the kernel refuse a sandbox its own /proc. " +
			"With --security-opt apparmor=unconfined; or --privileged.",
		envKubernetes: "securityContext.procMount: Unmasked, which Kubernetes accepts only with hostUsers: false, " +
			"and BOXER_ID_BASE=32768 BOXER_ID_SPAN=16384 for the pod's 65,536 ids (deploy/kubernetes/deployment.yaml).",
	},
	probNamespaces: {
		envHost: "The kernel refused a sandbox's namespaces or its uid/gid map: boxer needs root with CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID, " +
			"user.max_user_namespaces above 0, and no seccomp filter or LSM profile on it that refuses clone or unshare.",
		envSystemd: "Keep CAP_SYS_ADMIN CAP_SETUID CAP_SETGID in CapabilityBoundingSet=, and set no RestrictNamespaces=, SystemCallFilter= or PrivateUsers= (deploy/systemd/boxer.service).",
		envDocker: "--security-opt seccomp=unconfined (Docker's default profile refuses new namespaces, mount and pivot_root unless the container has CAP_SYS_ADMIN, " +
			"and would stack on every sandbox's own filter) with --cap-add SYS_ADMIN; or --privileged.",
		envKubernetes: "securityContext: capabilities: {add: [SYS_ADMIN, SETUID, SETGID]}, appArmorProfile: {type: Unconfined}, " +
			"and a seccomp profile that allows clone, unshare, mount and pivot_root with CAP_SYS_ADMIN (RuntimeDefault does).",
	},
	probMountDenied: {
		envHost:       "A mount was refused: boxer needs CAP_SYS_ADMIN, and no seccomp filter on it that refuses mount, umount2 or pivot_root.",
		envSystemd:    "Keep CAP_SYS_ADMIN in CapabilityBoundingSet= and set no SystemCallFilter= (deploy/systemd/boxer.service).",
		envDocker:     "--cap-add SYS_ADMIN and --security-opt seccomp=unconfined, with --security-opt apparmor=unconfined; or --privileged.",
		envKubernetes: "securityContext: capabilities: {add: [SYS_ADMIN]}, appArmorProfile: {type: Unconfined} (deploy/kubernetes/deployment.yaml).",
	},
	probMountAccess: {
		envHost: "Either a sandbox's root (an unprivileged id) could not reach its mount point: every directory above --state-dir must be searchable by others; " +
			"or an AppArmor or SELinux profile on boxer denies mount.",
		envSystemd: "Keep RuntimeDirectoryMode=0711, BOXER_STATE_DIR=/run/boxer, and set no AppArmorProfile= or SELinuxContext= that denies mount (deploy/systemd/boxer.service).",
		envDocker: "--security-opt apparmor=unconfined: docker-default denies mount. Or, if --state-dir has a parent others cannot search: " +
			"chmod o+x those directories.",
		envKubernetes: "securityContext: appArmorProfile: {type: Unconfined} (the runtime's default profile denies mount). Or, if --state-dir " +
			"has a parent others cannot search: chmod o+x those directories.",
	},
	probIDs: {
		envHost: "boxer runs in a user namespace that does not map the sandboxes' ids (--id-base, --id-span): give them ids it maps, " +
			"as the FAIL line says, or run boxer in the initial user namespace.",
		envDocker: "The container has a user namespace (--userns, --userns-remap, rootless): give the sandboxes ids it maps, " +
			"e.g. --id-base 32768 --id-span 16384 when it maps 0-65535, or run the container without one.",
		envKubernetes: "With hostUsers: false the pod maps ids 0-65535: set BOXER_ID_BASE=32768 and BOXER_ID_SPAN=16384, " +
			"as deploy/kubernetes/deployment.yaml does.",
	},
	probIsolation: {
		envHost: "A protection was not in force inside the sandbox: do not serve from this host. It is a boxer bug or a kernel that ignores the setting; report it with this output.",
	},
	probPayments: {
		envHost: "Complete the x402 settings the FAIL line names (boxer serve -h lists them), or run without --payments x402.",
	},
	probFacilitator: {
		envHost: "boxer serve would start, unready (/readyz 503), and ask again until the facilitator answers. " +
			"Check --x402-facilitator-url, that this host reaches it, and --x402-facilitator-auth-header.",
		envKubernetes: "boxer serve would start, unready (/readyz 503), and ask again until the facilitator answers. " +
			"Check BOXER_X402_FACILITATOR_URL and that deploy/kubernetes/networkpolicy.yaml lets the pod reach the facilitator's address.",
	},
	probFacUnsupp: {
		envHost: "boxer serve refuses to start with this facilitator: point --x402-facilitator-url at one that settles x402 v2 exact payments " +
			"on --x402-network, or set --x402-network to one the FAIL line says it lists.",
	},
}

// fixFor is the text for problem p on env k (see fixes for the fallback).
func fixFor(p problem, k envKind) string {
	byEnv := fixes[p]
	if byEnv == nil {
		byEnv = fixes[probOther]
	}
	if s, ok := byEnv[k]; ok {
		return s
	}
	if k == envPodman {
		if s, ok := byEnv[envDocker]; ok {
			return s
		}
	}
	return byEnv[envHost]
}

// printFixes writes the block after the FAIL lines: for each failing
// check, the fix on env. Checks with the same problem share one entry.
func printFixes(w io.Writer, env runsOn, findings []finding) {
	var order []problem
	names := map[problem][]string{}
	for _, f := range findings {
		if f.OK {
			continue
		}
		p := f.problem
		if p == probNone {
			p = probOther
		}
		if _, seen := names[p]; !seen {
			order = append(order, p)
		}
		names[p] = append(names[p], f.Name)
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+env.header())
	for _, p := range order {
		if p == probCgroupDenied && env.userns {
			p = probCgroupNotHanded
		}
		for _, line := range wrap(strings.Join(names[p], ", ")+": "+fixFor(p, env.kind), 76) {
			fmt.Fprintln(w, line)
		}
	}
}

// wrap breaks s into lines of at most width characters (a longer word
// stays whole), the first indented two spaces, the rest four.
func wrap(s string, width int) []string {
	var lines []string
	line := "  "
	for _, word := range strings.Fields(s) {
		if len(line) > 4 && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = "    "
		}
		if line != "  " && line != "    " {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// cgroupProblem sorts a cgroup error: by its errno where it has one (the
// cgroup package's errors unwrap to it), else by the stable part of its
// text.
func cgroupProblem(err error) problem {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "systemd"):
		// Placement asked systemd for a scope and was refused; the error
		// may wrap an errno of D-Bus's.
		if strings.Contains(msg, "asked systemd") || strings.Contains(msg, "cgroup: systemd") || strings.Contains(msg, "connect to systemd") {
			return probCgroupScope
		}
	}
	switch {
	case errors.Is(err, syscall.EROFS):
		return probCgroupReadOnly
	case errors.Is(err, syscall.EBUSY):
		return probCgroupBusy
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return probCgroupDenied
	case strings.Contains(msg, "swap"):
		return probCgroupSwap
	case strings.Contains(msg, "did not delegate"), strings.Contains(msg, "controllers not mounted"),
		strings.Contains(msg, "controller is not enabled"), errors.Is(err, fs.ErrNotExist):
		return probCgroupDelegate
	}
	return probOther
}

// engineProblem sorts the error of sandbox.New, by the step its message
// starts with (see internal/sandbox/engine_linux.go).
func engineProblem(err error) problem {
	var se *sandbox.SetupError
	if errors.As(err, &se) {
		return setupProblem(se.Error())
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "state dir"):
		return probStateDir
	case strings.HasPrefix(msg, "default limits"):
		return probRlimit
	case strings.HasPrefix(msg, "cgroups"):
		return cgroupProblem(err)
	case strings.HasPrefix(msg, "python"):
		return probPython
	case strings.HasPrefix(msg, "ids "):
		return probIDs
	}
	return probOther
}

// selfTestProblem sorts a failed check of the sandbox self-test. Its
// first check, "sandbox starts", carries the setup error's text; every
// other check failing means a protection was not in force.
func selfTestProblem(c sandbox.Check) problem {
	switch {
	case c.OK:
		return probNone
	case c.Name == "sandbox starts":
		return setupProblem(c.Detail)
	case c.Name == "sandbox runs python":
		return probPython
	case c.Name == "sandbox reports":
		return probOther
	}
	return probIsolation
}

// setupProblem sorts a failure to start a sandbox by its step and errno,
// as the text reads: "<step>: <errno text>", where errno text is
// syscall.Errno's own (a SetupError's message, or the parent side's
// "start sandbox init: fork/exec /proc/self/exe: ..."). The self-test
// hands over only the text.
func setupProblem(detail string) problem {
	failed := func(step string, errno syscall.Errno) bool {
		return strings.Contains(detail, step+": "+errno.Error())
	}
	switch {
	case failed("mount /proc", syscall.EPERM):
		return probProcMount
	case failed("fork/exec /proc/self/exe", syscall.EPERM), failed("unshare cgroup namespace", syscall.EPERM):
		// clone refused the namespaces, or writing the uid/gid map was.
		return probNamespaces
	case failed("drop supplementary groups", syscall.EPERM):
		return probCaps
	case strings.HasSuffix(detail, syscall.EPERM.Error()):
		return probMountDenied
	case strings.HasSuffix(detail, syscall.EACCES.Error()):
		return probMountAccess
	}
	return probOther
}
