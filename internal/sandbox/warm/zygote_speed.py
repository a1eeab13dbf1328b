"""The warm-pool zygote's speed steps: how it makes forks and children
cheap. Nothing here isolates anything or runs a job; zygote.py does that,
and calls these:

  - text_on_huge_pages moves the interpreter's code onto huge pages;
  - pin has the kernel copy, at each fork, the pages every child writes
    (learned by zygote.py's _learn through exclusive), and pretouch copies
    in one batch those it could not pin (plan_copies says which);
  - the rest reads /proc/self/maps, smaps and pagemap for them.

Each step only changes how memory is shared, never a byte of it, and each
one that fails leaves things as they were: a child is then slower, never
different. It is imported by zygote.py before the zygote records its own
modules, so children drop it with them before a job runs.
"""

import ctypes
import errno
import mmap
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, step):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (step, os.strerror(err)))


# The zygote's pages a child writes in its life (see _learn) that are not
# pinned (see pin), which each child copies itself (see pretouch), as
# (start, length) ranges and as iovec arrays of at most UIO_MAXIOV entries.
UNPINNED = ()
UNPINNED_IOV = ()
MADV_POPULATE_WRITE = 23
UIO_MAXIOV = 1024
# System calls and io_uring_register opcodes (include/uapi/linux/io_uring.h),
# the same on x86-64 and arm64.
SYS_IO_URING_SETUP = 425
SYS_IO_URING_REGISTER = 427
SYS_PROCESS_MADVISE = 440
IORING_REGISTER_BUFFERS = 0
IORING_REGISTER_RING_FDS = 20
IO_URING_PARAMS_SIZE = 120  # sizeof(struct io_uring_params)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long
# syscall() reads every argument as a long: declared, so that none is
# passed as a 32-bit int with undefined upper bits.
_libc.syscall.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long, ctypes.c_ulong]


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _RsrcUpdate(ctypes.Structure):  # struct io_uring_rsrc_update
    _fields_ = [("offset", ctypes.c_uint32), ("resv", ctypes.c_uint32), ("data", ctypes.c_uint64)]


_IOVEC_SIZE = ctypes.sizeof(_Iovec)


def iovecs(ranges):
    """ranges as ctypes iovec arrays, each short enough for one call, with
    their total length and the length of each: (count, total, lengths,
    array)."""
    out = []
    for i in range(0, len(ranges), UIO_MAXIOV):
        part = ranges[i:i + UIO_MAXIOV]
        lengths = tuple(n for _, n in part)
        out.append((len(part), sum(lengths), lengths, (_Iovec * len(part))(*part)))
    return tuple(out)


def pin(ranges):
    """Pins ranges of the zygote's memory for its whole life, and returns
    the ranges it pinned: all of them cut to the private writable mappings
    that hold no transparent huge page, those of them in anonymous mappings
    alone where the kernel will not pin a file's pages, or none.

    The kernel never shares a page that may be pinned (for DMA, say)
    copy-on-write: a fork gives the child its own copy of it at once and
    leaves the parent's writable (Linux 5.9 on). So with the learned pages
    pinned, no child takes a fault or a TLB flush to copy them, nor does
    the zygote for the pages its loop writes after each fork: the copies
    are made inside fork, in one pass. In the pool under load this cut the
    machine's CPU per warm print(2+2) by a fifth against pretouch's batch
    (internal/pool's doc).

    A page of a larger folio is left out: pinned, it would have fork copy
    the whole folio for every child. Mappings holding huge pages are
    skipped, and if the kernel accounts more pinned memory than the pages
    asked for (a folio of some smaller multi-size THP, which no mapping
    shows), nothing is pinned.

    io_uring's buffer registration is the one way an unprivileged process
    has to pin its memory for long. The ring does no I/O: the zygote's
    seccomp policy refuses io_uring_enter and every register opcode but
    the two used here, and main seals io_uring off altogether once this
    has run. The ring is registered as a ring of this task's own and its
    descriptor closed: a fork copies neither that registration nor a
    descriptor the zygote no longer has, so no child ever holds the ring,
    which lives as long as the zygote does. The pages count against
    RLIMIT_MEMLOCK. Where io_uring is missing or disabled, the limit too
    low, or the kernel older than 5.18 (registered rings), nothing stays
    pinned, and children copy every learned page through pretouch."""
    anon, backed = _pinnable(ranges)
    before = _vm_pin_kib()
    params = (ctypes.c_char * IO_URING_PARAMS_SIZE)()
    ring = _libc.syscall(SYS_IO_URING_SETUP, 1, ctypes.addressof(params), 0, 0, 0)
    if ring < 0:
        return ()
    try:
        # Kernels before 6.5 or so refuse a file's pages (the interpreter's
        # and libraries' data): then the anonymous ones alone are tried.
        for pinned in (sorted(anon + backed), anon if backed else []):
            if not pinned:
                continue
            iov = (_Iovec * len(pinned))(*pinned)
            if _libc.syscall(SYS_IO_URING_REGISTER, ring, IORING_REGISTER_BUFFERS, ctypes.addressof(iov), len(pinned), 0) == 0:
                break
        else:
            return ()
        if (_vm_pin_kib() - before) * 1024 != sum(n for _, n in pinned):
            return ()  # a larger folio: the close below unpins
        update = _RsrcUpdate(offset=0xFFFFFFFF)  # any free slot
        update.data = ring
        if _libc.syscall(SYS_IO_URING_REGISTER, ring, IORING_REGISTER_RING_FDS, ctypes.addressof(update), 1, 0) != 1:
            return ()  # the close below frees the ring, and unpins the pages
    finally:
        os.close(ring)
    return tuple(pinned)


