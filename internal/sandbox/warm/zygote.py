"""boxer's warm-pool zygote.

It runs as root of the pool sandbox's user namespace and forks one child per
future job. Each child gets its own PID, mount, IPC, network and cgroup
namespaces, fresh tmpfs mounts and /proc, its own uid, an empty capability
bounding set, no_new_privs and the sandbox's seccomp filter -- all before
any caller code exists -- and then waits for its job. The zygote itself
never runs caller code. The protocol is drawn and declared in protocol.go.

A child is two processes sharing one address space, as a cold sandbox is
boxer's pid 1 and the program: the forked one is pid 1 of its PID
namespace and ends up stopped, holding the memory, and the job runs in the
second, pid 2 (see _drop).
"""

import os
import sys

# What a fresh interpreter has loaded, the pre-imports' closure, and the
# zygote's own modules, in that order: the config is read with os alone so
# that nothing of the zygote's is mistaken for a pre-import, or the other
# way round. Children drop the zygote's own modules before running a job.
_BASELINE = set(sys.modules)
# The job's seccomp program and the seal's (see main), in hex; the /proc
# files a sandbox masks and the /proc directories it makes read-only, space
# separated (see _mount_proc); "listen" if the job's program is installed
# with a listener for boxer (see _drop); then one module per line, "+" before
# those whose first use the zygote learns (_SAMPLES).
_CONFIG = os.read(3, 1 << 20).decode().split("\n")
_LISTEN = _CONFIG[4] == "listen"

# The zygote stays one thread on one CPU. Every fork write-protects its
# pages, and every page it writes afterwards is a copy-on-write fault whose
# TLB flush must reach each CPU its address space is live on; threads (the
# pools numerical libraries start at import) and migrations make that every
# CPU. Children take the whole CPU set back once they have copied the pages
# they will write (see _child).
_CPUS = os.sched_getaffinity(0)
os.sched_setaffinity(0, (min(_CPUS),))
_POOLS = ("OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_ENV = {k: os.environ.get(k) for k in _POOLS}
os.environ.update(dict.fromkeys(_POOLS, "1"))
# What a pre-import loads on first use, not at import, is held ready with
# it: a run of pytest imports its built-in plugins (and with them pdb and
# xml.etree) as it configures itself. Best effort: another version may
# name other modules.
_FIRST_USE = {
    "pytest": lambda: ["_pytest." + p for p in sys.modules["_pytest.config"].default_plugins]
    + ["_pytest._argcomplete", "_pytest.config.compat", "pdb"],
    # The first figure loads the backend; the first savefig, PIL's image
    # plugins (PIL.Image.preinit).
    "matplotlib.pyplot": lambda: ["matplotlib.backends.backend_agg", "fractions", "PIL.BmpImagePlugin",
                                  "PIL.GifImagePlugin", "PIL.JpegImagePlugin", "PIL.PpmImagePlugin",
                                  "PIL.PngImagePlugin", "PIL.TiffImagePlugin"],
}
# A pre-import that is not installed is left out, not fatal: boxer serves
# with the modules there are and tells the operator what is missing.
# A module marked "+" also has its first use learned (see _learn).
_MISSING = []
_LEARN = []
for _name in _CONFIG[5:]:
    if _name.startswith("+"):
        _name = _name[1:]
        _LEARN.append(_name)
    if not _name:
        continue
    try:
        __import__(_name)
    except ImportError:
        _MISSING.append(_name)
        continue
    for _m in _FIRST_USE.get(_name, list)():
        try:
            __import__(_m)
        except ImportError:
            pass
for _k, _v in _ENV.items():  # a job sees the environment a cold run gets
    if _v is None:
        del os.environ[_k]
    else:
        os.environ[_k] = _v
_PRE = set(sys.modules) - _BASELINE

import atexit  # noqa: E402  (imports after the baseline on purpose)
import ctypes
import errno
import fcntl
import gc
import json
import resource
import select
# _signal, not signal: a fresh interpreter has it loaded, and signal's
# wrappers turn numbers into enums, writing a few dozen of the zygote's
# pages in every child that calls them.
import _signal
import socket
import struct
import time

import zygote_speed as speed  # the steps that make forks cheap, apart from those that isolate

_OWN = set(sys.modules) - _BASELINE - _PRE
# The pre-imports' top-level names, and the file suffixes the import system
# loads a module from: what _unshadow looks for among a job's files.
_PRE_TOP = frozenset(_m.partition(".")[0] for _m in _PRE)
_ext = sys.modules["_frozen_importlib_external"]
_SUFFIXES = frozenset(_ext.SOURCE_SUFFIXES + _ext.BYTECODE_SUFFIXES + _ext.EXTENSION_SUFFIXES)

# The functions that end a job's process, bound here: the job may replace
# os's, and the interpreter's own shutdown does not call them.
_exit, _kill, _getpid = os._exit, os.kill, os.getpid

_libc = ctypes.CDLL(None, use_errno=True)
# Looked up here, once: ctypes caches a function on first use, and a first
# use in a child would cost a dlsym, and the pages it writes, in every
# child.
for _name in ("unshare", "setns", "mount", "prctl", "pthread_self"):
    getattr(_libc, _name)
_libc.pthread_self.restype = ctypes.c_void_p
_libc.syscall.restype = ctypes.c_long
# syscall() reads every argument as a long: declared, so that none is
# passed as a 32-bit int with undefined upper bits.
_libc.syscall.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long, ctypes.c_ulong]

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWCGROUP = 0x20000, 0x8000000, 0x40000000, 0x2000000
CLONE_NEWPID, CLONE_VM, CLONE_VFORK = 0x20000000, 0x100, 0x4000
CLONE_CHILD_SETTID, CLONE_CHILD_CLEARTID = 0x01000000, 0x00200000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_RDONLY, MS_BIND, MS_REMOUNT, MS_REC, MS_PRIVATE = 2, 4, 8, 1, 0x1000, 0x20, 0x4000, 0x40000
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 24, 38, 22, 2
PR_GET_TID_ADDRESS = 40
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 8
# clone(2)'s, rseq(2)'s and seccomp(2)'s numbers, and clone's order of its
# last two arguments: child_tid then tls on x86-64, tls then child_tid on
# arm64 (CONFIG_CLONE_BACKWARDS).
_SYS_CLONE, _SYS_RSEQ, _SYS_SECCOMP, _TLS_BEFORE_CTID = {
    "x86_64": (56, 334, 317, False), "aarch64": (220, 293, 277, True)}[os.uname().machine]
