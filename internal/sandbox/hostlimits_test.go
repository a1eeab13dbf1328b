package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"boxer"
	"boxer/internal/sandbox/nsinit"

	"golang.org/x/sys/unix"
)

// lowHardEnv, in a re-executed test binary, is the hard RLIMIT_NOFILE
// TestLowHardLimits lowers its process to before it makes an engine.
const lowHardEnv = "BOXER_TEST_LOW_HARD_NOFILE"

// lowStack and lowSigpending are the hard RLIMIT_STACK and
// RLIMIT_SIGPENDING of that process: below boxer's own choices (8 MiB,
// 1024), which must then be cut to them.
const (
	lowStack      = 4 << 20
	lowSigpending = 512
)

// A host whose boxer inherits a low hard RLIMIT_NOFILE (the kernel's
// default 4096 in a container or an init script, or less) still runs
// sandboxes, cold and warm: boxer's own choices (the zygote's open files,
// the stack, pending signals) are cut to what it has, the jobs' limits are
// given exactly, and a job asking for more than the host has is refused. Lowering a limit is process-wide, so each value is
// tried in a re-executed test binary, never in this one.
func TestLowHardLimits(t *testing.T) {
	if v := os.Getenv(lowHardEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", lowHardEnv, v, err)
		}
		lowHardLimits(t, n)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox engine needs root (namespaces, cgroups, mounts)")
	}
	var hard syscall.Rlimit
	if err := syscall.Getrlimit(unix.RLIMIT_NOFILE, &hard); err != nil {
		t.Fatal(err)
	}
	// 16384 is above the zygote's own 8192: a job asking for that many
	// open files runs cold, and is refused by a warm child.
	for _, n := range []uint64{4096, 1024, 16384} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if n > hard.Max {
				t.Skipf("this process's hard RLIMIT_NOFILE is %d already", hard.Max)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestLowHardLimits$", "-test.v", "-test.count=1", "-test.timeout=5m")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", lowHardEnv, n))
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestLowHardLimits") {
				t.Fatalf("hard RLIMIT_NOFILE %d: %v\n%s", n, err, out)
			}
		})
	}
}

// lowHardLimits is TestLowHardLimits in the re-executed binary.
func lowHardLimits(t *testing.T, nofile uint64) {
	// syscall.Setrlimit, not unix: it also drops the RLIMIT_NOFILE the Go
	// runtime saved at start to give back to the children it forks.
	lower(t, unix.RLIMIT_NOFILE, nofile)
	lower(t, unix.RLIMIT_STACK, lowStack)
	lower(t, unix.RLIMIT_SIGPENDING, lowSigpending)

	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)

	// The zygote asks for 8192 open files; it gets what boxer has.
	zfiles := min(nofile, zygoteOpenFiles)
	if got, want := zygoteLimit(t, z, "Max open files"), fmt.Sprintf("%d %d", zfiles, zfiles); got != want {
		t.Errorf("the zygote's open files: %q, want %q", got, want)
	}
	// The doctor's line says what was cut.
	var line *Check
	checks := e.SelfTest(context.Background())
	for i, c := range checks {
		if !c.OK {
			t.Errorf("self-test: %s: %s", c.Name, c.Detail)
		}
		if c.Name == "rlimits" {
			line = &checks[i]
		}
	}
	if line == nil {
		t.Fatal("the self-test has no rlimits line")
	}
	for _, want := range []string{fmt.Sprintf("nofile 256 (hard %d)", nofile), "stack 4MiB (clamped to hard)", "sigpending 512 (clamped to hard)"} {
		if !strings.Contains(line.Detail, want) {
			t.Errorf("the self-test's rlimits line %q does not say %q", line.Detail, want)
		}
	}
	const show = "import resource as r\nprint(*(r.getrlimit(x) for x in (r.RLIMIT_NOFILE, r.RLIMIT_STACK, r.RLIMIT_SIGPENDING)))"
	want := func(files uint64) string {
		return fmt.Sprintf("(%d, %d) (%d, %d) (%d, %d)\n", files, files, lowStack, lowStack, lowSigpending, lowSigpending)
	}
	paths := []runPath{
		{"cold", func(t *testing.T, job *boxer.Job) *boxer.Result { t.Helper(); return runJob(t, e, job) }},
		{"warm", func(t *testing.T, job *boxer.Job) *boxer.Result { t.Helper(); return runWarm(t, z, job) }},
	}
	for _, p := range paths {
		for _, tc := range []struct {
			name  string
			files int
		}{{"default open files", 0}, {"open files at the hard limit", int(nofile)}} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				if p.name == "warm" && uint64(tc.files) > zfiles {
					t.Skipf("a warm job may have no more open files than its zygote's %d (see below)", zfiles)
				}
				res := p.run(t, pyJob(show, boxer.Limits{OpenFiles: tc.files}))
				files := uint64(tc.files)
				if files == 0 {
					files = uint64(e.Limits().OpenFiles)
				}
				if res.Status != boxer.StatusOK || string(res.Stdout.Data) != want(files) {
					t.Fatalf("%s: stdout %q, want %q; stderr %q", res.Status, res.Stdout.Data, want(files), res.Stderr.Data)
				}
			})
		}
	}

	// One more open file than the host has is the caller's mistake, on
	// either path.
	over := boxer.Limits{OpenFiles: int(nofile) + 1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, coldErr := e.Run(ctx, pyJob("print(1)", over))
	w, err := z.Prepare(ctx)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer w.Destroy()
	_, warmErr := w.Run(ctx, pyJob("print(1)", over))
	for name, err := range map[string]error{"cold": coldErr, "warm": warmErr} {
		var be *boxer.Error
		if !errors.As(err, &be) || be.Code != boxer.ECodeInvalidRequest || !strings.Contains(be.Message, "RLIMIT_NOFILE") {
			t.Errorf("%s: open files %d with a hard limit of %d: got %v, want an invalid_request naming RLIMIT_NOFILE", name, nofile+1, nofile, err)
		}
	}

	// Above the zygote's open files and within the host's, a job fits no
	// warm child: it is an error, not a result that blames the program.
	if nofile > zfiles {
		more := boxer.Limits{OpenFiles: int(nofile)}.WithDefaults(e.Limits())
		w, err := z.Prepare(ctx)
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		defer w.Destroy()
		if e.WarmFits(more) {
			t.Errorf("a job with open files %d, above the zygote's %d, fits a warm child", nofile, zfiles)
		}
		var be *boxer.Error
		if res, err := w.Run(ctx, pyJob("print(1)", more)); err == nil || errors.As(err, &be) {
			t.Errorf("warm run with open files %d, above its zygote's %d: %v, %v; want an internal error", nofile, zfiles, res, err)
		}
	}
}

