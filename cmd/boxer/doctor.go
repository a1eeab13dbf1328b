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
	"boxer/internal/x402"

	"golang.org/x/sys/unix"
)

const doctorUsage = `usage: boxer doctor [flags]

Checks that this host can run sandboxes with every protection boxer is
configured for, prints one line per check, and exits 1 with an explanation
when it cannot, followed by the fix for each failure where boxer runs
(systemd, Docker, Podman, Kubernetes, or a plain host). It runs a real
sandbox and inspects it from the inside. It takes serve's flags and
environment; with --payments x402 it also asks the facilitator's GET
/supported, as serve does at start.
`

func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ef := newEnvFlags("doctor", doctorUsage, stderr)
	// serve's flags and environment, so that doctor checks what serve
	// would run with.
	sc := serveFlags(ef)
	cfg := sc.Engine
	if !ef.parse(args) {
		return 2
	}
	// Before the cgroup probe moves boxer into a leaf of its own.
	env := detectEnv(readEnvFacts(os.Getenv, exists, os.ReadFile))
	checks := hostChecks(cfg)
	if allOK(checks) {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		e, err := sandbox.New(ctx, *cfg)
		if err != nil {
			checks = append(checks, finding{sandbox.Check{Name: "engine starts", Detail: err.Error()}, engineProblem(err)})
		} else {
			rt := e.Runtime()
			checks = append(checks, finding{Check: sandbox.Check{Name: "python runtime", OK: true,
				Detail: fmt.Sprintf("%s %s at %s", rt.Name, rt.Version, rt.Path)}})
			for _, c := range e.SelfTest(ctx) {
				checks = append(checks, finding{c, selfTestProblem(c)})
			}
			e.Close()
		}
	}
	checks = append(checks, paymentChecks(ctx, sc)...)
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(stdout, "%s %-22s %s\n", mark, c.Name, c.Detail)
	}
	if !allOK(checks) {
		fmt.Fprintln(stdout, "\nboxer cannot serve safely as configured on this host: fix the FAIL lines above.")
		printFixes(stdout, env, checks)
		return 1
	}
	fmt.Fprintln(stdout, "\nthis host can run boxer sandboxes with every configured protection.")
	return 0
}

// paymentChecks asks the facilitator, with payments on, what serve asks it
// at start (x402.Payments.CheckFacilitator): nothing with payments off.
func paymentChecks(ctx context.Context, sc *serveConfig) []finding {
	if sc.Payments.Mode == x402.ModeOff {
		return nil
	}
	if err := sc.pricePayments(); err != nil {
		return []finding{{sandbox.Check{Name: "x402 settings", Detail: err.Error()}, probPayments}}
	}
	p, err := x402.New(sc.Payments, x402.Deps{Nonces: x402.NewMemoryNonceStore()})
	if err != nil {
		return []finding{{sandbox.Check{Name: "x402 settings", Detail: err.Error()}, probPayments}}
	}
	switch err := p.CheckFacilitator(ctx); {
	case errors.Is(err, x402.ErrUnsupported):
		return []finding{{sandbox.Check{Name: "x402 facilitator", Detail: err.Error()}, probFacUnsupp}}
	case err != nil:
		return []finding{{sandbox.Check{Name: "x402 facilitator", Detail: err.Error()}, probFacilitator}}
	}
	detail := fmt.Sprintf("%s settles x402 v2 exact on %s", sc.Payments.FacilitatorURL, sc.Payments.Network)
	if fp := p.SolanaFeePayer(); fp != "" {
		detail += fmt.Sprintf(" and on %s (fee payer %s)", sc.Payments.Solana.Network, fp)
	}
	return []finding{{Check: sandbox.Check{Name: "x402 facilitator", OK: true, Detail: detail}}}
}

// finding is one line of the doctor's report and, when it failed, the kind
// of problem it shows, which decides the fix printed for it (see fixes).
type finding struct {
	sandbox.Check
	problem problem
}

