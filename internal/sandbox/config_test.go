package sandbox

import "testing"

// Two engines on different state dirs never share a cgroup base: each
// cleans its base at start, which would kill the other's sandboxes.
func TestCgroupNameFollowsStateDir(t *testing.T) {
	name := func(dir string) string { return Config{StateDir: dir}.WithDefaults().CgroupName }
	if got := name(""); got != "boxer" {
		t.Errorf("default state dir: cgroup %q, want boxer", got)
	}
	a, b := name("/run/boxer-a"), name("/run/boxer-b")
	if a == b || a == "boxer" || a != name("/run/boxer-a/") {
		t.Errorf("cgroup names %q and %q", a, b)
	}
	id := func(dir string) uint32 { return Config{StateDir: dir}.WithDefaults().IDBase }
	if id("") != 1_500_000_000 || id("/run/boxer-a") == id("/run/boxer-b") || id("/run/boxer-a") < 1_500_000_000+idBlock {
		t.Errorf("id bases %d %d %d", id(""), id("/run/boxer-a"), id("/run/boxer-b"))
	}
	if got := (Config{StateDir: "/x", CgroupName: "mine"}).WithDefaults().CgroupName; got != "mine" {
		t.Errorf("explicit name overridden: %q", got)
	}
}