def _pinnable(ranges):
    """ranges cut to the private writable mappings holding no transparent
    huge page, and split at their ends: (in anonymous mappings, in a
    file's)."""
    huge = huge_mappings()
    anon, backed = [], []
    for start, end, perms, path in _maps():
        # Overlap, not equality: a mapping may have grown between the reads.
        if perms[1] != "w" or perms[3] != "p" or any(lo < end and start < hi for lo, hi in huge):
            continue
        for first, n in ranges:
            lo, hi = max(first, start), min(first + n, end)
            if lo < hi:
                (backed if path.startswith("/") else anon).append((lo, hi - lo))
    return anon, backed


def huge_mappings():
    """This process's mappings that hold transparent huge pages, as (start,
    end)."""
    out, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            key = line.split(None, 1)[0]
            if not key.endswith(":"):
                cur = tuple(int(x, 16) for x in key.split("-"))
            elif key == "AnonHugePages:" and line.split()[1] != "0":
                out.append(cur)
    return out


def _vm_pin_kib():
    return _kib("/proc/self/status", "VmPin:")


def unpinned(learned, pinned):
    """The pages of learned that pinned (pieces of them, see _pinnable)
    does not cover, as ranges."""
    return tuple(ranges(page_set(learned) - page_set(pinned)))


def pages(ranges):
    return sum(n for _, n in ranges) // mmap.PAGESIZE


def pretouch():
    """Takes the copy-on-write faults a child's life would take:
    MADV_POPULATE_WRITE breaks the sharing of each learned page as a write
    would, without changing a byte. All ranges go in one process_madvise
    call (per UIO_MAXIOV of them) where the kernel takes that advice for
    the caller itself (Linux 6.13 on); elsewhere, one madvise per range.
    A range no longer mapped (the zygote's heap can shrink after _learn)
    is stepped over."""
    try:
        pidfd = os.pidfd_open(os.getpid())
    except OSError:
        pidfd = -1
    try:
        if pidfd >= 0 and _populate(pidfd):
            return
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    for start, length in UNPINNED:
        _libc.madvise(start, length, MADV_POPULATE_WRITE)


def _populate(pidfd):
    """Populates the learned ranges through process_madvise. A call stops
    at the first range it cannot populate, and returns the bytes done
    before it (or fails, if it is the first): that range is stepped over
    and the call made again for the rest. False if the kernel refuses the
    call outright."""
    for count, total, lengths, iov in UNPINNED_IOV:
        i, left = 0, total
        while i < count:
            done = _libc.syscall(SYS_PROCESS_MADVISE, pidfd, ctypes.addressof(iov) + i * _IOVEC_SIZE, count - i,
                                 MADV_POPULATE_WRITE, 0)
            if done == left:
                break  # the common case: every range still mapped
            if done < 0:
                if ctypes.get_errno() != errno.ENOMEM:
                    return False  # not on this kernel, or not for this advice
                done = 0  # range i is not mapped
            while done >= lengths[i]:  # the ranges done; done < left stops it short of count
                done -= lengths[i]
                left -= lengths[i]
                i += 1
            left -= lengths[i]  # and the one the call stopped at, stepped over
            i += 1
    return True


def _maps():
    """This process's mappings, as (start, end, permissions, path)."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            out.append((start, end, fields[1], fields[5] if len(fields) > 5 else ""))
    return out


def writable_maps():
    """The zygote's private writable mappings, as (start, end)."""
    return [(start, end) for start, end, perms, _ in _maps() if perms[1] == "w" and perms[3] == "p"]


