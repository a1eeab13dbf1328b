package sandbox

import (
	"strings"
	"testing"

	"boxer"
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