RSEQ_FLAG_UNREGISTER, RSEQ_SIG = 1, {"x86_64": 0x53053053, "aarch64": 0xD428BC00}[os.uname().machine]
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
MAX_MSG = 1 << 20


def _check(ret, step):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (step, os.strerror(err)))


def _send(sock, obj):
    sock.send(json.dumps(obj).encode())


# The messages, as Msg and Job in protocol.go declare them;
# TestZygoteSpeaksTheProtocol holds this file to those structs. Fixed messages are fixed bytes: every page of json
# a child touches is a copy-on-write fault (see internal/pool's doc).
_HELLO, _GO, _READY = b'{"op":"hello"}', b'{"op":"go"}', b'{"op":"ready"}'
_FORM_FLAGS = {"file": [], "command": ["-c"], "module": ["-m"]}
_FORMS = frozenset(_FORM_FLAGS) | {"session"}


def _error(e):
    """The message a child that failed sends (OpError)."""
    return {"op": "error", "msg": "%s: %s" % (type(e).__name__, e)}


def _zygote_ready(preimported, missing, unlearned, huge, learned, pinned):
    """The zygote's OpReady."""
    return {"op": "ready", "preimported": preimported, "missing": missing, "unlearned": unlearned,
            "huge_text_bytes": huge, "learned_pages": learned, "pinned_pages": pinned}


def _job(msg):
    """The Job in msg, as Job.Marshal in protocol.go lays it out: form,
    target, argv0, the number of rlimits, each rlimit's resource, cur and
    max, then the args, each field ended by a NUL. A job's set-up fails on
    a message of any other shape. (Splitting bytes touches a fraction of
    the pages json.loads does, in the job's wall time.)"""
    f = msg.split(b"\0")
    try:
        n = int(f[3])
        end = 4 + 3 * n
        if n < 0 or len(f) <= end or f.pop() != b"":
            raise ValueError
        nums = [int(x) for x in f[4:end]]
        form = f[0].decode()
        if form not in _FORMS:
            raise ValueError
    except (IndexError, ValueError):
        raise ValueError("malformed job: %r" % msg[:200]) from None
    return {"form": form, "target": f[1].decode("utf-8", "surrogateescape"),
            "argv0": f[2].decode("utf-8", "surrogateescape"),
            "args": [a.decode("utf-8", "surrogateescape") for a in f[end:]],
            "rlimits": [tuple(nums[i:i + 3]) for i in range(0, 3 * n, 3)]}


def _marshal_job(form, target, argv0, args, rlimits):
    """A job's message as boxer makes it (Job.Marshal), for the zygote's
    own sample jobs (_learn, _rehearse)."""
    fields = [form, target, argv0, str(len(rlimits))] + [str(v) for r in rlimits for v in r] + list(args)
    return b"".join(x.encode("utf-8", "surrogateescape") + b"\0" for x in fields)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _fresh_net():
    """Gives this child a network namespace of its own, loopback up. Done
    before hello, while the child is still in the zygote's cgroup: the
    namespace's kernel memory is charged there, not to the slot's cgroup,
    because boxer may hold the namespace for the slot's next child (see
    heldNet in netns_linux.go), and a reused cgroup must start at zero."""
    _check(_libc.unshare(CLONE_NEWNET), "unshare a network namespace")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # datagram sockets are refused
    ifr = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0))
    up = struct.unpack("16sH14x", ifr)[1] | IFF_UP
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", up))
    s.close()


def _enter_net(fds):
    """Joins the network namespace boxer sent with go: an earlier child's,
    which its job left untouched (see heldNet in netns_linux.go)."""
    if len(fds) != 1:
        raise RuntimeError("go came with %d descriptors, want the network namespace" % len(fds))
    _check(_libc.setns(fds[0], CLONE_NEWNET), "join the network namespace")
    os.close(fds[0])


