package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"boxer/internal/sandbox"

	"golang.org/x/sys/unix"
)

func TestDetectEnv(t *testing.T) {
	const (
		unitV2   = "0::/system.slice/boxer.service\n"
		leafV2   = "0::/system.slice/boxer.service/boxer-supervisor\n"
		sessV2   = "0::/user.slice/user-0.slice/session-3.scope\n"
		userSvc  = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-term.scope\n"
		unitV1   = "12:pids:/system.slice/boxer.service\n1:name=systemd:/system.slice/boxer.service\n0::/\n"
		dockerV2 = "0::/\n"
	)
	for _, tc := range []struct {
		name  string
		facts envFacts
		kind  envKind
		unit  string
	}{
		{"nothing: a plain host", envFacts{SelfCgroup: "0::/\n"}, envHost, ""},
		{"empty facts", envFacts{}, envHost, ""},
		{"systemd as init, boxer in a login session", envFacts{SystemdInit: true, SelfCgroup: sessV2}, envSystemd, ""},
		{"in a unit, v2", envFacts{SystemdInit: true, InvocationID: "f00", SelfCgroup: unitV2}, envSystemd, "boxer.service"},
		{"in a unit, moved into its supervisor leaf", envFacts{SystemdInit: true, SelfCgroup: leafV2}, envSystemd, "boxer.service"},
		{"in a unit, v1", envFacts{SystemdInit: true, SelfCgroup: unitV1}, envSystemd, "boxer.service"},
		{"INVOCATION_ID alone", envFacts{InvocationID: "f00", SelfCgroup: dockerV2}, envSystemd, ""},
		{"a user manager's scope is no service", envFacts{SystemdInit: true, SelfCgroup: userSvc}, envSystemd, ""},
		{"docker", envFacts{Docker: true, SelfCgroup: dockerV2}, envDocker, ""},
		{"docker on a systemd host", envFacts{Docker: true, SystemdInit: true, InvocationID: "f00"}, envDocker, ""},
		{"podman, which may leave /.dockerenv too", envFacts{Podman: true, Docker: true}, envPodman, ""},
		{"podman run --rootfs: no .containerenv, $container", envFacts{Container: "podman"}, envPodman, ""},
		{"kubernetes before its runtime", envFacts{Kubernetes: true, Docker: true, Podman: true}, envKubernetes, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := detectEnv(tc.facts)
			if got.kind != tc.kind || got.unit != tc.unit {
				t.Errorf("detectEnv = %v, unit %q; want %v, unit %q", got.kind, got.unit, tc.kind, tc.unit)
			}
			if got.by == "" {
				t.Error("no reason given for the detection")
			}
		})
	}
}

func TestReadEnvFacts(t *testing.T) {
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "INVOCATION_ID": "abc", "container": "podman"}
	files := map[string]bool{"/.dockerenv": true, "/run/systemd/system": true}
	for _, tc := range []struct {
		uidMap string
		userns bool
	}{
		{"         0          0 4294967295\n", false},
		{"         0     200000      65536\n", true},
		{"", false}, // unreadable: not known to be one
	} {
		f := readEnvFacts(func(k string) string { return env[k] }, func(p string) bool { return files[p] },
			func(p string) ([]byte, error) {
				switch {
				case p == "/proc/self/cgroup":
					return []byte("0::/x.service\n"), nil
				case p == "/proc/self/uid_map" && tc.uidMap != "":
					return []byte(tc.uidMap), nil
				}
				return nil, fs.ErrNotExist
			})
		want := envFacts{Kubernetes: true, Docker: true, SystemdInit: true, InvocationID: "abc", SelfCgroup: "0::/x.service\n",
			Container: "podman", UserNS: tc.userns}
		if f != want {
			t.Errorf("uid_map %q: readEnvFacts = %+v, want %+v", tc.uidMap, f, want)
		}
	}
}

