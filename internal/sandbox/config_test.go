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

// The id span must hold the cold sandboxes' ids in its lower half and
// split evenly among the zygotes; anything else is refused at start.
func TestIDSpanValidate(t *testing.T) {
	for _, c := range []struct {
		span uint32
		max  int
		ok   bool
	}{
		{0, 0, true}, // the defaults: 65,536 ids, 1,024 sandboxes
		{minIDSpan, 1024, true},
		{minIDSpan, 1025, false}, // 2,050 cold ids, more than half the span
		{minIDSpan - 16, 1, false},
		{minIDSpan + 8, 1, false},
		{1 << 20, 100_000, true},
	} {
		cfg := Config{IDBase: 32768, IDSpan: c.span, MaxSandboxes: c.max}.WithDefaults()
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("span %d, max sandboxes %d: %v, want ok=%v", c.span, c.max, err, c.ok)
		}
	}
	if err := (Config{IDBase: 1<<32 - minIDSpan}).WithDefaults().Validate(); err == nil {
		t.Error("a range past the last id was accepted")
	}
}

// idsMapped reads an id map as the kernel writes it: the initial
// namespace's one line, a pod's 65,536 ids, and maps in pieces.
func TestIDsMapped(t *testing.T) {
	const initial = "         0          0 4294967295\n"
	const pod = "         0 2147483648      65536\n"
	const pieces = "0 1000 1\n40000 300000 8192\n32768 200000 7232\n"
	for _, c := range []struct {
		m      string
		lo, hi uint64
		want   bool
	}{
		{initial, 1_500_000_000, 1_500_000_000 + idBlock, true},
		{pod, 1_500_000_000, 1_500_000_000 + idBlock, false},
		{pod, 32768, 32768 + 16384, true},
		{pod, 32768, 65537, false},
		{pieces, 32768, 48192, true}, // two extents, out of order, meeting at 40000
		{pieces, 32768, 48193, false},
		{pieces, 1, 2, false},
		{"", 1, 2, false},
	} {
		if got := idsMapped(c.m, c.lo, c.hi); got != c.want {
			t.Errorf("%q [%d, %d): %v, want %v", c.m, c.lo, c.hi, got, c.want)
		}
	}
}