// lower sets both limits of res to v for the rest of the test.
func lower(t *testing.T, res int, v uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(res, &old); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
		t.Fatalf("setrlimit %d: %v", res, err)
	}
	// Root may raise it back, given CAP_SYS_RESOURCE, which root in a
	// container often lacks; the re-executed binary exits all the same.
	t.Cleanup(func() {
		err := syscall.Setrlimit(res, &old)
		switch {
		case errors.Is(err, syscall.EPERM):
			t.Logf("rlimit %d stays lowered: raising it takes CAP_SYS_RESOURCE", res)
		case err != nil:
			t.Errorf("restore rlimit %d: %v", res, err)
		}
	})
}

// zygoteLimit reads one line of the zygote's /proc/PID/limits (the
// zygote is its sandbox's pid 1's one child): its soft and hard values.
func zygoteLimit(t *testing.T, z *Zygote, name string) string {
	t.Helper()
	pid1 := z.sb.cmd.Process.Pid
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid1, pid1))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(kids))
	if len(f) != 1 {
		t.Fatalf("the zygote's pid 1 has children %q, want one", f)
	}
	b, err := os.ReadFile("/proc/" + f[0] + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			v := strings.Fields(rest)
			if len(v) >= 2 {
				return v[0] + " " + v[1]
			}
		}
	}
	t.Fatalf("no %q in the zygote's limits:\n%s", name, b)
	return ""
}

func TestClampRlimits(t *testing.T) {
	host := hostRlimits{unix.RLIMIT_NOFILE: 4096, unix.RLIMIT_STACK: rlimInfinity, unix.RLIMIT_SIGPENDING: 512, unix.RLIMIT_CORE: 0}
	for _, tc := range []struct {
		name      string
		want, got nsinit.Rlimit
	}{
		{"below the hard limit", rl(unix.RLIMIT_NOFILE, 256, 256), rl(unix.RLIMIT_NOFILE, 256, 256)},
		{"at the hard limit", rl(unix.RLIMIT_NOFILE, 4096, 4096), rl(unix.RLIMIT_NOFILE, 4096, 4096)},
		{"above it: both cut", rl(unix.RLIMIT_NOFILE, 8192, 8192), rl(unix.RLIMIT_NOFILE, 4096, 4096)},
		{"soft below, hard above", rl(unix.RLIMIT_NOFILE, 1024, rlimInfinity), rl(unix.RLIMIT_NOFILE, 1024, 4096)},
		{"unlimited wanted", rl(unix.RLIMIT_SIGPENDING, rlimInfinity, rlimInfinity), rl(unix.RLIMIT_SIGPENDING, 512, 512)},
		{"unlimited host", rl(unix.RLIMIT_STACK, 8<<20, 8<<20), rl(unix.RLIMIT_STACK, 8<<20, 8<<20)},
		{"unlimited both", rl(unix.RLIMIT_STACK, rlimInfinity, rlimInfinity), rl(unix.RLIMIT_STACK, rlimInfinity, rlimInfinity)},
		{"host limit of zero", rl(unix.RLIMIT_CORE, 0, 0), rl(unix.RLIMIT_CORE, 0, 0)},
		{"resource not read: unlimited", rl(unix.RLIMIT_MSGQUEUE, 64<<10, 64<<10), rl(unix.RLIMIT_MSGQUEUE, 64<<10, 64<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := host.clamp([]nsinit.Rlimit{tc.want})
			if len(got) != 1 || got[0] != tc.got {
				t.Errorf("clamp(%+v) = %+v, want %+v", tc.want, got, tc.got)
			}
		})
	}
	// The wanted list itself is left alone.
	want := []nsinit.Rlimit{rl(unix.RLIMIT_NOFILE, 8192, 8192)}
	host.clamp(want)
	if want[0].Max != 8192 {
		t.Error("clamp changed its argument")
	}
}

