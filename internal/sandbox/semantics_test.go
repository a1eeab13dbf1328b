package sandbox

import (
	"strings"
	"testing"

	"boxer"
	"boxer/internal/sandbox/warm"
)

// A warm run is indistinguishable from `python main.py` (or -c, -m) in a
// fresh interpreter: the same programs give the same stdout, stderr and
// exit status on both paths, whether the zygote pre-imports modules or
// not. The one difference allowed is sys.modules holding the pre-imports'
// modules (listed in pre.txt, which every job gets).
func TestWarmSemanticsMatchCold(t *testing.T) {
	t.Run("no pre-imports", func(t *testing.T) { testSemantics(t) })
	t.Run("numpy pre-imported", func(t *testing.T) { testSemantics(t, "numpy") })
}

// escapeHeavy is a program that makes the warm command
// warm.MaxCommandBytes long (with "python", "-c" and a five-byte argument)
// of bytes a JSON encoder escapes: HTML's '<' and control characters.
var escapeHeavy = func() string {
	code := "import sys; print(len(sys.argv[1]), sys.orig_argv[0], len(sys.orig_argv[2]), ascii(sys.argv[1:]))\n#"
	return code + strings.Repeat("<\x01", (warm.MaxCommandBytes-len("python-c<\x01>")-len(code))/2)
}()