func allOK(checks []finding) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// hostChecks look at the kernel's features before any sandbox is tried,
// so that a failure names its cause rather than a setup step.
func hostChecks(cfg *sandbox.Config) []finding {
	var checks []finding
	add := func(name string, err error, ok string, p problem) {
		c := finding{sandbox.Check{Name: name, OK: err == nil, Detail: ok}, probNone}
		if err != nil {
			c.Detail, c.problem = err.Error(), p
		}
		checks = append(checks, c)
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	add("kernel", nil, unix.ByteSliceToString(uts.Release[:]), probNone)
	root := os.Geteuid() == 0
	var rootErr error
	if !root {
		rootErr = errors.New("boxer must run as root: it creates namespaces, cgroups and mounts for each sandbox")
	}
	add("root", rootErr, "running as root", probRoot)
	if root {
		detail, err := capabilities(effectiveCaps())
		add("capabilities", err, detail, probCaps)
	}
	detail, err := userNamespaces(os.ReadFile)
	add("user namespaces", err, detail, probUserNS)
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup", "user"} {
		_, err := os.Stat("/proc/self/ns/" + ns)
		if err != nil {
			err = fmt.Errorf("this kernel has no %s namespaces", ns)
		}
		add(ns+" namespace", err, "available", probKernel)
	}
	add("seccomp", seccompAvailable(), "filter mode available", probKernel)
	mgr, err := cgroup.New(cgroup.Options{Parent: cfg.CgroupParent, Name: "boxer-doctor"})
	if err == nil {
		err = mgr.Check()
		p := mgr.Placement()
		ok := fmt.Sprintf("%s, controllers cpu, memory, pids usable; runs under %s, in %s", mgr.Version(), filepath.Dir(p.Base), p.How)
		if err != nil {
			add("cgroups", err, "", cgroupProblem(err))
		} else {
			add("cgroups", nil, ok, probNone)
		}
		_ = mgr.Close() // the probe's base is left empty: remove it
	} else {
		add("cgroups", err, "", cgroupProblem(err))
	}
	return checks
}

// neededCaps are the capabilities without which boxer starts no sandbox;
// deploy/systemd/boxer.service says what fails without each.
var neededCaps = []struct {
	bit  uint
	name string
	use  string
}{
	{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "mounts"},
	{unix.CAP_SETUID, "CAP_SETUID", "uid maps"},
	{unix.CAP_SETGID, "CAP_SETGID", "gid maps"},
	{unix.CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE", "session forks, unreadable artifacts"},
}

// capabilities checks boxer's effective capability set eff (a bit per
// capability) against neededCaps.
func capabilities(eff uint64) (string, error) {
	var have, missing []string
	for _, c := range neededCaps {
		if eff&(1<<c.bit) != 0 {
			have = append(have, c.name)
		} else {
			missing = append(missing, c.name+" ("+c.use+")")
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return strings.Join(have, ", "), nil
}

// effectiveCaps is this thread's effective capability set.
func effectiveCaps() uint64 {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32
}

// userNamespaces checks that the kernel lets boxer make user namespaces,
// reading /proc/sys through readFile. Ubuntu's (24.04 on)
// kernel.apparmor_restrict_unprivileged_userns is reported, not failed:
// it restricts processes without CAP_SYS_ADMIN, which boxer has (the
// capabilities check fails otherwise).
func userNamespaces(readFile func(string) ([]byte, error)) (string, error) {
	b, err := readFile("/proc/sys/user/max_user_namespaces")
	if err != nil {
		return "", fmt.Errorf("cannot read user.max_user_namespaces: %w", err)
	}
	if strings.TrimSpace(string(b)) == "0" {
		return "", errors.New("user.max_user_namespaces is 0: set it above 0 (sysctl -w user.max_user_namespaces=15000)")
	}
	if b, err := readFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return "enabled (kernel.apparmor_restrict_unprivileged_userns=1 applies only to processes without CAP_SYS_ADMIN)", nil
	}
	return "enabled", nil
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