def _isolate(uid, disk_bytes, inodes):
    """Gives this child its own mount, IPC and cgroup namespaces and tmpfs
    mounts (as the user namespace's root), returns a directory fd of its
    work dir. Its network namespace it has already (_fresh_net or
    _enter_net)."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWCGROUP), "unshare")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    _mount_proc()
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    work = "size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d" % (disk_bytes, inodes, uid, uid)
    tmp = "size=%d,nr_inodes=%d,mode=1777" % (disk_bytes, inodes)
    for path, opts in (("/work", work), ("/tmp", tmp), ("/dev/shm", tmp)):
        _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, opts.encode()), "mount " + path)
    os.chdir("/work")
    return os.open("/work", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


# The /proc files a child masks and the directories it makes read-only
# (see _mount_proc), those of them this kernel has: what /proc shows
# outside a PID's directories is the kernel's, the same in every PID
# namespace, so it is looked up once here rather than in every child.
_PROC_MASKED = [("/proc/" + n).encode() for n in _CONFIG[2].split() if os.path.exists("/proc/" + n)]
_PROC_READ_ONLY = [("/proc/" + n).encode() for n in _CONFIG[3].split() if os.path.exists("/proc/" + n)]


def _mount_proc():
    """Mounts a /proc of this child's PID namespace over the zygote's, as
    boxer's nsinit mounts a cold sandbox's (mountProc): hidepid=2, the same
    files masked with /dev/null and the same directories read-only. Only a
    process of the namespace can mount its proc: the child, its pid 1."""
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _check(_libc.mount(b"proc", b"/proc", b"proc", flags, b"hidepid=2"), "mount /proc")
    for path in _PROC_MASKED:
        _check(_libc.mount(b"/dev/null", path, None, MS_BIND, None), "mask %s" % path)
    for path in _PROC_READ_ONLY:
        _check(_libc.mount(path, path, None, MS_BIND | MS_REC, None), "bind %s" % path)
        _check(_libc.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None), "remount %s" % path)


def _limit_zygote():
    """What every child must lack and the zygote can give up once, before
    the first fork: an empty capability bounding set (so no exec can ever
    grant a capability again), no supplementary groups and no_new_privs.
    The zygote keeps its permitted and effective capabilities, which the
    bounding set does not touch; a child loses them in _drop. Doing this
    here, not in each child, spares every job some forty calls and the
    pages they touch. There are no supplementary groups to drop: boxer
    starts every sandbox without any, and its user namespace denies
    setgroups."""
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if ctypes.get_errno() != errno.EINVAL:
        _check(-1, "drop capability %d" % cap)
    if os.getgroups():
        raise OSError(errno.EPERM, "supplementary groups %s: boxer should have started the zygote with none" % os.getgroups())
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _filter(prog):
    """The sock_fprog of a marshalled seccomp program, made once in the
    zygote so that a child only passes it to prctl; None without one."""
    if not prog:
        return None
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    fprog._buf = buf  # the program must live as long as the struct pointing at it
    return fprog


def _drop(uid, init_uid, fprog):
    """Leaves root for good and splits the child in two; returns in the
    second process only, which runs the job, with the descriptor of the
    seccomp filter's listener (-1 without one) for boxer.

    The forked process is pid 1 of the child's PID namespace. Like a cold
    sandbox's pid 1 it must be no process the job can see or signal, and
    the job must be pid 2, its child. And it keeps the address space alive:
    tearing down a forked interpreter's (the zygote's page tables, tens of
    thousands of entries with numpy and pandas pre-imported) takes
    milliseconds, which the kernel spends before the exit is reported; with
    pid 1 holding it, the job's exit is reported at once, and the teardown
    happens when boxer kills pid 1 after the answer.

    So pid 1 makes the job's process with clone(CLONE_VM | CLONE_VFORK),
    which shares its memory and suspends it until the job's process exits
    or execs; boxer then stops it (SIGSTOP, which a pid 1 takes only from
    outside its namespace) before the job arrives, so that when it wakes it
    stops before running one more instruction: the job may have rewritten
    the stack it would return on. Its credentials make it harmless even
    then: the real and saved uid init_uid and the effective uid the job's
    (no uid is 0, so the kernel clears every capability), which hides it
    from the job's /proc and refuses the job's signals, while the job's
    process may still take the job's uid for all three.

    pid 1 never reaps: the job's process stays a zombie, from which boxer
    reads its wait status (Warm.Run). So do processes the job orphans, which
    the kernel hands to pid 1: they hold their pids until the run ends,
    where a cold sandbox's pid 1 reaps them as they exit. (Ignoring SIGCHLD
    in pid 1 would have the kernel reap them, and also the job's process
    once it has exec'd, with its status: exec makes its exit signal
    SIGCHLD.)"""
    if uid <= 0 or init_uid <= 0 or uid == init_uid:  # a request garbled: root's would keep every capability
        raise ValueError("refusing uids %d and %d for a job" % (uid, init_uid))
    os.setresgid(uid, uid, uid)
    os.setresuid(init_uid, uid, init_uid)
    listener = _install(fprog, "seccomp", _LISTEN)
    _rseq(RSEQ_FLAG_UNREGISTER)
    # The kernel writes the new process's thread id into glibc's thread
    # descriptor (CLONE_CHILD_SETTID), as fork does: raise() and abort()
    # signal the thread named there. No exit signal: pid 1 is not woken.
    tail = (0, _TID_ADDRESS) if _TLS_BEFORE_CTID else (_TID_ADDRESS, 0)
    pid = _libc.syscall(_SYS_CLONE, CLONE_VM | CLONE_VFORK | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID, 0, 0, *tail)
    if pid < 0:
        _check(-1, "clone the job's process")
    if pid > 0:  # woken without boxer's stop: the job's process died in set-up
        _exit(70)
    _rseq(0)
    os.setsid()  # out of pid 1's session: SIGCONT is allowed within one
    os.setresuid(uid, uid, uid)
    # Every change of uid left the address space undumpable, which would
    # hide the job's own processes from it in /proc (hidepid).
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    return listener


def _rseq(flags):
    """Unregisters (RSEQ_FLAG_UNREGISTER) or registers glibc's restartable
    sequence area for this process. The job's process shares pid 1's memory
    and so its thread descriptor, where the kernel keeps the CPU number of
    the process registered: unregistered in pid 1 it reads as unknown, and
    registered again in the job's process it is the job's. x86-64 only,
    where the thread pointer is glibc's pthread_self(); elsewhere nothing
    is done, and glibc's sched_getcpu() reports pid 1's last CPU."""
    if _TLS_BEFORE_CTID or not _RSEQ_SIZE:
        return
    _libc.syscall(_SYS_RSEQ, _libc.pthread_self() + _RSEQ_OFFSET, _RSEQ_SIZE, flags, RSEQ_SIG, 0)


def _install(fprog, step, listen=False):
    """Stacks the seccomp program fprog (from _filter) on this process's;
    nothing if there is none. With listen, returns the descriptor of the
    filter's listener, which answers the calls the program sends to user
    space (seccomp.NotifyIP); else -1."""
    if fprog is None:
        return -1
    if not listen:
        _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), step)
        return -1
    fd = _libc.syscall(_SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, ctypes.addressof(fprog), 0, 0)
    _check(0 if fd >= 0 else -1, step)
    return fd


class _Forked(BaseException):
    """Raised in a freshly forked child with _child's arguments, caught at
    the top (_start): unwinding the stack drops the zygote's frames, so that
    nothing of its loop (its children, its requests) is left for the job to
    walk up to with sys._getframe."""


def _child(req, job_fd, fprog, drop):
    """Runs in the forked child, req being the unpacked _FORK_REQ without
    its id. Never returns."""
    try:
        # The pages this child will write (see _learn) are its own
        # already where the zygote pinned them: the fork copied them.
        # Elsewhere they are copied in one batch first: on the zygote's
        # CPU, so that no fault's TLB flush has another CPU to reach, and
        # at the zygote's CPU weight. Either way the copies are charged to
        # the zygote's cgroup (boxer moves the child into its own only
        # later, and a charge stays where it was made), which boxer sizes
        # for them. Made after "go" instead, in the child's cgroup and at
        # its background weight, they cost 10 to 15% of the rate under
        # load, at the same CPU per job.
        if speed.UNPINNED:
            speed.pretouch()
        os.sched_setaffinity(0, _CPUS)
        # A session (and process group) of its own: sharing the zygote's
        # would let a job orphan that group and have the kernel SIGHUP the
        # zygote and every other job in it, and would let a job SIGCONT
        # them.
        os.setsid()
        _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)
        uid, init_uid, disk_bytes, inodes, fresh_net = req
        if fresh_net:
            _fresh_net()
        CTRL.detach()  # fd 3 becomes the job socket; the control socket is the zygote's
        null = os.open("/dev/null", os.O_RDWR)
        # The job's stdin, stdout and stderr come with the job, so that pid
        # 1 never holds them; until then, /dev/null.
        for fd, target in ((null, 0), (null, 1), (null, 2), (job_fd, 3)):
            os.dup2(fd, target)
        os.closerange(4, 1 << 20)
        sock = socket.socket(fileno=3)
        # boxer reads our pid, as its own namespace numbers it, from the
        # credentials the kernel attaches to this message (SO_PASSCRED).
        # Fixed messages are fixed bytes: every page of json a child touches
        # is a copy-on-write fault (see internal/pool's doc).
        sock.send(_HELLO)
        # "go": boxer has moved us into our cgroup. It comes with a
        # network namespace to join when the request asked for none.
        go, fds, _, _ = socket.recv_fds(sock, 64, 1)
        if not go:
            os._exit(0)
        if not fresh_net:
            _enter_net(fds)
        elif fds:
            raise RuntimeError("go came with a network namespace, and this child has its own")
        wfd = _isolate(uid, disk_bytes, inodes)
        listener = _drop(uid, init_uid, fprog)
        _fresh_child()
        # Before ready: from ready on the child is idle, and boxer reads
        # the CPU its cgroup has used as the job's starting point.
        _rehearse()
        # From the job's process: boxer learns its pid from the
        # credentials. The listener goes to boxer alone: a job holding it
        # could answer its own calls.
        socket.send_fds(sock, [_READY], [wfd] if listener < 0 else [wfd, listener])
        os.close(wfd)
        if listener >= 0:
            os.close(listener)
        msg, stdio, _, _ = socket.recv_fds(sock, MAX_MSG, 3)
        if not msg or len(stdio) != 3:
            os._exit(0)  # discarded unused
        job = _job(msg)
        if job["form"] == "session":
            # The socket carries the session's cells (zygote_session.py),
            # which caller code can reach: boxer trusts nothing it reads
            # there. Imported here, not in the zygote, and dropped from
            # sys.modules: a caller's own module of that name is its own.
            import zygote_session as kernel
            sys.modules.pop("zygote_session", None)
        else:
            sock.close()  # caller code gets no channel to boxer
        for fd, target in zip(stdio, (0, 1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        for r, cur, max_ in job["rlimits"]:
            resource.setrlimit(r, (cur, max_))
        for name in drop:
            sys.modules.pop(name, None)
    except BaseException as e:  # setup failed: tell boxer, never run the job
        try:
            _send(socket.socket(fileno=3), _error(e))
        finally:
            os._exit(70)
    if job["form"] == "session":  # as `python` with no script would start
        sys.orig_argv, sys.argv, sys.path[0] = [job["argv0"]], [""], ""
        sys.executable = _which(job["argv0"])
        _unshadow("")
        kernel.serve(sock, _main_module(), _exit_code)
    _run(job)


def _rehearse():
    """Walks the path a job takes (decoding, compiling, running, printing)
    once on dummy values, so that what a freshly forked interpreter pays
    the first time it goes that way (the copy-on-write faults _learn did
    not foresee, and on this VM the first touch of every page) is paid
    before the child is ready, not while the job runs."""
    import io

    _job(_marshal_job("file", "main.py", "python", [], [(0, 0, 0)]))
    scratch = {"__builtins__": __builtins__}
    exec(compile("x = [i for i in range(8)]\nprint(x, file=out)", "<boxer>", "exec"), dict(scratch, out=io.StringIO()))
    os.path.abspath("main.py")
    _which("python")


_ON_FINALIZE = None  # set only in _learn's throwaway child


# What _learn runs in its throwaway children, as (files, form, target,
# args): print(2+2) in every zygote, and in a zygote told to learn it
# (Config.Learn in protocol.go), the first use of a pre-import that writes
# far more of the zygote's pages than print(2+2): a warm child's first
# pytest.main wrote 2,270 pages where print(2+2) writes some 700, and took
# 140 ms of wall time where a second run in the same child took 35. Keys
# as warm.Samples lists them.
_SAMPLE = ({"main.py": "print(2+2)\n"}, "file", "main.py", [])
_SAMPLES = {
    "pytest": ({"helper.py": "def add(a, b):\n    return a + b\n",
                "test_sample.py": "import pytest\nfrom helper import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                "@pytest.mark.parametrize('a,b', [(1, 2), (2, 1)])\ndef test_table(a, b):\n    assert add(a, b) == 3\n"},
               "module", "pytest", ["test_sample.py"]),
    "matplotlib.pyplot": ({"main.py": "import matplotlib.pyplot as plt\n\nplt.plot([1, 3, 2, 4])\nplt.title('t')\n"
                           "plt.savefig('chart.png')\nprint('saved')\n"}, "file", "main.py", []),
}


def _learn(fprog, drop, sample=_SAMPLE):
    """Runs sample (print(2+2) as `python main.py` unless told otherwise,
    see _SAMPLES) in a throwaway child that takes
    a warm child's whole path (_child: its set-up, the hand-over of the job
    and the job itself), with the zygote playing boxer's part, and returns
    the ranges of the zygote's memory that the child wrote from its fork to
    the job's end: the pages it made its own copy of (pagemap's exclusive
    bit), within the zygote's own writable mappings. The zygote's own
    writes in that time show too (a page the zygote copies is the child's
    alone from then on), and are welcome: they are the pages its loop
    writes after each fork.

    Those are the pages every warm child would copy on its first write to
    each: pin has the kernel copy them at each fork instead, or each child
    copies them in one batch first thing (speed.pretouch). On this VM a write
    fault costs about 17 us idle and more under load (internal/pool's doc).
    Learning the sample's whole life rather than its job alone took a
    child's CPU per print(2+2) under load down by a third. A sample that
    skipped the hand-over (hello, go, _drop, the job message)
    left 34 of a child's faults and 3 of the zygote's per job unlearned;
    learning them too cut the machine's CPU per warm print(2+2) under load
    by 8%."""
    maps = speed.writable_maps()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    report_r, report_w = os.pipe()
    pid = _fork()
    if pid == 0:
        def report():  # last, on stderr (report_w): a count, the ranges
            flat = ()
            try:
                flat = tuple(n for run in speed.ranges(speed.exclusive(maps)) for n in run)
            except Exception:
                pass  # nothing learned: children then copy nothing ahead
            out = _REPORT + struct.pack("%dQ" % (1 + len(flat)), len(flat) // 2, *flat)
            while out:
                out = out[os.write(2, out):]

        global _ON_FINALIZE
        _ON_FINALIZE = report
        uid = _job_uid()
        raise _Forked((uid, uid + 1, 1 << 20, 16, 1), theirs.detach(), fprog, drop)  # a child's path, to _start
    theirs.close()
    ours.settimeout(30)  # the sample's set-up takes milliseconds
    null = os.open("/dev/null", os.O_RDWR)
    fds = []
    # Whatever fails, the sample child goes (its pid 1, and with it its
    # PID namespace) and no descriptor stays open: a sample's failure
    # leaves the zygote as it was (main goes on without it).
    try:
        try:
            said = ours.recv(MAX_MSG)
            if said != _HELLO:
                raise RuntimeError("the sample child said %r, not hello" % said)
            ours.send(_GO)
            said, fds, _, _ = socket.recv_fds(ours, MAX_MSG, 2)  # ready, with the work dir (and the listener)
            if len(fds) != 1 + _LISTEN:
                raise RuntimeError("the sample child's set-up failed: %r" % said)
            os.kill(pid, _signal.SIGSTOP)  # its pid 1, as boxer stops a child's
            files, form, target, args = sample
            for name, text in files.items():
                with open(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fds[0]), "w") as f:
                    f.write(text)
            limits = [(r, *resource.getrlimit(r)) for r in
                      (resource.RLIMIT_CORE, resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE, resource.RLIMIT_STACK)]
            socket.send_fds(ours, [_marshal_job(form, target, "python", args, limits)], [null, null, report_w])
        finally:
            for fd in [null, report_w] + fds:  # the work dir, and the listener (the samples make no socket)
                os.close(fd)
            ours.close()
        data = _read_all(report_r, _SAMPLE_TIMEOUT)
    finally:
        os.close(report_r)
        os.kill(pid, _signal.SIGKILL)
        os.waitpid(pid, 0)
    at = data.rfind(_REPORT)
    if at < 0:  # the job did not run to its end: neither would any child's
        raise RuntimeError("the sample child's job failed: %r" % data[-2000:])
    body = data[at + len(_REPORT):]
    if len(body) < 8 or len(body) != 8 + 16 * struct.unpack_from("Q", body)[0]:
        raise RuntimeError("the sample child's report is cut short: %d bytes" % len(body))
    count, = struct.unpack_from("Q", body)
    flat = struct.unpack_from("%dQ" % (2 * count), body, 8)
    return tuple(zip(flat[0::2], flat[1::2]))


_REPORT = b"\0boxer-learned\0"  # heads the sample's report, after anything else it wrote to stderr
# How long a sample's job may run: a chart's takes under a second here,
# some twenty under TCG (test/guest).
_SAMPLE_TIMEOUT = 60


def _read_all(fd, timeout):
    """What fd gives until its end, or RuntimeError after timeout seconds."""
    data, deadline = b"", time.monotonic() + timeout
    with select.epoll() as poller:  # as _serve waits: the zygote's seccomp policy allows it
        poller.register(fd, select.EPOLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left):
                raise RuntimeError("the sample child's job ran past %g s" % timeout)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return data
            data += chunk


def _fork():
    """os.fork, the child the first process, pid 1, of a new PID namespace.
    unshare(CLONE_NEWPID) makes the namespace the zygote's next child goes
    into; the kernel allows it only while that is still the zygote's own,
    so the zygote goes back to its own first."""
    _check(_libc.setns(_OWN_PIDNS, CLONE_NEWPID), "setns to the zygote's PID namespace")
    _check(_libc.unshare(CLONE_NEWPID), "unshare a PID namespace")
    return os.fork()


def _job_uid():
    """The first uid of the user namespace's range for jobs (UID in
    runtime.go): the second line of uid_map, the first mapping root."""
    with open("/proc/self/uid_map") as f:
        return next(int(line.split()[0]) for line in f if line.split()[0] != "0")


def _unshadow(path0):
    """Drops from sys.modules each pre-import that a module of the job's
    own shadows, so that the job imports its own, as a fresh interpreter
    finds it first on sys.path: NAME.py (or another suffix the import
    system loads), or a package NAME/ with an __init__, in path0, the
    directory sys.path[0] names. A pre-import that imported the shadowed
    module keeps the one it has."""
    try:
        entries = os.listdir(path0 or ".")
    except OSError:
        return
    for entry in entries:
        name, dot, rest = entry.partition(".")
        if name not in _PRE_TOP:
            continue
        if dot:
            shadows = "." + rest in _SUFFIXES
        else:
            shadows = any(os.path.isfile(os.path.join(path0, entry, "__init__" + s)) for s in _SUFFIXES)
        if shadows:
            for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                del sys.modules[m]


def _run(job):
    """Runs the job as `python FILE`, `python -c CODE` or `python -m MOD`
    would, then ends the process with the interpreter's exit code."""
    form, target, args = job["form"], job["target"], job["args"]
    # The command as the job gave it: the message carries the target once.
    sys.orig_argv = [job["argv0"]] + _FORM_FLAGS[form] + [target] + args
    sys.executable = _which(sys.orig_argv[0])
    main = _main_module()
    code, uncaught = 0, None
    try:
        if form == "module":
            sys.argv = [target] + args
            sys.path[0] = os.getcwd()
            _unshadow(sys.path[0])
            import runpy
            runpy._run_module_as_main(target)
        else:
            if form == "file":
                path = os.path.abspath(target)
                sys.argv = [target] + args
                sys.path[0] = os.path.dirname(path)
                main.__file__, main.__cached__ = path, None
                main.__loader__ = type(__loader__)("__main__", path)
                try:
                    with open(target, "rb") as f:
                        src = f.read()
                except OSError as e:
                    print("%s: can't open file %r: [Errno %d] %s" % (sys.orig_argv[0], path, e.errno, e.strerror),
                          file=sys.stderr)
                    _finalize(2)
            else:
                path, src = "<string>", target
                sys.argv = ["-c"] + args
                sys.path[0] = ""
            _unshadow(sys.path[0])
            exec(compile(src, path, "exec"), main.__dict__)
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException as e:
        # Drop this frame: a traceback shows only the caller's code (and
        # runpy's, as `python -m` does). A SyntaxError from compile() has no
        # frame left and prints as the interpreter prints it. The hook
        # prints e.__traceback__, so the frame is cut from e itself.
        e.__traceback__ = e.__traceback__.tb_next
        uncaught = e
    if uncaught is not None:  # reported outside the except: no exception is being handled
        code = _uncaught(uncaught)
    _finalize(code)


