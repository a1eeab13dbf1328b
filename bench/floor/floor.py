"""What the kernel alone charges for one warm job, against a bare python3.

A warm job in boxer's pool is a fork of the zygote and, in the child, new
network (with loopback up), IPC, cgroup and mount namespaces with three
tmpfs mounts; boxer gives it a cgroup in every controller it uses and
removes it afterwards. This program times each of those operations on its
own, as machine CPU per operation (from /proc/stat, so that work the
kernel defers to its own threads, such as a network namespace's cleanup,
counts), and compares their sum with the CPU of a bare
`python3 -c 'print(2+2)'` measured in the same run. Their sum is a floor:
no Python code of boxer's, no copy-on-write faults of a job, no HTTP.

Run as root on an otherwise idle machine:

    python3 bench/floor/floor.py [-n 200] [--preimport numpy,pandas,matplotlib.pyplot]
"""

import argparse
import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys
import time

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWCGROUP = 0x20000, 0x8000000, 0x40000000, 0x2000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
libc = ctypes.CDLL(None, use_errno=True)


def busy_ms():
    """Milliseconds the machine's CPUs have spent not idle."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) * 1000 / os.sysconf("SC_CLK_TCK")


def check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0)))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    s.close()


def tmpfs_mounts():
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    for path in (b"/mnt", b"/media", b"/srv"):  # any three directories: the namespace dies with the child
        check(libc.mount(b"tmpfs", path, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=1m,nr_inodes=64"), "mount")


def per_fork(n, in_child):
    """Machine CPU per fork of this process whose child runs in_child and
    exits, waited for."""
    start = busy_ms()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                in_child()
            except BaseException as e:
                print("child:", e, file=sys.stderr)
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit("a child failed")
    return settle(start) / n


def settle(start):
    """Busy time since start, once deferred kernel work has run: the
    machine is idle again for a whole second."""
    time.sleep(0.2)
    while True:
        a = busy_ms()
        time.sleep(1)
        if busy_ms() - a < 30:
            return a - start


def cgroup_dirs():
    """One new directory per hierarchy boxer places a run in, under this
    process's own cgroup there, with the limits boxer writes."""
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                own[c] = path
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return [("/sys/fs/cgroup" + own[""], {"cpu.max": "50000 100000", "memory.max": str(512 << 20), "pids.max": "64"})]
    limits = {"cpu": {"cpu.cfs_quota_us": "50000"}, "memory": {"memory.limit_in_bytes": str(512 << 20)},
              "pids": {"pids.max": "64"}, "cpuacct": {}, "freezer": {}}
    dirs = {}  # co-mounted controllers (cpu,cpuacct) share one directory
    for c, lim in limits.items():
        dirs.setdefault(os.path.realpath("/sys/fs/cgroup/" + c) + own[c], {}).update(lim)
    return list(dirs.items())


def per_cgroup(n):
    """Machine CPU per run cgroup: made in every hierarchy, limited, a
    forked child moved in, the child gone, the cgroup removed. Less the
    fork, which is counted apart."""
    bases = cgroup_dirs()
    start = busy_ms()
    for i in range(n):
        dirs = []
        for base, lim in bases:
            d = "%s/floor-%d-%d" % (base, os.getpid(), i)
            os.mkdir(d)
            dirs.append(d)
            for name, value in lim.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(value)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.read(r, 1)
            os._exit(0)
        for d in dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        os.write(w, b"x")
        os.waitpid(pid, 0)
        os.close(r)
        os.close(w)
        for d in dirs:
            os.rmdir(d)
    return settle(start) / n


def bare(seconds):
    """Machine CPU per bare `python3 -c 'print(2+2)'`, started back to back
    on every CPU."""
    cpus = len(os.sched_getaffinity(0))
    count, start, deadline = 0, busy_ms(), time.monotonic() + seconds
    procs = []
    while time.monotonic() < deadline or procs:
        while len(procs) < cpus and time.monotonic() < deadline:
            procs.append(subprocess.Popen([sys.executable, "-c", "print(2+2)"], stdout=subprocess.DEVNULL))
        procs.pop(0).wait()
        count += 1
    return settle(start) / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="operations of each kind")
    ap.add_argument("--bare-seconds", type=float, default=10)
    ap.add_argument("--preimport", default="numpy,pandas,matplotlib.pyplot",
                    help="the pool's pre-imports, for the fork of a zygote that has them")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("floor: run as root (namespaces, mounts and cgroups)")

    base = bare(args.bare_seconds)
    fork = per_fork(args.n, lambda: None)
    rows = [
        ("network namespace, loopback up", per_fork(args.n, lambda: (check(libc.unshare(CLONE_NEWNET), "unshare"), lo_up())) - fork),
        ("IPC namespace", per_fork(args.n, lambda: check(libc.unshare(CLONE_NEWIPC), "unshare")) - fork),
        ("cgroup namespace", per_fork(args.n, lambda: check(libc.unshare(CLONE_NEWCGROUP), "unshare")) - fork),
        ("mount namespace, 3 tmpfs", per_fork(args.n, lambda: (check(libc.unshare(CLONE_NEWNS), "unshare"), tmpfs_mounts())) - fork),
        ("a run's cgroup, made and removed (%d directories)" % len(cgroup_dirs()), per_cgroup(args.n) - fork),
    ]
    kernel = sum(ms for _, ms in rows)
    pre = [m for m in args.preimport.split(",") if m]
    for m in pre:
        __import__(m)
    heavy = per_fork(args.n, lambda: None)

    print("machine CPU per operation, %d each (python %s, %d CPUs)" % (args.n, sys.version.split()[0], len(os.sched_getaffinity(0))))
    print("  %-56s %7.2f ms" % ("bare python3 -c 'print(2+2)' (the baseline)", base))
    forks = [("fork + exit of a bare interpreter", fork), ("fork + exit, with %s" % ", ".join(pre), heavy)]
    for name, ms in forks + rows:
        print("  %-56s %7.2f ms" % (name, ms))
    print()
    for name, fork_ms in (("bare zygote", fork), ("zygote with pre-imports", heavy)):
        floor = fork_ms + kernel
        print("floor per warm job, %-24s %7.2f ms = %.2fx bare; best possible rate %.2fx bare's (target 2x)"
              % (name + ":", floor, floor / base, base / floor))


if __name__ == "__main__":
    main()
