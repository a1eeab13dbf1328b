package main

import (
	"fmt"
	"strconv"
	"strings"

	"boxer/internal/sandbox"
)

// byteSize is a flag value in bytes that accepts units: 512MiB, 64M, 1GiB.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	v, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSuffix(num, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (use bytes or a unit: 512MiB, 64M, 1GiB)", s)
	}
	return v * mult, nil
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// engineFlags registers the sandbox engine's settings, shared by run,
// doctor and serve.
func engineFlags(ef *envFlags) *sandbox.Config {
	c := &sandbox.Config{}
	ef.str(&c.StateDir, "state-dir", "BOXER_STATE_DIR", "/run/boxer", "directory for live sandboxes' mounts; others must be able to search its parents")
	ef.str(&c.Python, "python", "BOXER_PYTHON", "/usr/bin/python3", "host Python interpreter the sandboxes run")
	ef.str(&c.CgroupParent, "cgroup-parent", "BOXER_CGROUP_PARENT", "", "cgroup under which runs' cgroups are made; default: boxer's own")
	ef.id(&c.IDBase, "id-base", "BOXER_ID_BASE", "first host id given to sandboxes (default 1500000000, or a block above it chosen by --state-dir)")
	ef.id(&c.IDSpan, "id-span", "BOXER_ID_SPAN", "how many host ids from --id-base sandboxes use, a multiple of 16, at least 4096 (default 65536)")
	ef.list(&c.ExtraBinds, "extra-bind", "BOXER_EXTRA_BINDS", "", "more host paths shown read-only in every sandbox")
	return c
}