// In a user namespace, a cgroup boxer may not write to is the runtime's
// doing: the fix says so, not "needs CAP_DAC_OVERRIDE".
func TestFixCgroupDeniedInUserNamespace(t *testing.T) {
	denied := []finding{{sandbox.Check{Name: "cgroups", Detail: "write cgroup.subtree_control: permission denied"}, probCgroupDenied}}
	for _, tc := range []struct {
		env        runsOn
		want, deny string
	}{
		{runsOn{kind: envPodman, by: "$container", userns: true}, "did not hand the container its cgroup", "CAP_DAC_OVERRIDE"},
		{runsOn{kind: envKubernetes, by: "x", userns: true}, "cgroup_writable", "CAP_DAC_OVERRIDE"},
		{runsOn{kind: envHost, by: "x"}, "CAP_DAC_OVERRIDE", "hand"},
	} {
		var b strings.Builder
		printFixes(&b, tc.env, denied)
		out := strings.Join(strings.Fields(b.String()), " ")
		if !strings.Contains(out, tc.want) || strings.Contains(out, tc.deny) {
			t.Errorf("%+v: fixes %q, want %q and not %q", tc.env, out, tc.want, tc.deny)
		}
	}
}

// TestFixFor holds the table to what each environment needs: the flag or
// setting that fixes the problem there, and the fallbacks.
func TestFixFor(t *testing.T) {
	for _, tc := range []struct {
		p    problem
		on   envKind
		want []string
	}{
		{probProcMount, envHost, []string{"ProtectKernelTunables="}},
		{probProcMount, envSystemd, []string{"ProtectKernelTunables=", "ProtectProc="}},
		{probProcMount, envDocker, []string{"--security-opt systempaths=unconfined", "--security-opt apparmor=unconfined", "--privileged"}},
		{probProcMount, envPodman, []string{"--security-opt unmask=ALL", "--privileged"}},
		{probProcMount, envKubernetes, []string{"procMount: Unmasked", "hostUsers: false", "BOXER_ID_SPAN"}},
		{probNamespaces, envDocker, []string{"--security-opt seccomp=unconfined", "--cap-add SYS_ADMIN"}},
		{probNamespaces, envPodman, []string{"--security-opt seccomp=unconfined"}}, // Docker's text
		{probNamespaces, envKubernetes, []string{"RuntimeDefault", "appArmorProfile: {type: Unconfined}", "add: [SYS_ADMIN, SETUID, SETGID]"}},
		{probNamespaces, envSystemd, []string{"RestrictNamespaces=", "SystemCallFilter="}},
		{probCaps, envDocker, []string{"--cap-add SYS_ADMIN"}},
		{probCaps, envSystemd, []string{"CapabilityBoundingSet=", "CAP_SYS_ADMIN CAP_SETUID CAP_SETGID CAP_DAC_OVERRIDE"}},
		{probCaps, envKubernetes, []string{"add: [SYS_ADMIN, SETUID, SETGID, DAC_OVERRIDE]"}},
		{probCgroupDelegate, envSystemd, []string{"Delegate=yes"}},
		{probCgroupDelegate, envHost, []string{"deploy/systemd/boxer.service", "--cgroup-parent"}},
		{probCgroupDelegate, envDocker, []string{"--cgroupns=private", "mount -o remount,rw /sys/fs/cgroup"}},
		{probCgroupReadOnly, envPodman, []string{"--cgroupns=private", "unmask=ALL"}},
		{probCgroupReadOnly, envSystemd, []string{"ProtectControlGroups="}},
		{probCgroupBusy, envDocker, []string{"entrypoint", "--cgroupns=private"}},
		{probCgroupScope, envSystemd, []string{"systemd-run -p Delegate=yes"}}, // the host text
		{probCgroupDenied, envSystemd, []string{"CAP_DAC_OVERRIDE", "freezer"}},
		{probRlimit, envSystemd, []string{"LimitNOFILE=1048576"}},
		{probRlimit, envDocker, []string{"--ulimit nofile=1048576:1048576"}},
		{probRlimit, envPodman, []string{"--ulimit nofile=1048576:1048576"}},
		{probRlimit, envHost, []string{"ulimit -Hn"}},
		{probUserNS, envHost, []string{"user.max_user_namespaces", "apparmor_restrict_unprivileged_userns"}},
		{probStateDir, envSystemd, []string{"RuntimeDirectoryMode=0711"}},
		{probMountAccess, envDocker, []string{"apparmor=unconfined", "chmod o+x"}},
		{probRoot, envKubernetes, []string{"runAsUser: 0", "hostUsers: false"}},
		{probKernel, envDocker, []string{"CONFIG_USER_NS", "host's kernel"}},
		{probNone, envHost, []string{"No fix is known"}},
	} {
		t.Run(fmt.Sprintf("%d on %v", tc.p, tc.on), func(t *testing.T) {
			got := fixFor(tc.p, tc.on)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("fixFor = %q\nwant it to contain %q", got, w)
				}
			}
		})
	}
}

