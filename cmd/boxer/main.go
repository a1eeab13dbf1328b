// Command boxer runs untrusted Python in disposable, kernel-isolated
// sandboxes, from the command line (run), as an HTTP service (serve), as an
// agent's MCP tool (mcp), and checks that a host can do so safely (doctor).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"boxer/internal/sandbox/nsinit"

	"golang.org/x/sys/unix"
)

const usage = `usage: boxer <command> [flags]

commands:
  run      run a local Python script in a sandbox
  serve    serve the HTTP API (and MCP at /mcp)
  mcp      speak MCP on stdin and stdout, for an agent that starts boxer as a tool
  keys     add, list and revoke API keys
  doctor   check that this host can isolate programs safely
  version  print the version

Run 'boxer <command> -h' for a command's flags.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// A sandbox's pid 1 is this binary started again (see nsinit.Init): it
// becomes pid 1 here, before main and before any goroutine of boxer's.
func init() { nsinit.Init() }

func main() {
	keepInheritedFDs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs a command line and returns the process's exit code.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "doctor":
		return cmdDoctor(ctx, args[1:], stdout, stderr)
	case "serve":
		halveProcs()
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "keys":
		return cmdKeys(ctx, args[1:], stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, args[1:], os.Stdin, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "boxer", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "boxer: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// halveProcs gives the server's Go code half the CPUs it may use (at
// least one), unless GOMAXPROCS says otherwise. The server's own work is
// a quarter of the machine's CPU per job or less; the sandboxes take the
// rest. With a P for every CPU, the scheduler's idle Ps spin, steal and
// wake threads for the server's many short blocking calls: on the 2-core
// VM, under 16 clients of print(2+2), GOMAXPROCS=1 served 316-325 calls a
// second against 247-306 with 2, at 1.5 ms of the server's CPU a call
// against 1.6-2.2 (three interleaved 10 s runs each, 2026-12-03).
func halveProcs() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)/2))
	}
}

// keepInheritedFDs marks every descriptor boxer inherited beyond stdin,
// stdout and stderr close-on-exec. Go opens its own that way, but a
// descriptor its parent leaked (a shell's, a supervisor's) would otherwise
// pass to every sandbox's pid 1, the one process of a sandbox that keeps
// all it is given.
func keepInheritedFDs() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd") // kernels before 5.11
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