def _main_module():
    """A __main__ like the one the interpreter makes before running
    anything, in sys.modules."""
    main = type(sys)("__main__")
    main.__dict__.update(
        __builtins__=__builtins__, __annotations__={}, __doc__=None, __package__=None,
        __spec__=None, __loader__=sys.modules["_frozen_importlib"].BuiltinImporter)
    sys.modules["__main__"] = main
    return main


def _uncaught(e):
    """Reports an uncaught exception as the interpreter does and returns
    the exit code: sys.excepthook's output, and if the hook itself raises,
    both exceptions; a SystemExit from the hook ends the process with its
    code instead."""
    try:
        sys.excepthook(type(e), e, e.__traceback__)
    except SystemExit as x:
        return _exit_code(x)
    except BaseException as x:
        x.__traceback__ = x.__traceback__.tb_next  # this frame
        print("Error in sys.excepthook:", file=sys.stderr)
        sys.__excepthook__(type(x), x, x.__traceback__)
        print("\nOriginal exception was:", file=sys.stderr)
        sys.__excepthook__(type(e), e, e.__traceback__)
    return -2 if isinstance(e, KeyboardInterrupt) else 1


def _which(argv0):
    """sys.executable as the interpreter derives it from argv[0]."""
    if "/" in argv0:
        return os.path.abspath(argv0)
    p = _ON_PATH.get(argv0)
    return p if p is not None else _search_path(argv0)


