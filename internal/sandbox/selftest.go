package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"boxer"
)

// Check is one line of a self-test: what was checked and what was seen.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// selfTestScript reports, from inside a sandbox, what the program can see
// and do. It is fixed text: the self-test never runs caller input.
const selfTestScript = `
import errno, json, os, resource, socket
def err(fn):
    try:
        fn(); return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
st = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open("/proc/self/status")}
def tcp():
    s = socket.socket(); s.settimeout(3); s.connect(("192.0.2.1", 80))
print(json.dumps({
  "uid": os.getuid(), "gid": os.getgid(),
  "cap_eff": st["CapEff"], "cap_bnd": st["CapBnd"],
  "no_new_privs": st["NoNewPrivs"], "seccomp": st["Seccomp"],
  "hostname": socket.gethostname(),
  "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
  "pid": os.getpid(),
  "write_etc": err(lambda: open("/etc/boxer-selftest", "w")),
  "write_work": err(lambda: open("selftest", "w")),
  "connect": err(tcp),
  "shadow": os.path.exists("/etc/shadow"),
  "rlimits": {str(r): resource.getrlimit(r) for r in range(16)},
}))
`

// SelfTest runs a sandbox and checks, from inside it, that every protection
// the engine is configured for is in force. boxer doctor prints it; boxer
// serve refuses to start unless every check passes.
func (e *Engine) SelfTest(ctx context.Context) []Check {
	res, err := e.Run(ctx, &boxer.Job{
		Argv:  []string{"python", "main.py"},
		Files: []boxer.File{{Path: "main.py", Content: []byte(selfTestScript)}},
	})
	if err != nil {
		return []Check{{Name: "sandbox starts", Detail: err.Error()}}
	}
	if res.Status != boxer.StatusOK {
		return []Check{{Name: "sandbox runs python", Detail: fmt.Sprintf("status %s, stderr: %.300s", res.Status, res.Stderr.Data)}}
	}
	var seen struct {
		UID, GID   int
		CapEff     string `json:"cap_eff"`
		CapBnd     string `json:"cap_bnd"`
		NoNewPrivs string `json:"no_new_privs"`
		Seccomp    string
		Hostname   string
		Pids       []int
		Pid        int
		WriteEtc   string `json:"write_etc"`
		WriteWork  string `json:"write_work"`
		Connect    string
		Shadow     bool
		Rlimits    map[string][2]int64 // resource -> soft, hard; -1 unlimited
	}
	if err := json.Unmarshal(res.Stdout.Data, &seen); err != nil {
		return []Check{{Name: "sandbox reports", Detail: err.Error()}}
	}
	check := func(name string, ok bool, format string, args ...any) Check {
		return Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)}
	}
	rlimitsOK, rlimitsSeen := e.checkRlimits(seen.Rlimits)
	wantSeccomp := "2"
	if e.cfg.NoSeccomp {
		wantSeccomp = "0"
	}
	return []Check{
		check("sandbox runs python", true, "%s %s, in %v", e.runtime.Name, e.runtime.Version, res.Wall.Round(1e6)),
		check("unprivileged uid", seen.UID == UID && seen.GID == UID, "uid %d gid %d", seen.UID, seen.GID),
		check("no capabilities", seen.CapEff == "0000000000000000" && seen.CapBnd == "0000000000000000", "effective %s, bounding %s", seen.CapEff, seen.CapBnd),
		check("no_new_privs", seen.NoNewPrivs == "1", "NoNewPrivs %s", seen.NoNewPrivs),
		check("seccomp filter", seen.Seccomp == wantSeccomp, "mode %s (want %s)", seen.Seccomp, wantSeccomp),
		check("pid namespace", len(seen.Pids) == 1 && seen.Pids[0] == seen.Pid, "visible pids %v", seen.Pids),
		check("uts namespace", seen.Hostname == Hostname, "hostname %q", seen.Hostname),
		check("network namespace", seen.Connect == "ENETUNREACH", "connect to 192.0.2.1:80: %s", seen.Connect),
		check("read-only root", seen.WriteEtc == "EROFS", "write /etc: %s", seen.WriteEtc),
		check("writable work dir", seen.WriteWork == "ok", "write work dir: %s", seen.WriteWork),
		check("host files hidden", !seen.Shadow, "/etc/shadow visible: %v", seen.Shadow),
		check("rlimits", rlimitsOK, "%s", rlimitsSeen),
	}
}

// checkRlimits compares the rlimits a sandbox with the default limits saw
// with what the engine gives it, and describes them: the doctor's line
// of what sandboxes get, and the zygote's own.
func (e *Engine) checkRlimits(seen map[string][2]int64) (bool, string) {
	want, got := wantedRlimits(e.cfg.Limits), e.rlimits(e.cfg.Limits)
	for _, g := range got {
		s, ok := seen[strconv.Itoa(g.Resource)]
		if !ok || uint64(s[0]) != g.Cur || uint64(s[1]) != g.Max { // -1 is rlimInfinity
			return false, fmt.Sprintf("%s is %d/%d inside a sandbox, want %s/%s", rlimitName(g.Resource), s[0], s[1],
				rlimitValue(g.Resource, g.Cur), rlimitValue(g.Resource, g.Max))
		}
	}
	return true, e.host.describe(want, got) + "; zygote " + e.host.describe(wantedZygoteRlimits(), e.zygoteRlimits())
}