func rl(res int, cur, max uint64) nsinit.Rlimit {
	return nsinit.Rlimit{Resource: res, Cur: cur, Max: max}
}

// Limits a job or the configuration asks for above the host's hard limits
// are refused, each named with the fix for the one who can apply it.
func TestRlimitsAboveHost(t *testing.T) {
	host := hostRlimits{unix.RLIMIT_NOFILE: 128, unix.RLIMIT_NPROC: 100, unix.RLIMIT_FSIZE: rlimInfinity}
	def := boxer.DefaultLimits() // 256 open files, 128 pids
	for _, tc := range []struct {
		name string
		lim  boxer.Limits
		// in the operator's error (fit) and in the caller's (allow); none
		// when the limits fit
		fit, allow []string
	}{
		{name: "fits", lim: boxer.Limits{OpenFiles: 128, Pids: 100, FileSizeBytes: 1 << 40}},
		{name: "open files", lim: boxer.Limits{OpenFiles: 256, Pids: 8, FileSizeBytes: 1},
			fit:   []string{"open files 256: boxer's hard RLIMIT_NOFILE is 128; raise it (systemd: LimitNOFILE=N; docker: --ulimit nofile=N:N; shell: ulimit -Hn N, as root) or lower the default open files"},
			allow: []string{"open files 256: this host allows at most 128 (its hard RLIMIT_NOFILE)"}},
		{name: "defaults: open files and pids", lim: def,
			fit: []string{"open files 256: boxer's hard RLIMIT_NOFILE is 128;",
				"pids 128: boxer's hard RLIMIT_NPROC is 100; raise it (systemd: LimitNPROC=N; docker: --ulimit nproc=N:N; shell: ulimit -Hu N, as root)"},
			allow: []string{"open files 256: this host allows at most 128 (its hard RLIMIT_NOFILE); pids 128: this host allows at most 100 (its hard RLIMIT_NPROC)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fitErr, allowErr := host.fit(tc.lim), host.allow(tc.lim)
			if tc.fit == nil {
				if fitErr != nil || allowErr != nil {
					t.Fatalf("fit: %v; allow: %v", fitErr, allowErr)
				}
				return
			}
			var be *boxer.Error
			if fitErr == nil || !errors.As(allowErr, &be) || be.Code != boxer.ECodeInvalidRequest {
				t.Fatalf("fit: %v; allow: %v (want an error and an invalid_request)", fitErr, allowErr)
			}
			for _, m := range tc.fit {
				if !strings.Contains(fitErr.Error(), m) {
					t.Errorf("fit: %q\ndoes not say %q", fitErr, m)
				}
			}
			for _, m := range tc.allow {
				if !strings.Contains(be.Message, m) {
					t.Errorf("allow: %q\ndoes not say %q", be.Message, m)
				}
			}
		})
	}
}

// An engine whose default limits the host cannot give does not start, and
// says why. The limits asked for are one above boxer's own hard limits.
func TestNewRefusesDefaultsAboveHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  int
		set  func(l *boxer.Limits, v uint64)
		want string
	}{
		{"open files", unix.RLIMIT_NOFILE, func(l *boxer.Limits, v uint64) { l.OpenFiles = int(v) }, "LimitNOFILE="},
		{"pids", unix.RLIMIT_NPROC, func(l *boxer.Limits, v uint64) { l.Pids = int(v) }, "LimitNPROC="},
		{"file size", unix.RLIMIT_FSIZE, func(l *boxer.Limits, v uint64) { l.FileSizeBytes = int64(v) }, "LimitFSIZE="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hard unix.Rlimit
			if err := unix.Getrlimit(tc.res, &hard); err != nil {
				t.Fatal(err)
			}
			if hard.Max >= 1<<62 {
				t.Skipf("boxer's hard %s is unlimited here: no limit can exceed it", upperName(tc.res))
			}
			cfg := Config{StateDir: t.TempDir(), CgroupName: "boxer-test-never-made"}
			tc.set(&cfg.Limits, hard.Max+1)
			e, err := New(context.Background(), cfg)
			if err == nil {
				e.Close()
				t.Fatalf("New started with %s %d above the hard limit %d", tc.name, hard.Max+1, hard.Max)
			}
			want := fmt.Sprintf("default limits: %s %d", tc.name, hard.Max+1)
			if msg := err.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, fmt.Sprintf("boxer's hard %s is %d", upperName(tc.res), hard.Max)) || !strings.Contains(msg, tc.want) {
				t.Errorf("New: %v\nwant it to say %q, the hard limit and how to raise it", err, want)
			}
		})
	}
}