def _search_path(name):
    """The first executable file called name in a directory on PATH, or ""."""
    for d in os.environ.get("PATH", "").split(":"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return ""


# The usual names' answers, found once: a job's PATH is the zygote's, and
# the directories on it are the read-only system's. (A miss costs a stat,
# and an exception, a directory.)
_ON_PATH = {n: _search_path(n) for n in ("python", "python3", "python%d.%d" % sys.version_info[:2])}


def _exit_code(e):
    """The exit code the interpreter gives an uncaught SystemExit."""
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        print(c, file=sys.stderr)
    except Exception:
        pass
    return 1


def _finalize(code):
    """Shuts down as the interpreter would (threads, atexit, flush) but
    skips tearing down every module: the process ends right after."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except Exception:
            code = 120 if code == 0 else code
    if _ON_FINALIZE is not None:
        _ON_FINALIZE()
    if code == -2:  # KeyboardInterrupt: die of SIGINT, as the interpreter does
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        _kill(_getpid(), _signal.SIGINT)
    _exit(code)


def _fresh_child():
    """Gives a forked child what a fresh interpreter has of its own: random
    state (see _reseed) and the main thread's native id, which CPython 3.11
    does not renew after os.fork. Called in the child, not registered as an
    at-fork hook: a job's own os.fork must do what it does in a cold run."""
    _reseed()
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading.main_thread(), "_set_native_id"):
        threading.main_thread()._set_native_id()


