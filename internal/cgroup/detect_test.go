package cgroup

import (
	"reflect"
	"strings"
	"testing"
)

// Mount tables as the kernel writes them, one per kind of host.
const (
	mountsPureV2 = `25 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
26 1 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
`
	// This development VM: every v1 controller mounted on its own, and a
	// cgroup2 mount at unified without controllers.
	mountsHybridSeparate = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 30 0:32 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
37 30 0:34 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	selfHybridSeparate = `9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/65f7962afac2941d0aea90a231d4a81c
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
`
	// A systemd hybrid host (Debian 10, Ubuntu 20.04): cpu and cpuacct
	// co-mounted, and extra options in the super block field.
	mountsHybridSystemd = `25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
31 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
32 25 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
33 25 0:30 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,pids
34 25 0:31 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,freezer
35 25 0:32 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:19 - cgroup cgroup rw,net_cls,net_prio
`
	selfHybridSystemd = `12:freezer:/
11:pids:/system.slice/boxer.service
8:memory:/system.slice/boxer.service
5:cpu,cpuacct:/system.slice/boxer.service
3:net_cls,net_prio:/
1:name=systemd:/system.slice/boxer.service
0::/system.slice/boxer.service
`
	// A container without a cgroup namespace on a v1 host: each mount shows
	// only the container's part of the hierarchy.
	mountsV1Container = `600 590 0:40 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct
601 590 0:41 /docker/abc /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
602 590 0:42 /docker/abc /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
603 590 0:43 /docker/abc /sys/fs/cgroup/freezer rw,nosuid - cgroup cgroup rw,freezer
`
	selfV1Container = `5:freezer:/docker/abc
4:pids:/docker/abc/app
3:memory:/docker/abc/app
2:cpu,cpuacct:/docker/abc/app
`
)