func testSemantics(t *testing.T, preimports ...string) {
	_, z, paths := bothPathsPreImporting(t, nil, preimports...)
	const inspect = `import os, sys
print("argv", sys.argv, "orig", sys.orig_argv)
print("name", __name__, "file", globals().get("__file__"))
print("cwd", os.getcwd(), "path0", repr(sys.path[0]), "exe", sys.executable)
print("globals", sorted(k for k in globals() if k.startswith("__")))
print("loader", type(__loader__).__name__ if not isinstance(__loader__, type) else __loader__.__name__)
print("env", sorted(os.environ.items()))
print("stdin", repr(sys.stdin.read()))
print("modules", sorted(set(sys.modules) - set(open("/work/pre.txt").read().split())))
print("flags", sys.flags)
`
	file := func(name, content string) boxer.File { return boxer.File{Path: name, Content: []byte(content)} }
	for _, tc := range []struct {
		name  string
		argv  []string
		files []boxer.File
		stdin string
	}{
		{"file form", []string{"python", "main.py", "a", "b c"}, []boxer.File{file("main.py", inspect)}, "input\n"},
		{"file in a subdirectory", []string{"python3", "src/app.py"}, []boxer.File{file("src/app.py", inspect)}, ""},
		{"-c form", []string{"python", "-c", inspect, "x"}, nil, "in"},
		{"-m form", []string{"python", "-m", "pkg.mod", "y"}, []boxer.File{file("pkg/__init__.py", ""), file("pkg/mod.py", inspect)}, ""},
		{"exit code", []string{"python", "-c", "import sys; sys.exit(3)"}, nil, ""},
		{"exit with a message", []string{"python", "-c", "import sys; sys.exit('bye')"}, nil, ""},
		{"exit code wraps", []string{"python", "-c", "raise SystemExit(300)"}, nil, ""},
		{"os._exit", []string{"python", "-c", "import os; print('x', flush=True); os._exit(5)"}, nil, ""},
		{"traceback", []string{"python", "main.py"}, []boxer.File{file("main.py", "def f():\n    raise ValueError('boom')\n\nf()\n")}, ""},
		{"traceback in -c", []string{"python", "-c", "1/0"}, nil, ""},
		{"traceback in -m", []string{"python", "-m", "bad"}, []boxer.File{file("bad.py", "import nope\n")}, ""},
		{"missing module", []string{"python", "-m", "nope"}, nil, ""},
		{"missing file", []string{"python", "nope.py"}, nil, ""},
		{"syntax error", []string{"python", "main.py"}, []boxer.File{file("main.py", "x = (\n")}, ""},
		{"atexit and threads", []string{"python", "main.py"}, []boxer.File{file("main.py",
			"import atexit, threading, time\natexit.register(lambda: print('atexit'))\n"+
				"threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\nprint('main')\n")}, ""},
		{"keyboard interrupt", []string{"python", "-c", "raise KeyboardInterrupt"}, nil, ""},
		{"excepthook that raises", []string{"python", "main.py"}, []boxer.File{file("main.py",
			"import sys\ndef hook(*a):\n    raise ValueError('hook broke')\nsys.excepthook = hook\nraise KeyError('original')\n")}, ""},
		{"excepthook that exits", []string{"python", "-c", "import sys\ndef hook(*a): raise SystemExit(7)\nsys.excepthook = hook\n1/0"}, nil, ""},
		{"os._exit replaced", []string{"python", "-c", "import os\nos._exit = lambda code: print('replaced', code)\nraise SystemExit(4)"}, nil, ""},
		{"stdout closed", []string{"python", "-c", "import sys; sys.stdout.close()"}, nil, ""},
		// The same descriptors: nothing of boxer's or the zygote's is open.
		{"open descriptors", []string{"python", "-c", "import os; print(sorted(os.listdir('/proc/self/fd')))"}, nil, ""},
		{"main thread's native id", []string{"python", "-c", "import threading; print(threading.main_thread().native_id == threading.get_native_id())"}, nil, ""},
		// numpy does not reseed its global generator in a forked child:
		// neither may the warm path, for a job's own fork.
		{"numpy's random state across the job's own fork", []string{"python", "main.py"}, []boxer.File{file("main.py", `import os, numpy
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, b"%d" % numpy.random.randint(1 << 30))
    os._exit(0)
os.wait()
print(int(os.read(r, 32)) == numpy.random.randint(1 << 30))
`)}, ""},
		{"session and group", []string{"python", "-c", "import os; print(os.getsid(0) == os.getpgid(0) == os.getpid())"}, nil, ""},
		// exec drops close-on-exec descriptors, and with them a lock: on
		// the warm path too, where the keeper holds the child's memory but
		// none of the job's descriptors.
		{"exec drops close-on-exec locks", []string{"python", "main.py"}, []boxer.File{file("main.py", `import fcntl, os, sys
fd = os.open("lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC)
fcntl.flock(fd, fcntl.LOCK_EX)
os.execv(sys.executable, [sys.executable, "-c", "import fcntl, os; fcntl.flock(os.open('lock', os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB); print('locked')"])
`)}, ""},
		// The process tree: the program is pid 2, pid 1 (boxer's on the
		// cold path, the child's own on the warm path) is hidden and
		// refuses its signals, and it sees its own processes and nothing
		// else, in /proc and to kill(2).
		// (A cold run's pid is not 2: the Go runtime's threads of boxer's
		// pid 1 take the pids before it. A warm run's is.)
		{"pids and /proc", []string{"python", "-c", "import os; print(os.getppid(), [p for p in os.listdir('/proc') if p.isdigit()] == [str(os.getpid())], os.path.exists('/proc/1'))"}, nil, ""},
		{"whom kill reaches", []string{"python", "main.py"}, []boxer.File{file("main.py", probeKill)}, ""},
		{"a child in /proc", []string{"python", "main.py"}, []boxer.File{file("main.py", childInProc)}, ""},
		{"own /proc files", []string{"python", "-c", "import os; print(open('/proc/self/environ', 'rb').read().split(b'\\0'), sorted(os.listdir('/proc/self/ns')), open('/proc/self/task/%d/children' % os.getpid()).read())"}, nil, ""},
		{"status fields", []string{"python", "-c", statusFields}, nil, ""},
		{"orphans go to pid 1", []string{"python", "main.py"}, []boxer.File{file("main.py", orphan)}, ""},
		{"raise", []string{"python", "-c", "import signal; print('x', flush=True); signal.raise_signal(signal.SIGTERM)"}, nil, ""},
		{"abort", []string{"python", "-c", "import os; os.abort()"}, nil, ""},
		{"kill -1", []string{"python", "-c", "import os\ntry:\n    os.kill(-1, 0)\nexcept OSError as e:\n    print(e.errno)"}, nil, ""},
		// Identity: a warm job's uid is its slot's (1000 + n), named
		// sandbox as a cold run's 1000 is.
		{"identity", []string{"python", "-c", "import os, pwd, grp; print(pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name, os.getuid() == os.geteuid(), os.getgroups(), os.uname().nodename)"}, nil, ""},
		{"rlimits", []string{"python", "-c", "import resource; print([(n, resource.getrlimit(getattr(resource, n))) for n in sorted(dir(resource)) if n.startswith('RLIMIT_')])"}, nil, ""},
		{"signal dispositions", []string{"python", "-c", "import signal; print([(s.name, str(signal.getsignal(s))) for s in sorted(signal.valid_signals()) if isinstance(s, signal.Signals)])"}, nil, ""},
		{"cwd and umask", []string{"python", "-c", "import os; print(os.getcwd(), oct(os.umask(0o22)), sorted(os.listdir('.')))"}, nil, ""},
		{"stdin at end of file", []string{"python", "-c", "import sys; print(repr(sys.stdin.read()), repr(sys.stdin.readline()))"}, nil, ""},
		// The longest command a warm child takes, every byte one JSON
		// escapes: it is sent once, whole, in one packet.
		{"the longest warm command", []string{"python", "-c", escapeHeavy, "<\x01>"}, nil, ""},
		// A job's own module comes first on sys.path, as in a fresh
		// interpreter, though the zygote holds one of that name (numpy
		// imports json): a module, a package, -m, beside a script in a
		// subdirectory; a directory without an __init__ is no package and
		// shadows nothing.
		{"a job's module shadows a pre-import", []string{"python", "main.py"}, []boxer.File{file("main.py", "import json\nprint(json.VALUE)\n"), file("json.py", "VALUE = 42\n")}, ""},
		{"a job's package shadows a pre-import", []string{"python", "-c", "import json.decoder; print(json.VALUE, json.decoder.X)"}, []boxer.File{file("json/__init__.py", "VALUE = 7\n"), file("json/decoder.py", "X = 8\n")}, ""},
		{"-m runs the job's module", []string{"python", "-m", "json"}, []boxer.File{file("json.py", "print('mine', __name__)\n")}, ""},
		{"a module beside a script in a subdirectory", []string{"python", "src/app.py"}, []boxer.File{file("src/app.py", "import re\nprint(re.VALUE)\n"), file("src/re.py", "VALUE = 1\n")}, ""},
		{"a directory is no package", []string{"python", "-c", "import json; print(json.dumps([1]))"}, []boxer.File{file("json/notes.txt", "x")}, ""},
		{"sys.path and prefix", []string{"python", "-c", "import sys; print(sys.path[1:], sys.prefix, sys.base_prefix, sys.platlibdir)"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]*boxer.Result
			files := append(tc.files, file("pre.txt", strings.Join(z.Preimported, "\n")))
			for i, p := range paths {
				got[i] = p.run(t, &boxer.Job{Argv: tc.argv, Files: files, Stdin: []byte(tc.stdin)})
			}
			cold, warm := got[0], got[1]
			if cold.Status != warm.Status || cold.ExitCode != warm.ExitCode || cold.Signal != warm.Signal {
				t.Errorf("cold %s/%d/%s, warm %s/%d/%s", cold.Status, cold.ExitCode, cold.Signal, warm.Status, warm.ExitCode, warm.Signal)
			}
			if string(cold.Stdout.Data) != string(warm.Stdout.Data) {
				t.Errorf("stdout differs\ncold: %s\nwarm: %s", cold.Stdout.Data, warm.Stdout.Data)
			}
			if string(cold.Stderr.Data) != string(warm.Stderr.Data) {
				t.Errorf("stderr differs\ncold: %s\nwarm: %s", cold.Stderr.Data, warm.Stderr.Data)
			}
		})
	}
}

