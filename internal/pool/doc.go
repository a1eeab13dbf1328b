// Package pool keeps warm sandboxes ready so that a job starts in
// milliseconds instead of paying for namespaces, mounts and an interpreter
// start.
//
// # Design
//
// The mechanism lives in internal/sandbox: a zygote sandbox runs a Python
// interpreter that has started (and, configurably, imported heavy modules
// such as numpy and pandas) and forks one child per future job. Each child
// is isolated before its job exists: its own mount, IPC, network and cgroup
// namespaces, fresh tmpfs for /work, /tmp and /dev/shm, its own cgroup and
// uid, no capabilities, no_new_privs and the seccomp filter. The job's
// limits, files and code are handed over when it arrives; the child runs it
// in-process, as `python FILE`, `python -c` or `python -m` would, and is
// destroyed afterwards. A child serves exactly one job; nothing of job N
// (file, process, environment, module state, tmpfs) exists for job N+1,
// which runs in another child forked from the untouched zygote.
//
// Two kernel objects may outlive their child. One is the cgroup of the child's slot
// (its uid), which the slot's next child gets once cgroup.Cgroup.Reset
// has emptied it, reclaimed the memory its last job left charged and
// restarted its figures (internal/sandbox's
// TestWarmSlotCgroupStartsClean fails with any of those left out). A
// zygote hands out the slot freed last, so it keeps as many of these
// cgroups as its load's high-water mark of children, not one a slot. It
// saves the making and removal of a cgroup per job: in bench/service, with
// the hot control files held open as well, the machine's CPU per
// print(2+2) fell from 9.7 to 8.3 ms and boxer's own from 3.3 to 2.4 ms
// (2026-12-02). The other (Config.KeepNetns, which boxer serve turns on,
// --pool-keep-netns=false turns off) is the network namespace, kept for
// the slot's next child only when its job made no IP socket (its seccomp
// filter asks boxer about each, see internal/sandbox's ipGate) and left no
// unix socket behind, and its counters and tables in /proc/net read the
// same as when it was new.
// What a job that used the network leaves outlives its processes and
// cannot be reset by boxer (TIME_WAIT sockets on loopback, which the next
// job sees in /proc/net/tcp and in a refused bind; the interface and
// protocol counters of /proc/net/dev and /proc/net/snmp, also readable
// over netlink), so such a namespace is torn down and the next child makes
// a fresh one (TestWarmNetnsKeptOnlyUntouched tries each way to leave
// something). Made and torn down per job, the namespace was the dearest
// of the rest: about 15% of the machine's CPU per print(2+2) under load.
//
// Why fork from a zygote rather than keep fresh sandboxes with cold
// interpreters waiting: on a 2-core host a fresh interpreter costs 20 to
// 40 ms of CPU, and its pre-imports hundreds more, per job, which caps
// throughput below what a bare `python3` achieves; a fork costs a few ms
// and shares every pre-imported page copy-on-write (gc.freeze keeps the
// collector from dirtying them), so each warm child adds little memory.
//
// What a warm job costs is pages. A fork write-protects every private
// page of the zygote; whatever page the child (or the zygote) then writes,
// and CPython writes a reference count on every object it touches, is a
// copy-on-write fault. On the 2-core VM this was built on, page tables are
// shadowed by the hypervisor: a write fault costs about 17 us idle and
// more under load, and even a page a new address space only reads costs
// about 4.5 us the first time (a forked child reading 10,000 of its
// parent's pages: 4.6 us each, against 0.04 us for a re-read). Before
// the measures below, sequential print(2+2) jobs took 66 faults of the
// zygote's and 608 of the child's without pre-imports, 92 and 892 with
// numpy, pandas and matplotlib; now 10 and 80 without (/proc/PID/stat,
// 2026-11-30). So the design is about touching fewer pages, and having
// the copies that remain made without faults, before the job:
//
//   - The zygote stays one thread on one CPU (the pools numpy's BLAS and
//     numexpr start at import are capped at one thread while it imports),
//     because each fault's TLB flush must otherwise reach every CPU its
//     address space is live on (in a profile under load, those IPIs were
//     a fifth of the zygote tree's samples, nearly gone once it was
//     pinned).
//   - A child's copies are made by fork itself. The zygote runs
//     print(2+2) at start in a throwaway child that takes a warm child's
//     whole path (its set-up, the job's hand-over, the job), with the
//     zygote playing boxer's part, and notes which of its pages were
//     copied in that child's life (about 560 without pre-imports, 820
//     with them; zygote.py's _learn). Those include the pages the
//     zygote's own loop writes after a fork. It then pins them, through
//     io_uring's buffer registration, for its whole life (pin in
//     zygote_speed.py, which holds every such speed step). The
//     kernel never shares a pinned page copy-on-write: fork copies it
//     for the child at once and leaves the zygote's page writable, so
//     neither side takes a fault or a TLB flush for it. The ring does no
//     I/O and no child can reach it; once the pages are pinned, the
//     zygote seals io_uring off for itself and every child
//     (seccomp.ZygoteSealed). Where nothing can be pinned (io_uring
//     missing or disabled, RLIMIT_MEMLOCK too low, huge pages in the
//     way; boxer warns), each child breaks the sharing of the same pages
//     with MADV_POPULATE_WRITE first thing after its fork, in one
//     process_madvise call where the kernel takes it (Linux 6.13 on),
//     else one madvise per range (pretouch): a page copied so costs
//     about a third of a write fault. Either way the copies are charged
//     to the zygote's cgroup, whose memory limit grows by Slots times
//     their size; made instead after boxer has moved the child into its
//     own cgroup, where it runs at a background CPU weight, they cost 10
//     to 15% of the rate under load.
//     Measured under load at concurrency 16: learning the job's life
//     rather than its pages alone cut the children's CPU per print(2+2)
//     by a third (36.0 -> 23.5 ms), and one process_madvise call instead
//     of some 210 by another 5% (22.6 -> 21.4 ms). Pinning instead of
//     pretouch cut the machine's CPU per job from 40.1 to 31.2 ms
//     (46.6 -> 62.4 jobs/s; the zygote's faults per job fell from 66 to
//     10, the children's from 617 to 111), and learning the hand-over
//     too, from 27.0 to 24.8 ms (children's faults 108 -> 74). The
//     rehearsal then walks the job's path on dummy values before the
//     child says it is ready, so that the first touches the learning
//     cannot foresee are paid before the job arrives; it moves CPU off
//     the job's path, and removing it changed no rate.
//   - The interpreter's code is on huge pages. A forked interpreter
//     touches hundreds of 4 KiB pages of the executable's code, at 4.5 us
//     each the first time. The zygote copies the whole 2 MiB blocks of the
//     executable's read-only image onto anonymous transparent huge pages
//     and moves the copy over the original in one mremap (zygote_speed.py's
//     text_on_huge_pages; 4 MiB of python3.11), which children share and
//     never write. Only /proc/PID/maps tells the difference: the mapping
//     is anonymous (a profiler that symbolizes from the file finds no
//     symbols there), and its headers and constants are executable too.
//   - Whatever every child would do alike is done once in the zygote:
//     emptying the capability bounding set, dropping supplementary groups
//     and setting no_new_privs (_limit_zygote: some forty calls fewer per
//     child), making the seccomp program's struct, and the dlsym of every
//     libc function a child calls. Together with the huge pages, the
//     first two took the children's CPU per print(2+2) from 46.2 to 42.3
//     ms; the last two, 23.5 to 22.4 ms.
//   - The zygote's loop allocates little. Every page it writes after a
//     fork is a fault of its own, and a loop built on select, recv_fds
//     and json wrote 134 per job; with a binary fork request read into
//     one reused buffer, one epoll and formatted replies, 67. The
//     zygotes' CPU per job fell from 7.4 to 4.5 ms.
//
// (Each "from ... to" above is the mean of alternating 10 s runs of the
// two builds at concurrency 16, three or four of each, 2026-11-30; this
// VM's speed drifts by a fifth over minutes, so only runs side by side
// are compared.)
//
// The end of a job has a cost of its own: the kernel reports an exit only
// after tearing down the address space, and a child of a zygote with
// numpy and pandas maps tens of thousands of the zygote's pages, 5 to 8
// ms of teardown on this VM. So the job does not run in the forked
// process: that one is the pid 1 of the child's own PID namespace, and
// once unprivileged it clones the job's process, pid 2, sharing its memory
// (not its descriptors: the job's stdio arrives after it), and is stopped
// (zygote.py's _drop). The job's exit is then reported at once, and boxer
// kills pid 1 and answers while the teardown runs. boxer trusts only the
// kernel's task count to know nothing else is left (Warm.killRest).
// Paced print(2+2): p50 14 -> 8 ms (measured with an earlier design, a
// sleeping clone of the job that the job could see; the cost is the same).
//
// What is left is CPU. In bench/service a warm print(2+2) now costs 27
// to 32 ms of the machine's CPU against 64 to 71 ms for a bare python3
// start in the same run (2.0x to 2.4x its rate; README), of which boxer's
// own process takes about 6. In a profile under load what remains is
// spread thin: the children's first touches of the zygote's pages (on
// this VM a page's first read in a new address space costs about 4.5 us
// even without a fault), the interpreter's own work, the copies fork
// makes, the address space's teardown, the network namespace made and
// destroyed, and boxer's system calls and the Go runtime's wake-ups
// around them.
//
// Faults are not saved one hook at a time. Forking with libc's fork
// instead of os.fork skips CPython's after-fork work, some 250 faults in a
// child that only exits; in the pool it saved 3 to 14% of a child's
// faults and no measurable CPU (20.1 against 19.7 jobs/s), because the
// child's set-up and the job touch most of the same pages anyway. It was
// not kept.
//
// Nor can any fork-per-job design reach twice python3's rate here with the
// pre-imports: bench/floor times the kernel operations alone (fork and
// exit, the four namespaces, the tmpfs mounts, a cgroup in five v1
// hierarchies), and with numpy, pandas and matplotlib in the zygote they
// come to 0.56x of a bare start's CPU, 0.39x without them (README).
//
// Hence the lean lane. A child of a zygote without pre-imports costs
// about a quarter less CPU than one of a zygote with numpy, pandas and
// matplotlib (fewer pages to copy the table of, fault and tear down), and
// most jobs import none of them. With Lean, the pool runs a second zygote
// without the pre-imports, and a job goes to the zygote with them only if
// its code (its .py files, or the -c code) names one of their top-level
// packages as a word. That is the only use made of the job's code, and
// only for speed: every zygote gives the same isolation and the same
// semantics, but for sys.modules holding the declared pre-imports on the
// ones that have them; a job that reaches a pre-import without naming it
// runs lean and pays for the import, as a cold run would. Pyodide picks
// the packages to load from a program's imports in the same spirit. In
// bench/service the same day, throughput went from 0.60-0.64x of bare
// python3's rate (two runs, 96-98 ms of CPU per print(2+2)) to 0.85-0.88x
// (73 ms), with warm numpy+pandas imports still under 0.04x.
//
// What the pre-imports hold is what agents run that is dear to import:
// the scientific stack, and pytest, since agents run test suites (seed
// 004's second use case is `python -m pytest test_math.py`). A `-m`
// module counts as named, so `python -m pytest` goes to the zygote with
// them. In bench/jobs (2026-12-02), pre-importing pytest took that job
// from 246 ms, 1.21x a bare python3 in a fresh directory, to 68 ms, 0.28x;
// what is left is pytest's own start: its plugins' entry points read from
// every installed package's metadata, collection, the rewrite of asserts.
// The zygote also imports the built-in plugins pytest loads as a run
// configures itself (_FIRST_USE in zygote.py). What is left of a warm
// pytest run after that (38 ms, 0.24-0.26x, in three runs of bench/jobs on
// 2026-12-03) is mostly copy-on-write: pytest walks every attribute of its
// plugin modules (fixture parsing), and each object it touches writes a
// reference count on a page shared with the zygote. Measured in a job,
// pytest.main took 2,380 page faults where a bare interpreter that had
// imported pytest took 365; _learn's sample (print(2+2)) does not teach
// the zygote those pages, and pinning them would cost every child of that
// zygote some 8 MiB copied at each fork.
//
// Hence the own lanes (OwnLanes: pytest and matplotlib.pyplot by default,
// with Lean). Each is a zygote of its own holding the lean pre-imports and
// that one module, which learns the pages the module's first use writes
// (a small pytest run; a line chart saved as a PNG: _SAMPLES in
// zygote.py) on top of print(2+2)'s; each of its children copies them
// while it is being prepared, before any job is known, so the job does not
// fault on them one at a time. A job goes there when it names the module
// and no pre-import that zygote does not hold (matplotlib brings numpy,
// pytest brings json: a chart that names numpy too still goes to the
// chart lane); a job that names more goes to the zygote with all the
// pre-imports, as before. Measured on 2026-12-07 on this VM, where a
// copy-on-write fault costs some 50 us of the job's CPU: in a warm child
// of the zygote with every pre-import, a first pytest.main took 2,270
// faults and 140 ms, a second one in the same child 35 ms. Through
// /v1/run-python with cpus 2, nine interleaved runs each, seed 004's
// pytest job went from a median of 201 to 76 ms of CPU on its own lane,
// and its chart from 261 to 145 ms. The price: the children of an own
// lane copy those pages (11 to 14 MiB) at each preparation, and the
// zygotes themselves hold 28 (pytest) and 64 MiB (matplotlib) of RSS: with
// the server's defaults, the idle server's process tree went from 197 to
// 411 MiB of PSS.
// Every zygote also holds the lean pre-imports (--pool-lean-preimport,
// json by default, which brings re, enum, collections and functools):
// under 1 MiB more in the lean zygote, and the import of json is most of
// what seed 004's bug reproduction cost warm (it went from 8.8 ms, 0.30x a
// bare run, to 1.8 ms, 0.10x, in bench/jobs on 2026-12-03). They route
// nothing: a job that names json runs lean.
//
// A job's own module shadows a pre-import of its name, as in a fresh
// interpreter, which finds sys.path[0] first: before the job runs, its
// child drops from sys.modules each pre-import whose top-level name is a
// module (NAME.py, or another suffix the import system loads) or a package
// (NAME/ with an __init__) in the directory sys.path[0] names (_unshadow
// in zygote.py; TestWarmSemanticsMatchCold). A pre-import that imported
// the shadowed module keeps its own.
//
// # Where a job waits when none is ready
//
// The refiller prepares one child at a time. A client sending requests
// back to back (bench/service's latency run) uses children faster than
// that, so one request in ten or so finds the queue empty and prepares its
// own child: the slow tail of back-to-back latency (p99 1.4 to 1.9x a bare
// start's p50 against a p50 of 0.15 to 0.25x) is that wait, seen as
// timing.acquireMs. Timed phase by phase on the cgroup v1 host
// (2026-12-03, the 49 of 400 prepares that took over 8 ms), it is spread:
// the move into the slot's cgroup took over 5 ms in 17 of them (writing
// cgroup.procs takes the kernel's cgroup_threadgroup_rwsem for writing,
// which can wait out an RCU grace period), the child's own isolation (its
// network namespace, mounts, the job's process) in 13, the zygote's fork
// (one at a time) in 4. Forking into the cgroup (clone3's
// CLONE_INTO_CGROUP, cgroup v2 only) would skip the move.
//
// To hold another module ready, add it to --pool-preimport (boxer serve's
// flag, or BOXER_POOL_PREIMPORT): the zygote imports it at start, jobs
// that name its top-level package go there, and bench/jobs and
// bench/service show what it costs the others (each of that zygote's
// children maps its pages). A module that starts threads at import does
// not belong there: a fork copies only the forking thread, and the zygote
// is meant to stay one thread (see above). To give it a lane of its own
// as well, write its first use as a sample (_SAMPLES in zygote.py, a few
// files and a command, like pytest's), name it in warm.Samples, and add it
// to --pool-own-lane; the pool logs how many pages the zygote learned, and
// bench/jobs is where a job that uses it shows the gain.
//
// # What a warm job can tell apart
//
// A warm job sees the process tree a cold run sees: it is pid 2 of a PID
// namespace of its own, its parent pid 1, which hides from its /proc and
// refuses its signals, and it sees its own processes and no other
// (internal/sandbox's TestWarmSemanticsMatchCold and
// TestWarmJobsSeeNoNeighbours hold both paths to it). What differs:
//
//   - sys.modules holds the declared pre-imports (but for those a module
//     of the job's own shadows);
//   - its uid is its slot's, 1000 + n, named sandbox as a cold run's 1000
//     is;
//   - a cold run is not pid 2 but a few more: the threads of boxer's pid 1
//     (a Go process) take the pids before it;
//   - /proc/self/status counts the zygote's two seccomp filters under the
//     job's, /proc/self/mountinfo shows the zygote's mounts, and its code
//     mapping is anonymous (see the huge pages above);
//   - processes it orphans stay zombies until the run ends, holding their
//     pids, where a cold run's pid 1 reaps them (see _drop);
//   - every job of one zygote has the same hash() seed (str and bytes
//     hashing is randomised per zygote, not per job; the pool retires a
//     zygote after a number of forks), the same stack canary and the same
//     address layout. random, numpy.random, os.urandom and uuid4 are the
//     job's own.
//
// This package is the policy around that mechanism:
//
//   - it keeps between Min and Max children ready in each zygote, aiming
//     at Min plus the jobs in flight, refilling in the background;
//   - with Lean, jobs whose code names no pre-import go to a second
//     zygote without them, and jobs that name an own lane's module (and
//     nothing that lane's zygote lacks) to that lane (an own lane whose
//     module is not installed is not made);
//   - a job takes a ready child, or prepares one inline when none is ready
//     (still far cheaper than a cold sandbox);
//   - a job whose command or limits cannot run warm (interpreter flags, a
//     non-default disk size) runs in a cold sandbox, exactly as given;
//   - a zygote that dies is replaced, and its children are discarded;
//   - a child that fails to prepare is discarded, never handed out;
//   - Size 0 switches the pool off: every job runs cold.
package pool