func TestDetectLayout(t *testing.T) {
	hybridSystemdDir := "/sys/fs/cgroup/cpu,cpuacct/system.slice/boxer.service"
	tests := []struct {
		name      string
		root      string
		parent    string
		mountInfo string
		self      string
		want      layout
		wantErr   string
	}{
		{
			name:      "pure v2",
			mountInfo: mountsPureV2,
			self:      "0::/system.slice/boxer.service\n",
			want: layout{version: V2,
				v2Parent: "/sys/fs/cgroup/system.slice/boxer.service",
				v2Self:   "/sys/fs/cgroup/system.slice/boxer.service"},
		},
		{
			name:      "pure v2 with Parent",
			parent:    "/boxer.slice",
			mountInfo: mountsPureV2,
			self:      "0::/user.slice/user-1000.slice/session-2.scope\n",
			want: layout{version: V2,
				v2Parent: "/sys/fs/cgroup/boxer.slice",
				v2Self:   "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"},
		},
		{
			name:      "pure v2 in a container without cgroup namespace",
			mountInfo: "700 690 0:26 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			self:      "0::/kubepods/pod1/c1/init\n",
			want:      layout{version: V2, v2Parent: "/sys/fs/cgroup/init", v2Self: "/sys/fs/cgroup/init"},
		},
		{
			name:      "hybrid, controllers mounted separately, memory nested",
			mountInfo: mountsHybridSeparate,
			self:      selfHybridSeparate,
			want: layout{version: V1, v1Parents: map[string]string{
				"cpu":     "/sys/fs/cgroup/cpu",
				"cpuacct": "/sys/fs/cgroup/cpuacct",
				"memory":  "/sys/fs/cgroup/memory/process_api/65f7962afac2941d0aea90a231d4a81c",
				"pids":    "/sys/fs/cgroup/pids",
				"freezer": "/sys/fs/cgroup/freezer",
			}},
		},
		{
			name:      "hybrid systemd, cpu,cpuacct co-mounted",
			mountInfo: mountsHybridSystemd,
			self:      selfHybridSystemd,
			want: layout{version: V1, v1Parents: map[string]string{
				"cpu":     hybridSystemdDir,
				"cpuacct": hybridSystemdDir,
				"memory":  "/sys/fs/cgroup/memory/system.slice/boxer.service",
				"pids":    "/sys/fs/cgroup/pids/system.slice/boxer.service",
				"freezer": "/sys/fs/cgroup/freezer",
			}},
		},
		{
			name:      "hybrid systemd with Parent",
			parent:    "/boxer",
			mountInfo: mountsHybridSystemd,
			self:      selfHybridSystemd,
			want: layout{version: V1, v1Parents: map[string]string{
				"cpu":     "/sys/fs/cgroup/cpu,cpuacct/boxer",
				"cpuacct": "/sys/fs/cgroup/cpu,cpuacct/boxer",
				"memory":  "/sys/fs/cgroup/memory/boxer",
				"pids":    "/sys/fs/cgroup/pids/boxer",
				"freezer": "/sys/fs/cgroup/freezer/boxer",
			}},
		},
		{
			name:      "pure v1 host",
			mountInfo: withoutLines(mountsHybridSystemd, "cgroup2"),
			self:      withoutLines(selfHybridSystemd, "0::"),
			want: layout{version: V1, v1Parents: map[string]string{
				"cpu":     hybridSystemdDir,
				"cpuacct": hybridSystemdDir,
				"memory":  "/sys/fs/cgroup/memory/system.slice/boxer.service",
				"pids":    "/sys/fs/cgroup/pids/system.slice/boxer.service",
				"freezer": "/sys/fs/cgroup/freezer",
			}},
		},
		{
			name:      "pure v1 in a container without cgroup namespace",
			mountInfo: mountsV1Container,
			self:      selfV1Container,
			want: layout{version: V1, v1Parents: map[string]string{
				"cpu":     "/sys/fs/cgroup/cpu,cpuacct/app",
				"cpuacct": "/sys/fs/cgroup/cpu,cpuacct/app",
				"memory":  "/sys/fs/cgroup/memory/app",
				"pids":    "/sys/fs/cgroup/pids/app",
				"freezer": "/sys/fs/cgroup/freezer",
			}},
		},
		{
			name: "cgroup2 below root and no v1 controllers",
			mountInfo: `26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
27 25 0:24 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
`,
			self: "1:name=systemd:/a\n0::/a\n",
			want: layout{version: V2, v2Parent: "/sys/fs/cgroup/unified/a", v2Self: "/sys/fs/cgroup/unified/a"},
		},
		{
			name: "mounts outside root are ignored",
			root: "/sys/fs/cgroup",
			mountInfo: mountsHybridSeparate +
				"90 1 0:99 / /mnt/other rw - cgroup2 cgroup2 rw\n",
			self: selfHybridSeparate,
			want: layout{version: V1, v1Parents: map[string]string{
				"cpu":     "/sys/fs/cgroup/cpu",
				"cpuacct": "/sys/fs/cgroup/cpuacct",
				"memory":  "/sys/fs/cgroup/memory/process_api/65f7962afac2941d0aea90a231d4a81c",
				"pids":    "/sys/fs/cgroup/pids",
				"freezer": "/sys/fs/cgroup/freezer",
			}},
		},
		{
			name:      "escaped mount point",
			root:      "/tmp/my root",
			mountInfo: `25 1 0:22 / /tmp/my\040root rw - cgroup2 cgroup2 rw` + "\n",
			self:      "0::/\n",
			want:      layout{version: V2, v2Parent: "/tmp/my root", v2Self: "/tmp/my root"},
		},
		{
			name:      "no cgroup filesystem",
			mountInfo: "26 1 0:23 / /proc rw - proc proc rw\n",
			self:      "0::/\n",
			wantErr:   "no cgroup filesystem is mounted at or under /sys/fs/cgroup",
		},
		{
			name: "v1 without pids and freezer",
			mountInfo: `31 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
32 25 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
`,
			self:    "5:cpu,cpuacct:/\n4:memory:/\n",
			wantErr: "cgroup v1 controllers not mounted under /sys/fs/cgroup: pids, freezer",
		},
		{
			name:      "own cgroup outside the mounted part",
			mountInfo: mountsV1Container,
			self:      strings.ReplaceAll(selfV1Container, "3:memory:/docker/abc/app", "3:memory:/elsewhere"),
			wantErr:   "cgroup /elsewhere is outside the part of the hierarchy mounted at /sys/fs/cgroup/memory (/docker/abc)",
		},
		{
			name:      "v2 without a 0:: line",
			mountInfo: mountsPureV2,
			self:      "1:name=systemd:/\n",
			wantErr:   "no cgroup v2 line",
		},
		{
			name:      "malformed mountinfo",
			mountInfo: "25 1 0:22 / /sys/fs/cgroup\n",
			self:      "0::/\n",
			wantErr:   "parse mountinfo: malformed line",
		},
		{
			name:      "malformed /proc/self/cgroup",
			mountInfo: mountsPureV2,
			self:      "garbage\n",
			wantErr:   "parse /proc/self/cgroup: malformed line",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.root
			if root == "" {
				root = "/sys/fs/cgroup"
			}
			got, err := detectLayout(root, tt.parent, tt.mountInfo, tt.self)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("detectLayout error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("detectLayout: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("detectLayout =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// withoutLines drops the lines of s that contain substr.
func withoutLines(s, substr string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.Contains(line, substr) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "defaults", opts: Options{}},
		{name: "relative root", opts: Options{Root: "sys/fs/cgroup"}, wantErr: "not an absolute path"},
		{name: "relative parent", opts: Options{Parent: "boxer.slice"}, wantErr: "not a clean absolute cgroup path"},
		{name: "parent climbing out", opts: Options{Parent: "/a/../../b"}, wantErr: "not a clean absolute cgroup path"},
		{name: "name with slash", opts: Options{Name: "a/b"}, wantErr: `invalid Name "a/b"`},
		{name: "name dot-dot", opts: Options{Name: ".."}, wantErr: `invalid Name ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.withDefaults().validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("validate error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCPUQuota(t *testing.T) {
	tests := []struct {
		name string
		cpus float64
		want int64
	}{
		{"unlimited", 0, -1},
		{"half", 0.5, 50000},
		{"two", 2, 200000},
		{"rounded", 1.234564, 123456},
		{"below the kernel's 1 ms minimum", 0.000004, 1000},
		{"boxer.MinCPUs", 0.1, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Resources{CPUs: tt.cpus}).cpuQuotaUs(); got != tt.want {
				t.Errorf("cpuQuotaUs(%v) = %d, want %d", tt.cpus, got, tt.want)
			}
		})
	}
}
