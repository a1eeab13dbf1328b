package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"boxer/internal/cgroup"
	"boxer/internal/sandbox"

	"golang.org/x/sys/unix"
)

const doctorUsage = `usage: boxer doctor [flags]

Checks that this host can run sandboxes with every protection boxer is
configured for, prints one line per check, and exits 1 with an explanation
when it cannot. It runs a real sandbox and inspects it from the inside.
`

func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ef := newEnvFlags("doctor", doctorUsage, stderr)
	cfg := engineFlags(ef)
	if !ef.parse(args) {
		return 2
	}
	checks := hostChecks(cfg)
	if allOK(checks) {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		e, err := sandbox.New(ctx, *cfg)
		if err != nil {
			checks = append(checks, sandbox.Check{Name: "engine starts", Detail: err.Error()})
		} else {
			rt := e.Runtime()
			checks = append(checks, sandbox.Check{Name: "python runtime", OK: true,
				Detail: fmt.Sprintf("%s %s at %s", rt.Name, rt.Version, rt.Path)})
			checks = append(checks, e.SelfTest(ctx)...)
			e.Close()
		}
	}
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(stdout, "%s %-22s %s\n", mark, c.Name, c.Detail)
	}
	if !allOK(checks) {
		fmt.Fprintln(stdout, "\nboxer cannot isolate programs safely on this host: fix the FAIL lines above.")
		return 1
	}
	fmt.Fprintln(stdout, "\nthis host can run boxer sandboxes with every configured protection.")
	return 0
}

func allOK(checks []sandbox.Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// hostChecks look at the kernel's features before any sandbox is tried,
// so that a failure names its cause rather than a setup step.
func hostChecks(cfg *sandbox.Config) []sandbox.Check {
	var checks []sandbox.Check
	add := func(name string, err error, ok string) {
		c := sandbox.Check{Name: name, OK: err == nil, Detail: ok}
		if err != nil {
			c.Detail = err.Error()
		}
		checks = append(checks, c)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	add("kernel", nil, unix.ByteSliceToString(uts.Release[:]))
	var rootErr error
	if os.Geteuid() != 0 {
		rootErr = errors.New("boxer must run as root: it creates namespaces, cgroups and mounts for each sandbox")
	}
	add("root", rootErr, "running as root")
	add("user namespaces", userNamespaces(), "enabled")
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup", "user"} {
		_, err := os.Stat("/proc/self/ns/" + ns)
		if err != nil {
			err = fmt.Errorf("this kernel has no %s namespaces", ns)
		}
		add(ns+" namespace", err, "available")
	}
	add("seccomp", seccompAvailable(), "filter mode available")
	mgr, err := cgroup.New(cgroup.Options{Parent: cfg.CgroupParent, Name: "boxer-doctor"})
	if err == nil {
		err = mgr.Check()
		p := mgr.Placement()
		add("cgroups", err, fmt.Sprintf("%s, controllers cpu, memory, pids usable; runs under %s, in %s", mgr.Version(), filepath.Dir(p.Base), p.How))
		_ = mgr.Close() // the probe's base is left empty: remove it
	} else {
		add("cgroups", err, "")
	}
	return checks
}

func userNamespaces() error {
	b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err != nil {
		return fmt.Errorf("cannot read user.max_user_namespaces: %w", err)
	}
	if strings.TrimSpace(string(b)) == "0" {
		return errors.New("user.max_user_namespaces is 0: set it above 0 (sysctl -w user.max_user_namespaces=10000)")
	}
	return nil
}

func seccompAvailable() error {
	// PR_GET_SECCOMP answers 0 when seccomp is built in and this process
	// is unfiltered; EINVAL means the kernel lacks it.
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if errors.Is(err, syscall.EINVAL) {
		return errors.New("this kernel has no seccomp (CONFIG_SECCOMP_FILTER)")
	}
	return err
}

func signalName(n int) string { return unix.SignalName(syscall.Signal(n)) }
