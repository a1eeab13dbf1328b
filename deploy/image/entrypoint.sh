#!/bin/sh
# boxer's entrypoint in its container image. Container runtimes (Docker,
# Podman, Kubernetes without privileged) mount the container's cgroup
# tree read-only; boxer makes a cgroup per run below its own. With
# CAP_SYS_ADMIN over the container's mount namespace, and the cgroup
# namespace runtimes give a container, these mounts are the container's
# to remount. In a user namespace (hostUsers: false) the runtime hands
# the container its cgroup (cgroup.procs, cgroup.subtree_control) and not
# its limits (memory.max stays the host's): boxer can make cgroups below
# and cannot raise its own. Where a remount is refused, boxer's checks
# (doctor, run before serve) say why.
set -e
while read -r _ dir fstype opts _; do
  case "$fstype:$dir:$opts" in
  cgroup*:/sys/fs/cgroup*:ro,* | cgroup*:/sys/fs/cgroup*:ro)
    mount -o remount,bind,rw "$dir" || echo "boxer-entrypoint: $dir stays read-only" >&2 ;;
  esac
done </proc/self/mounts
exec /usr/local/bin/boxer "$@"