def _reseed():
    """Gives each child fresh random state where a pre-import keeps its own
    (Python's random module reseeds itself after fork; numpy's legacy
    global generator does not): two jobs must not share a stream. The whole
    MT19937 key comes from the kernel, as numpy.random.seed() would take it,
    through a path that touches a third of the pages seed() does."""
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.set_state(("MT19937", np.frombuffer(os.urandom(624 * 4), np.uint32), 624, 0, 0.0))


def main():
    _signal.signal(_signal.SIGHUP, _signal.SIG_IGN)
    drop = sorted(_OWN)
    fprog = _filter(bytes.fromhex(_CONFIG[0]))
    _limit_zygote()
    huge = speed.text_on_huge_pages()
    gc.collect()
    gc.freeze()  # keep the collector off the shared pages in every child
    learned = _learn(fprog, drop)
    unlearned = []
    for name in _LEARN:
        if name in _MISSING:
            continue
        try:
            learned = speed.union(learned, _learn(fprog, drop, _SAMPLES[name]))
        except Exception as e:  # another version's first use, say: its jobs run, and fault as before
            unlearned.append("%s: %s" % (name, e))
    pinned = speed.pin(learned)
    # Nothing needs io_uring from here on: the seal shuts it for the zygote
    # and every child (see seccomp.ZygoteSealed).
    _install(_filter(bytes.fromhex(_CONFIG[1])), "seal io_uring")
    speed.plan_copies(learned, pinned)
    _send(CTRL, _zygote_ready(sorted(_PRE), _MISSING, unlearned, huge, speed.pages(learned), speed.pages(pinned)))
    _serve(fprog, drop)


