//go:build linux

package nsinit

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mount flags every sandbox mount carries unless it must not.
const (
	roFlags   = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	dataFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
)

// ProcMasked are /proc files hidden behind /dev/null: kernel memory, key
// and timer details that a program has no use for, and the host's file
// locks (locks), every process's on the machine. A warm child's /proc
// masks the same (zygote.py's _mount_proc).
var ProcMasked = []string{"kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger", "kallsyms", "locks"}

// ProcReadOnly are /proc directories made read-only, so no sysctl or IRQ
// setting can be written even by a process that gained privilege.
var ProcReadOnly = []string{"sys", "bus", "fs", "irq"}

// buildRoot assembles the sandbox's root on s.Root and pivots into it.
//
// Postconditions: / is a read-only tmpfs holding only what s lists; the work
// dir, /tmp and /dev/shm are the only writable places; the host's mount tree
// is detached; the hostname is set and loopback is up.
func buildRoot(s *Setup) error {
	// Nothing mounted below may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return wrap("make / private", err)
	}
	r := s.Root
	if err := unix.Mount("tmpfs", r, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,nr_inodes=4096,mode=0755"); err != nil {
		return wrap("mount root tmpfs", err)
	}
	for _, d := range []string{"proc", "dev", "tmp", "etc", s.WorkDir} {
		if err := os.MkdirAll(filepath.Join(r, d), 0o755); err != nil {
			return wrap("mkdir "+d, err)
		}
	}
	for _, b := range s.Binds {
		if err := bindReadOnly(b.Source, filepath.Join(r, b.Target)); err != nil {
			return err
		}
	}
	if err := bindWork(s.Work, filepath.Join(r, s.WorkDir)); err != nil {
		return err
	}
	tmpOpts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", s.TmpBytes, s.TmpInodes)
	if err := unix.Mount("tmpfs", filepath.Join(r, "tmp"), "tmpfs", dataFlags, tmpOpts); err != nil {
		return wrap("mount /tmp", err)
	}
	if err := buildDev(r, s.Devices, tmpOpts); err != nil {
		return err
	}
	for _, f := range s.Files {
		p := filepath.Join(r, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return wrap("mkdir for "+f.Path, err)
		}
		if err := os.WriteFile(p, []byte(f.Content), os.FileMode(f.Mode)); err != nil {
			return wrap("write "+f.Path, err)
		}
	}
	for _, l := range s.Symlinks {
		p := filepath.Join(r, l.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return wrap("mkdir for "+l.Path, err)
		}
		if err := os.Symlink(l.Target, p); err != nil {
			return wrap("symlink "+l.Path, err)
		}
	}
	if err := mountProc(r, s.Sysctls); err != nil {
		return err
	}
	if err := pivot(r); err != nil {
		return err
	}
	// The root tmpfs is ours (mounted in our user namespace), so its flags
	// are not locked and it can be made read-only as a whole.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|roFlags, ""); err != nil {
		return wrap("remount / read-only", err)
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return wrap("sethostname", err)
	}
	return wrap("loopback up", loopbackUp())
}

// bindReadOnly bind-mounts host path src on dst, read-only, nosuid, nodev.
func bindReadOnly(src, dst string) error {
	if err := mountPoint(src, dst); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return wrap("bind "+src, err)
	}
	return remount(dst, roFlags, "remount read-only "+src)
}

// bindWork makes the run's work dir visible, writable but noexec.
func bindWork(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return wrap("bind work dir", err)
	}
	return remount(dst, dataFlags, "remount work dir")
}