// killProbe defines probe(pid): what kill(pid, 0) answers, "ok" or the
// error's text.
const killProbe = `import os
def probe(p):
    try:
        os.kill(p, 0)
        return "ok"
    except OSError as e:
        return e.strerror
`

// probeKill tells whether pid 1 refuses the program's signals and whether
// the program's own pid is the only one they reach.
const probeKill = killProbe + `me = os.getpid()
print(probe(1), [p for p in range(1, 400) if probe(p) == "ok"] == [me])
`

// childInProc reads a child's /proc entries, as psutil or a test runner
// walking its tree would.
const childInProc = `import os
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.read(r, 1)
    os._exit(0)
st = open("/proc/%d/stat" % pid).read().split()
print(st[2] in "RS", st[3] == str(os.getpid()), open("/proc/%d/cmdline" % pid, "rb").read() != b"", len(os.listdir("/proc/%d/fd" % pid)) > 0)
os.write(w, b"x")
print(os.waitpid(pid, 0) == (pid, 0))
`

// statusFields are the lines of /proc/self/status a run may depend on;
// its ids and its count of seccomp filters (a warm run's are its
// zygote's two below its own) are left out.
const statusFields = `keep = ("State", "PPid", "NStgid", "NSpid", "NSpgid", "NSsid", "TracerPid", "Groups", "NoNewPrivs", "Seccomp",
        "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "SigBlk", "SigIgn", "SigCgt", "Threads", "Umask")
import os
print([l if not l.startswith("NS") else l.split(":")[0] + (" self" if l.split()[1] == str(os.getpid()) else " other")
       for l in open("/proc/self/status").read().splitlines() if l.split(":")[0] in keep])
`

// orphan leaves a grandchild whose parent has exited: the kernel hands
// it to pid 1.
const orphan = `import os, time
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        os.close(r)
        while os.getppid() != 1:
            time.sleep(0.01)
        os.write(w, b"%d" % os.getppid())
        os._exit(0)
    os._exit(0)
os.close(w)
os.wait()
print("grandchild's parent", os.read(r, 8))
`