# A fork request: six little-endian int64s, as ForkRequest in protocol.go
# marshals them: the request's id, the job's uid, its pid 1's uid (see
# _drop), its tmpfs size in bytes and in inodes, and 1 if the child makes
# its own network namespace (0: boxer sends one with go). Replies are
# formatted bytes, not json.dumps.
_FORK_REQ = struct.Struct("<6q")
_FORKED = b'{"op":"forked","pid":%d,"id":%d}'
_EXITED = b'{"op":"exited","pid":%d,"status":%d}'
_REFUSED = b'{"op":"error","msg":"malformed fork request: %d bytes, %d descriptors, flags %#x"}'
_FORK_FAILED = b'{"op":"error","id":%d,"msg":"fork failed: errno %d"}'


def _serve(fprog, drop):
    """The zygote's loop: one fork per request, one report per exit. It is
    written to touch few objects: after each fork every page it writes is
    a copy-on-write fault, and CPython writes a reference count on every
    object it loads. So a request lands in one reused buffer, the
    descriptors to wait on stay registered with one epoll, no JSON is
    parsed or made, and the functions the loop calls are bound once. (A
    loop built on select, recv_fds and json took 134 faults per job; this
    one, 69.) A request that is not exactly one _FORK_REQ and one
    descriptor (a bug of boxer's: nothing else can write to the control
    socket) is refused with an error reply, and the zygote goes on."""
    buf = bytearray(_FORK_REQ.size)
    bufs, size, unpack = [buf], _FORK_REQ.size, _FORK_REQ.unpack
    space = socket.CMSG_SPACE(4)
    ctrl = CTRL.fileno()
    recv, send = CTRL.recvmsg_into, CTRL.send
    fork, close, pidfd_open, waitpid = _fork, os.close, os.pidfd_open, os.waitpid
    rights, truncated = (socket.SOL_SOCKET, socket.SCM_RIGHTS), socket.MSG_TRUNC | socket.MSG_CTRUNC
    poller = select.epoll()
    poller.register(ctrl, select.EPOLLIN)
    register, unregister, poll = poller.register, poller.unregister, poller.poll
    children = {}  # pidfd -> pid
    while True:
        forking = False
        for fd, _ in poll():
            if fd == ctrl:
                forking = True
            else:  # exits are reported before the next fork
                pid = children.pop(fd)
                unregister(fd)
                close(fd)
                _, status = waitpid(pid, 0)
                send(_EXITED % (pid, status))
        if forking:
            n, anc, flags, _ = recv(bufs, space)
            if n == size and len(anc) == 1 and anc[0][:2] == rights and len(anc[0][2]) == 4 and not flags & truncated:
                req = unpack(buf)
                job_fd = int.from_bytes(anc[0][2], sys.byteorder)
                try:
                    pid = fork()
                except OSError as e:  # out of memory for the copies fork makes (pin), or of pids
                    close(job_fd)
                    send(_FORK_FAILED % (req[0], e.errno))
                else:
                    if pid == 0:  # the last request stays in buf: wipe it with the rest
                        children.clear()
                        buf[:] = bytes(size)
                        raise _Forked(req[1:], job_fd, fprog, drop)
                    close(job_fd)
                    pidfd = pidfd_open(pid)
                    children[pidfd] = pid
                    register(pidfd, select.EPOLLIN)
                    send(_FORKED % (pid, req[0]))
            elif n == 0 and not anc:
                os._exit(0)  # boxer closed the control socket
            else:
                fds = _rights(anc)
                for fd in fds:
                    close(fd)
                send(_REFUSED % (n, len(fds), flags))
        _reap_strays(poller, children)


