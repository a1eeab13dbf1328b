package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"boxer"
)

// idBlock is the default span of host ids one engine uses (Config.IDSpan),
// and the step between the default bases of engines on other state dirs.
const idBlock = 65536

// minIDSpan is the smallest IDSpan: room for the default MaxSandboxes.
const minIDSpan = 4096

// Config is the engine's configuration. The zero value of a field means its
// default (see Defaults).
type Config struct {
	// StateDir holds one directory per live sandbox (its root mount point
	// and work-dir tmpfs). It must be on a local filesystem and every
	// directory above it must be searchable by others (mode o+x), because
	// a sandbox's pid 1 runs as an unprivileged host uid. Default /run/boxer.
	StateDir string
	// Python is the host interpreter the "python" runtime runs. Default
	// /usr/bin/python3.
	Python string
	// ExtraBinds are more host paths made visible read-only in every
	// sandbox, e.g. a virtualenv's site-packages.
	ExtraBinds []string
	// CgroupParent places per-run cgroups under this cgroup (a path
	// relative to the hierarchy's root) instead of the one boxer runs in.
	CgroupParent string
	// CgroupName is the directory under the parent that holds the runs.
	// At start the engine kills and removes everything below it, left by a
	// previous instance, so two live engines must never share it. The
	// default is derived from StateDir, whose lock then guards both:
	// "boxer" for the default state dir, "boxer-<hash>" for any other.
	CgroupName string
	// IDBase is the first host uid/gid given to sandboxes, and IDSpan how
	// many the engine uses from there. The lower half is the cold
	// sandboxes': each live one takes two consecutive ids (its root, its
	// program) from [IDBase, IDBase+2*MaxSandboxes). Each of up to sixteen
	// live zygotes takes a 32nd of the span in the upper half. Nothing
	// else on the host should use them. The default base is 1,500,000,000
	// for the default state dir and, for any other, a block of 65,536 ids
	// above it chosen by the state dir's hash, so that two instances on one
	// host do not share ids. The default span is 65,536; a smaller one fits
	// a user namespace that maps few ids (a Kubernetes pod with hostUsers:
	// false has 65,536 in all, its own root among them). The range must be
	// mapped in boxer's own user namespace: New checks.
	IDBase uint32
	IDSpan uint32
	// MaxSandboxes bounds how many sandboxes may exist at once.
	MaxSandboxes int
	// TmpInodes caps the inodes of each tmpfs (work dir, /tmp, /dev/shm):
	// without it a run can fill kernel memory with empty files.
	TmpInodes int64
	// ArtifactBytes caps one artifact; ArtifactsTotalBytes all of a run's.
	ArtifactBytes       int64
	ArtifactsTotalBytes int64
	// Limits fills in what a job leaves unset.
	Limits boxer.Limits
	// NoSeccomp switches the syscall filter off. It exists for the attack
	// suite's sabotage runs, which prove each test can fail; boxer doctor
	// and serve report it loudly.
	NoSeccomp bool
	Logger    *slog.Logger
}

// WithDefaults returns c with every unset field given its default.
func (c Config) WithDefaults() Config {
	if c.StateDir == "" {
		c.StateDir = "/run/boxer"
	}
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	sum := sha256.Sum256([]byte(filepath.Clean(c.StateDir)))
	if c.CgroupName == "" {
		c.CgroupName = "boxer"
		if c.StateDir != "/run/boxer" {
			c.CgroupName = "boxer-" + hex.EncodeToString(sum[:6])
		}
	}
	if c.IDBase == 0 {
		c.IDBase = 1_500_000_000
		if c.StateDir != "/run/boxer" {
			c.IDBase += (1 + uint32(binary.BigEndian.Uint16(sum[:2]))%4096) * idBlock
		}
	}
	if c.IDSpan == 0 {
		c.IDSpan = idBlock
	}
	if c.MaxSandboxes == 0 {
		c.MaxSandboxes = 1024
	}
	if c.TmpInodes == 0 {
		c.TmpInodes = 16384
	}
	if c.ArtifactBytes == 0 {
		c.ArtifactBytes = 16 << 20
	}
	if c.ArtifactsTotalBytes == 0 {
		c.ArtifactsTotalBytes = 64 << 20
	}
	c.Limits = c.Limits.WithDefaults(boxer.DefaultLimits())
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a configuration the engine cannot run with.
func (c Config) Validate() error {
	var errs []error
	if !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("state dir %q: must be an absolute path", c.StateDir))
	}
	if !filepath.IsAbs(c.Python) {
		errs = append(errs, fmt.Errorf("python %q: must be an absolute path", c.Python))
	}
	for _, b := range c.ExtraBinds {
		if !filepath.IsAbs(b) {
			errs = append(errs, fmt.Errorf("extra bind %q: must be an absolute path", b))
		}
	}
	if c.MaxSandboxes < 1 {
		errs = append(errs, errors.New("max sandboxes: must be at least 1"))
	}
	if c.IDBase == 0 {
		errs = append(errs, errors.New("id base: must be above 0 (root's id)"))
	}
	if c.IDSpan < minIDSpan || c.IDSpan%16 != 0 {
		errs = append(errs, fmt.Errorf("id span %d: must be a multiple of 16, at least %d", c.IDSpan, minIDSpan))
	}
	if uint64(c.IDBase)+uint64(c.IDSpan) >= 1<<32-1 {
		errs = append(errs, errors.New("id base: the id range must end below 4294967295"))
	}
	if 2*c.MaxSandboxes > int(c.IDSpan/2) {
		errs = append(errs, fmt.Errorf("max sandboxes: at most %d with an id span of %d", c.IDSpan/4, c.IDSpan))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("default limits: %w", err))
	}
	return errors.Join(errs...)
}
