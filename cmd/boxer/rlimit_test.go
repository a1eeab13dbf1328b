package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// underUlimit makes cmd start with both its RLIMIT_NOFILE limits at n, as
// a container or an init script leaves them, through the shell: the limit
// is then the binary's from its first instruction, as on such a host.
func underUlimit(cmd *exec.Cmd, n int) *exec.Cmd {
	args := append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, n), "sh", cmd.Path}, cmd.Args[1:]...)
	return exec.Command("/bin/sh", args...)
}

// boxer started with the kernel's default hard RLIMIT_NOFILE of 4096
// serves, warm pool and all, and runs jobs cold and warm with the open
// files they were given; boxer doctor shows what sandboxes get. With a
// hard limit under the default jobs' open files, serve refuses to start
// and says how to fix it.
func TestServeUnderLowHardNofile(t *testing.T) {
	bin := boxerBin(t)

	t.Run("4096 serves", func(t *testing.T) {
		s := startServeCmd(t, underUlimit(serveCmd(bin, stateDir(t), t.TempDir(), "--pool-min", "1"), 4096))
		code := `import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))`
		for _, tc := range []struct{ name, command string }{
			{"warm", ``},
			{"cold", `, "command": ["python", "-u", "main.py"]`},
		} {
			body := fmt.Sprintf(`{"files": {"main.py": %q}%s}`, code, tc.command)
			if status, _, m := s.post("/v1/run-python", body); status != 200 || m["stdout"] != "(256, 256)\n" {
				t.Errorf("%s: %d %v", tc.name, status, m)
			}
		}
	})

	t.Run("4096 doctor", func(t *testing.T) {
		out, err := underUlimit(exec.Command(bin, "doctor", "--state-dir", stateDir(t)), 4096).CombinedOutput()
		if err != nil {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, " rlimits ") {
				line = l
			}
		}
		for _, want := range []string{"ok   rlimits", "nofile 256 (hard 4096)", "zygote nofile 4096 (clamped to hard)"} {
			if !strings.Contains(line, want) {
				t.Errorf("doctor's rlimits line %q does not say %q\n%s", line, want, out)
			}
		}
	})

	t.Run("128 refuses", func(t *testing.T) {
		out, err := underUlimit(serveCmd(bin, stateDir(t), t.TempDir()), 128).CombinedOutput()
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("serve with a hard RLIMIT_NOFILE of 128: %v, want exit status 1\n%s", err, out)
		}
		if want := "open files 256: boxer's hard RLIMIT_NOFILE is 128; raise it (systemd: LimitNOFILE=N"; !strings.Contains(string(out), want) {
			t.Errorf("serve's log does not say %q:\n%s", want, out)
		}
	})
}