def _rights(anc):
    """The descriptors an SCM_RIGHTS message carried."""
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(int.from_bytes(data[i:i + 4], sys.byteorder) for i in range(0, len(data) - 3, 4))
    return fds


def _reap_strays(poller, children):
    """Reaps children the zygote did not fork knowingly (a job can make
    processes of its own the zygote's children), so that no zombie holds a
    pid, a cgroup or a slot's process count."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for fd, p in children.items():
            if p == pid:  # reaped before its pidfd was read: report it now
                del children[fd]
                poller.unregister(fd)
                os.close(fd)
                CTRL.send(_EXITED % (pid, status))
                break


CTRL = socket.socket(fileno=3)
# The zygote's own PID namespace, to come back to before each child's (see
# _fork), and the address of the thread id in glibc's thread descriptor,
# which a child's pid 1 has the kernel fill in for the job's process (see
# _drop): the one glibc's fork set up, and the same in every child.
_OWN_PIDNS = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
_tid = ctypes.c_void_p()
_check(_libc.prctl(PR_GET_TID_ADDRESS, ctypes.byref(_tid), 0, 0, 0), "PR_GET_TID_ADDRESS")
_TID_ADDRESS = _tid.value
_RSEQ_OFFSET = ctypes.c_long.in_dll(_libc, "__rseq_offset").value if hasattr(_libc, "__rseq_offset") else 0
_RSEQ_SIZE = ctypes.c_uint.in_dll(_libc, "__rseq_size").value if hasattr(_libc, "__rseq_size") else 0


def _start():
    """Runs the zygote; returns in each child, with _child's arguments."""
    try:
        main()
    except _Forked as forked:
        return forked.args


if __name__ == "__main__":
    _child(*_start())