def exclusive(maps):
    """The pages of maps that this process has a copy of its own."""
    pages = set()
    with open("/proc/self/pagemap", "rb") as pm:
        for start, end in maps:
            pm.seek(start // mmap.PAGESIZE * 8)
            entries = struct.unpack("%dQ" % ((end - start) // mmap.PAGESIZE), pm.read((end - start) // mmap.PAGESIZE * 8))
            pages.update(start + i * mmap.PAGESIZE for i, e in enumerate(entries) if e >> 63 & 1 and e >> 56 & 1)
    return pages


def ranges(pages):
    """Sorted runs of adjacent pages, as (start, length)."""
    out = []
    for p in sorted(pages):
        if out and out[-1][0] + out[-1][1] == p:
            out[-1] = (out[-1][0], out[-1][1] + mmap.PAGESIZE)
        else:
            out.append((p, mmap.PAGESIZE))
    return out


def page_set(runs):
    """The start of each page in runs, (start, length) ranges."""
    return {p for first, n in runs for p in range(first, first + n, mmap.PAGESIZE)}


def union(a, b):
    """The pages of runs a and b, as one tuple of runs."""
    return tuple(ranges(page_set(a) | page_set(b)))


HUGE = 2 << 20
MAP_FAILED = ctypes.c_void_p(-1).value
MREMAP_MAYMOVE, MREMAP_FIXED = 1, 2
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mremap.restype = ctypes.c_void_p
_libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def text_on_huge_pages():
    """Moves the interpreter's code onto transparent huge pages and returns
    how many bytes it moved (0 if it could not).

    Every page a child touches for the first time costs it a trip through
    the page tables, and on virtual machines that shadow them (as the
    machines boxer was measured on do) a trip through the hypervisor too;
    a forked interpreter touches hundreds of pages of its code. Those are
    file pages of 4 KiB. The whole 2 MiB blocks of the read-only image that
    holds the code (the executable's, or libpython's where the interpreter
    is linked to it: headers, code, constants) are copied here into
    anonymous memory backed by huge pages, which then replaces the
    original in place, byte for byte, read and execute only. Children
    share it copy-on-write like the rest of the zygote and never write it,
    so each 2 MiB costs them one entry. Only the copy's permissions differ:
    the headers and constants in those blocks become executable too.

    The kernel swaps the mappings in one mremap, so the code running
    throughout (this function's, in libc) never sees a gap. If anything
    fails before that (no huge pages given, /proc unreadable), the
    original stays. mremap itself unmaps the original before it moves the
    copy in: should the kernel fail between the two (out of memory), the
    zygote dies, and the pool starts another."""
    try:
        start, end = _code_blocks()
    except (OSError, ValueError):
        return 0
    size = end - start
    if size <= 0:
        return 0
    raw = _libc.mmap(None, size + HUGE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if raw in (None, MAP_FAILED):
        return 0
    copy = -(-raw // HUGE) * HUGE
    placed = False
    try:
        if _libc.madvise(copy, size, mmap.MADV_HUGEPAGE) != 0:
            return 0
        before = _anon_huge_kib()
        ctypes.memmove(copy, start, size)
        if (_anon_huge_kib() - before) * 1024 < size or _libc.mprotect(copy, size, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            return 0
        placed = _libc.mremap(copy, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, start) == start
        return size if placed else 0
    except (OSError, ValueError):
        return 0
    finally:
        # What is left of the reservation: its unaligned ends, and the copy
        # itself unless it moved into place.
        if placed:
            for a, b in ((raw, copy), (copy + size, raw + size + HUGE)):
                if b > a:
                    _libc.munmap(a, b - a)
        else:
            _libc.munmap(raw, size + HUGE)


def _code_blocks():
    """The whole 2 MiB blocks, as (start, end), of the read-only image of
    the file that holds the interpreter's code: the run of adjacent
    readable, unwritable mappings of that file around Py_Initialize."""
    code = ctypes.cast(ctypes.pythonapi.Py_Initialize, ctypes.c_void_p).value
    maps = _maps()
    at = [k for k, m in enumerate(maps) if m[0] <= code < m[1]]
    if not at or not maps[at[0]][3].startswith("/"):
        return 0, 0
    path = maps[at[0]][3]

    def image(k):
        return maps[k][3] == path and "r" in maps[k][2] and "w" not in maps[k][2]

    first = last = at[0]
    while first > 0 and image(first - 1) and maps[first - 1][1] == maps[first][0]:
        first -= 1
    while last + 1 < len(maps) and image(last + 1) and maps[last][1] == maps[last + 1][0]:
        last += 1
    if not image(at[0]):
        return 0, 0
    return -(-maps[first][0] // HUGE) * HUGE, maps[last][1] // HUGE * HUGE


def _anon_huge_kib():
    return _kib("/proc/self/smaps_rollup", "AnonHugePages:")


def _kib(path, key):
    """The kB figure of the line of path that starts with key; 0 if none."""
    with open(path) as f:
        return next((int(line.split()[1]) for line in f if line.startswith(key)), 0)


def plan_copies(learned, pinned):
    """Records which learned pages pin left unpinned, for pretouch."""
    global UNPINNED, UNPINNED_IOV
    UNPINNED = unpinned(learned, pinned)
    UNPINNED_IOV = iovecs(UNPINNED)