func TestEveryProblemHasAPlainHostFix(t *testing.T) {
	for p := probOther; p <= probMountAccess; p++ {
		if fixes[p][envHost] == "" {
			t.Errorf("problem %d has no envHost text", p)
		}
		for k := envHost; k <= envKubernetes; k++ {
			if s := fixFor(p, k); s == "" || strings.Contains(s, "  ") || !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, ".)") {
				t.Errorf("fixFor(%d, %v) = %q: empty, a double space, or no full stop", p, k, s)
			}
		}
	}
}

func TestCgroupProblem(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want problem
	}{
		{fmt.Errorf("cgroup: mkdir /sys/fs/cgroup/cpu/boxer-doctor: %w", unix.EROFS), probCgroupReadOnly},
		{fmt.Errorf("cgroup: mkdir /sys/fs/cgroup/freezer/boxer-doctor: %w", unix.EACCES), probCgroupDenied},
		{fmt.Errorf("cgroup: write /x/cgroup.subtree_control: %w", unix.EPERM), probCgroupDenied},
		{fmt.Errorf("%w: /x holds processes other than boxer, and a cgroup with processes cannot enable controllers for its children", unix.EBUSY), probCgroupBusy},
		{fmt.Errorf("cgroup: systemd: start boxer-doctor-1.scope: %w; boxer's cgroup /user.slice/session-1.scope holds 3 other processes, so boxer asked systemd for a scope of its own", unix.EACCES), probCgroupScope},
		{errors.New("cgroup: connect to systemd: dial unix /run/systemd/private: no such file"), probCgroupScope},
		{errors.New(`cgroup: boxer needs the cpu, memory, pids controllers but /x/cgroup.controllers lists only "memory pids" (missing: cpu). The cgroup above did not delegate them`), probCgroupDelegate},
		{fmt.Errorf("cgroup: open /x/cgroup.subtree_control: %w (enabling them down to /x/boxer)", fs.ErrNotExist), probCgroupDelegate},
		{errors.New("cgroup: swap is on but the kernel keeps no per-cgroup swap account"), probCgroupSwap},
		{errors.New("cgroup: something new"), probOther},
	} {
		if got := cgroupProblem(tc.err); got != tc.want {
			t.Errorf("cgroupProblem(%q) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestEngineAndSelfTestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  problem
		want problem
	}{
		{"state dir", engineProblem(errors.New("state dir: /root is not searchable by others (mode -rwx------); sandboxes could not reach their mount points")), probStateDir},
		{"rlimits", engineProblem(errors.New("default limits: open files 256: boxer's hard RLIMIT_NOFILE is 128; raise it")), probRlimit},
		{"cgroups", engineProblem(fmt.Errorf("cgroups: %w", fmt.Errorf("cgroup: mkdir x: %w", unix.EROFS))), probCgroupReadOnly},
		{"python", engineProblem(errors.New("python runtime /usr/bin/python3: exec: no such file")), probPython},
		{"ids", engineProblem(errors.New("ids 1500000000-1500065535 are not all mapped in boxer's user namespace (/proc/self/uid_map: 0 2147483648 65536); give sandboxes ids it maps with --id-base and --id-span")), probIDs},
		{"setup error", engineProblem(&sandbox.SetupError{Step: "mount /proc", Errno: syscall.EPERM, Msg: "mount /proc: operation not permitted"}), probProcMount},
		{"unknown", engineProblem(errors.New("seccomp: arch")), probOther},
		// Texts boxer doctor printed on this machine, each with one thing taken away.
		{"masked /proc", selfTest("sandbox starts", "sandbox setup: mount /proc: operation not permitted"), probProcMount},
		{"no CAP_SETUID", selfTest("sandbox starts", "start sandbox init: fork/exec /proc/self/exe: operation not permitted"), probNamespaces},
		{"no CAP_SETGID", selfTest("sandbox starts", "start sandbox init: drop supplementary groups: operation not permitted"), probCaps},
		{"no CAP_SYS_ADMIN", selfTest("sandbox starts", "mount work dir tmpfs: operation not permitted"), probMountDenied},
		{"mount point unreachable", selfTest("sandbox starts", "sandbox setup: mount root tmpfs: permission denied"), probMountAccess},
		{"cgroup namespace", selfTest("sandbox starts", "sandbox setup: unshare cgroup namespace: operation not permitted"), probNamespaces},
		{"other setup failure", selfTest("sandbox starts", "sandbox init: no \"ready\" within 10s"), probOther},
		{"python fails", selfTest("sandbox runs python", "status nonzero_exit, stderr: ..."), probPython},
		{"a protection missing", selfTest("no_new_privs", "NoNewPrivs 0"), probIsolation},
		{"passed", selfTestProblem(sandbox.Check{Name: "no_new_privs", OK: true}), probNone},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func selfTest(name, detail string) problem {
	return selfTestProblem(sandbox.Check{Name: name, Detail: detail})
}

func TestCapabilities(t *testing.T) {
	bits := func(caps ...int) uint64 {
		var m uint64
		for _, c := range caps {
			m |= 1 << c
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		eff     uint64
		wantErr string
		want    string
	}{
		{"full set", ^uint64(0), "", "CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE"},
		{"the unit's set", bits(unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_DAC_OVERRIDE), "", "CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE"},
		{"the unit's set before forks", bits(unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_DAC_READ_SEARCH), "missing CAP_DAC_OVERRIDE (session forks, unreadable artifacts)", ""},
		{"docker's default set", bits(unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL), "missing CAP_SYS_ADMIN (mounts)", ""},
		{"none", 0, "missing CAP_SYS_ADMIN (mounts), CAP_SETUID (uid maps), CAP_SETGID (gid maps), CAP_DAC_OVERRIDE (session forks, unreadable artifacts)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := capabilities(tc.eff)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(got, tc.want) {
				t.Errorf("capabilities = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestUserNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		wantErr  string
		wantText string
	}{
		{"enabled", map[string]string{"/proc/sys/user/max_user_namespaces": "63000\n"}, "", "enabled"},
		{"zero", map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"}, "user.max_user_namespaces is 0", ""},
		{"missing", map[string]string{}, "cannot read user.max_user_namespaces", ""},
		{"ubuntu's restriction is reported, not failed", map[string]string{
			"/proc/sys/user/max_user_namespaces":                     "63000\n",
			"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n",
		}, "", "only to processes without CAP_SYS_ADMIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := userNamespaces(func(p string) ([]byte, error) {
				if s, ok := tc.files[p]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(got, tc.wantText) {
				t.Errorf("userNamespaces = %q, %v; want %q", got, err, tc.wantText)
			}
		})
	}
}

func TestPrintFixes(t *testing.T) {
	findings := []finding{
		{sandbox.Check{Name: "kernel", OK: true}, probNone},
		{sandbox.Check{Name: "cgroups", Detail: "read-only"}, probCgroupReadOnly},
		{sandbox.Check{Name: "sandbox starts", Detail: "sandbox setup: mount /proc: operation not permitted"}, probProcMount},
		{sandbox.Check{Name: "other", Detail: "x"}, probCgroupReadOnly},
	}
	var b strings.Builder
	printFixes(&b, runsOn{kind: envDocker, by: "/.dockerenv"}, findings)
	out := b.String()
	if !strings.HasPrefix(out, "\nHow to fix on Docker (/.dockerenv):\n  cgroups, other: --cgroupns=private") {
		t.Errorf("output starts wrong:\n%s", out)
	}
	if strings.Count(out, "--cgroupns=private (on a cgroup v2 host)") != 1 || !strings.Contains(out, "\n  sandbox starts: --security-opt systempaths=unconfined") {
		t.Errorf("want one entry per problem, in order:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len(line) > 76 {
			t.Errorf("line longer than 76: %q", line)
		}
	}
	b.Reset()
	printFixes(&b, runsOn{kind: envSystemd, by: "/proc/self/cgroup", unit: "boxer.service"}, findings[:1])
	if b.Len() != 0 {
		t.Errorf("nothing failed, yet printed %q", b.String())
	}
	printFixes(&b, runsOn{kind: envSystemd, by: "/proc/self/cgroup", unit: "boxer.service"}, findings[1:2])
	if !strings.HasPrefix(b.String(), "\nHow to fix on systemd (boxer runs in boxer.service):\n  cgroups: Remove ProtectControlGroups=") {
		t.Errorf("systemd header or fix wrong:\n%s", b.String())
	}
}

// TestUnitFile holds deploy/systemd/boxer.service to what the doctor's
// fixes and boxer rely on.
func TestUnitFile(t *testing.T) {
	f, err := os.Open("../../deploy/systemd/boxer.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = append(set[k], v)
		}
	}
	one := func(k string) string {
		if len(set[k]) != 1 {
			t.Errorf("%s set %d times, want once", k, len(set[k]))
			return ""
		}
		return set[k][0]
	}
	for k, want := range map[string]string{
		"Delegate": "yes", "KillMode": "mixed", "LimitNOFILE": "1048576", "RuntimeDirectory": "boxer",
		"RuntimeDirectoryMode": "0711", "StateDirectory": "boxer", "Restart": "on-failure",
		"ExecStart": "/usr/local/bin/boxer serve", "NoNewPrivileges": "yes",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	caps := strings.Fields(one("CapabilityBoundingSet"))
	for _, c := range neededCaps {
		if !strings.Contains(" "+strings.Join(caps, " ")+" ", " "+c.name+" ") {
			t.Errorf("CapabilityBoundingSet lacks %s", c.name)
		}
	}
	env := map[string]string{}
	for _, e := range set["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	if env["BOXER_STATE_DIR"] != "/run/boxer" || env["BOXER_DATA_DIR"] != "/var/lib/boxer" {
		t.Errorf("state and data dirs %q, %q: want RuntimeDirectory's and StateDirectory's", env["BOXER_STATE_DIR"], env["BOXER_DATA_DIR"])
	}
	grace, err1 := time.ParseDuration(env["BOXER_SHUTDOWN_GRACE"])
	stop, err2 := time.ParseDuration(one("TimeoutStopSec"))
	if err1 != nil || err2 != nil || stop <= grace {
		t.Errorf("TimeoutStopSec %v must exceed BOXER_SHUTDOWN_GRACE %v (%v, %v)", stop, grace, err1, err2)
	}
	// Each of these breaks sandboxes (see the unit's comments).
	for _, k := range []string{"RestrictNamespaces", "SystemCallFilter", "PrivateUsers", "ProtectKernelTunables",
		"ProtectControlGroups", "ProtectKernelLogs", "ProtectProc", "ProtectHostname", "UMask", "User"} {
		if _, ok := set[k]; ok {
			t.Errorf("%s= is set", k)
		}
	}
}

// With --payments x402, doctor asks the facilitator what serve asks it at
// start, and says which of the three ways it fails: settings incomplete,
// no answer, an answer without boxer's payment.
func TestDoctorPaymentChecks(t *testing.T) {
	fac := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		network := strings.TrimPrefix(r.URL.Path, "/")
		network = strings.TrimSuffix(network, "/supported")
		fmt.Fprintf(w, `{"kinds":[{"x402Version":2,"scheme":"exact","network":%q}]}`, network)
	}))
	defer fac.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	pay := []string{"--payments", "x402", "--x402-pay-to", "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"}
	for _, tc := range []struct {
		name string
		args []string
		want problem // probNone: one ok line
	}{
		{"payments off", nil, probNone},
		{"no recipient", []string{"--payments", "x402", "--x402-facilitator-url", fac.URL + "/eip155:8453"}, probPayments},
		{"settles ours", append(pay, "--x402-facilitator-url", fac.URL+"/eip155:8453"), probNone},
		{"settles another network", append(pay, "--x402-facilitator-url", fac.URL+"/eip155:84532"), probFacUnsupp},
		{"does not answer", append(pay, "--x402-facilitator-url", closed.URL), probFacilitator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ef := newEnvFlags("doctor", doctorUsage, io.Discard)
			sc := serveFlags(ef)
			if !ef.parse(tc.args) {
				t.Fatalf("flags %q refused", tc.args)
			}
			got := paymentChecks(context.Background(), sc)
			if tc.args == nil {
				if len(got) != 0 {
					t.Fatalf("payments off: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].OK != (tc.want == probNone) || got[0].problem != tc.want {
				t.Fatalf("paymentChecks = %+v, want problem %d", got, tc.want)
			}
			t.Logf("%s: %s", got[0].Name, got[0].Detail)
		})
	}
}
