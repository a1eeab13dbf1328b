package boxer

import (
	"strings"
	"testing"
	"time"
)

// The defaults are within bounds, each bound holds at its edge, and every
// limit out of bounds is named, all of them at once.
func TestLimitsValidate(t *testing.T) {
	d := DefaultLimits()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	edge := Limits{WallTime: MinWallTime, CPUs: MinCPUs, MemoryBytes: MinMemoryBytes, Pids: MinPids,
		OpenFiles: MinOpenFiles, DiskBytes: MinDiskBytes, FileSizeBytes: 1}
	if err := edge.Validate(); err != nil {
		t.Errorf("at the lower bounds: %v", err)
	}
	edge.CPUs = MaxCPUs
	if err := edge.Validate(); err != nil {
		t.Errorf("at the most CPUs: %v", err)
	}
	bad := Limits{WallTime: MinWallTime - time.Millisecond, CPUs: MaxCPUs + 0.1, MemoryBytes: MinMemoryBytes - 1,
		Pids: MinPids - 1, OpenFiles: MinOpenFiles - 1, DiskBytes: MinDiskBytes - 1, OutputBytes: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("out of bounds: no error")
	}
	for _, name := range []string{"wall time", "cpus", "memory", "pids", "open files", "disk", "output", "file size"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}
