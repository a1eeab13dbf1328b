package sandbox

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// In a user namespace that maps 65,536 ids from 0 (a pod with hostUsers:
// false), the default sandbox ids are refused and a block inside is
// accepted: the map checked is the one the kernel wrote, read back from
// /proc/self/uid_map and gid_map in a child process placed there.
func TestIDsMappedInUserNamespace(t *testing.T) {
	if os.Getenv("BOXER_IDMAP_CHILD") == "1" {
		if err := checkIDsMapped(1_500_000_000, idBlock); err == nil || !strings.Contains(err.Error(), "--id-base") {
			t.Fatalf("default ids in a 65,536-id namespace: %v, want refused with the fix", err)
		}
		if err := checkIDsMapped(32768, 16384); err != nil {
			t.Fatalf("ids 32768-49151: %v", err)
		}
		if err := checkIDsMapped(60000, minIDSpan*2); err == nil {
			t.Fatal("ids 60000-68191, past the map's end: accepted")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mapping 65,536 ids into a user namespace needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIDsMappedInUserNamespace$", "-test.v")
	cmd.Env = append(os.Environ(), "BOXER_IDMAP_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 200000, Size: 65536}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 200000, Size: 65536}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestIDsMappedInUserNamespace") {
		t.Fatalf("child in a user namespace: %v\n%s", err, out)
	}
}