// remount applies flags to the bind mount at p. In a user namespace the
// flags a mount inherited from the host (noexec, the atime mode) are locked:
// a remount that drops one fails with EPERM, so they are read back and kept.
func remount(p string, flags uintptr, step string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return wrap("statfs "+p, err)
	}
	locked := map[int64]uintptr{
		unix.ST_NOEXEC:     unix.MS_NOEXEC,
		unix.ST_NOATIME:    unix.MS_NOATIME,
		unix.ST_NODIRATIME: unix.MS_NODIRATIME,
		unix.ST_RELATIME:   unix.MS_RELATIME,
		unix.ST_NOSUID:     unix.MS_NOSUID,
		unix.ST_NODEV:      unix.MS_NODEV,
		unix.ST_RDONLY:     unix.MS_RDONLY,
	}
	for st1, ms := range locked {
		if st.Flags&st1 != 0 {
			flags |= ms
		}
	}
	return wrap(step, unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""))
}

// mountPoint creates dst as an empty directory or file, matching src.
func mountPoint(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return wrap("stat "+src, err)
	}
	if fi.IsDir() {
		return wrap("mkdir "+dst, os.MkdirAll(dst, 0o755))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return wrap("mkdir for "+dst, err)
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return wrap("create "+dst, err)
	}
	return f.Close()
}

// buildDev gives the sandbox a /dev of its own: a small tmpfs with the
// listed host device nodes bound in (a user namespace cannot mknod), the
// usual /proc/self/fd links and a /dev/shm for POSIX semaphores.
func buildDev(r string, devices []string, shmOpts string) error {
	dev := filepath.Join(r, "dev")
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755"); err != nil {
		return wrap("mount /dev", err)
	}
	for _, name := range devices {
		dst := filepath.Join(dev, name)
		src := filepath.Join("/dev", name)
		if err := mountPoint(src, dst); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return wrap("bind "+src, err)
		}
		// Not nodev (they are devices) and not read-only (writing to
		// /dev/null must work); noexec and nosuid all the same.
		if err := remount(dst, unix.MS_NOSUID|unix.MS_NOEXEC, "remount "+src); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return wrap("symlink /dev/"+name, err)
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o755); err != nil {
		return wrap("mkdir /dev/shm", err)
	}
	if err := unix.Mount("tmpfs", shm, "tmpfs", dataFlags, shmOpts); err != nil {
		return wrap("mount /dev/shm", err)
	}
	return wrap("remount /dev read-only",
		unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""))
}

// mountProc mounts a procfs of the sandbox's own PID namespace. hidepid=2
// hides processes of other uids, so the program cannot read pid 1's
// /proc entries. sysctls are written before /proc/sys turns read-only.
func mountProc(r string, sysctls map[string]string) error {
	proc := filepath.Join(r, "proc")
	if err := unix.Mount("proc", proc, "proc", dataFlags, "hidepid=2"); err != nil {
		return wrap("mount /proc", err)
	}
	for name, value := range sysctls {
		if err := os.WriteFile(filepath.Join(proc, "sys", name), []byte(value), 0); err != nil {
			return wrap("sysctl "+name, err)
		}
	}
	null := filepath.Join(r, "dev", "null")
	for _, name := range ProcMasked {
		p := filepath.Join(proc, name)
		if _, err := os.Stat(p); err != nil {
			continue // not built into this kernel
		}
		if err := unix.Mount(null, p, "", unix.MS_BIND, ""); err != nil {
			return wrap("mask /proc/"+name, err)
		}
	}
	for _, name := range ProcReadOnly {
		p := filepath.Join(proc, name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return wrap("bind /proc/"+name, err)
		}
		if err := remount(p, roFlags|unix.MS_NOEXEC, "remount /proc/"+name); err != nil {
			return err
		}
	}
	return nil
}

// pivot makes r the root and detaches the host's tree entirely.
func pivot(r string) error {
	if err := unix.Chdir(r); err != nil {
		return wrap("chdir new root", err)
	}
	// pivot_root(".", ".") stacks the old root on top of the new one;
	// detaching "." then removes the old root and every host mount in it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return wrap("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return wrap("detach old root", err)
	}
	return wrap("chdir /", unix.Chdir("/"))
}

// loopbackUp brings lo up, so a program may talk to itself on 127.0.0.1;
// the namespace has no other interface, so nothing else is reachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
