# Sourced by test/container/run.sh and test/guest/suite.sh: podman run's
# options that give boxer's image exactly the privileges
# deploy/kubernetes/deployment.yaml asks for, in one place for both runs.
# Every capability dropped but SYS_ADMIN, SETUID, SETGID and DAC_OVERRIDE;
# Podman's default seccomp profile (RuntimeDefault); no_new_privs
# (allowPrivilegeEscalation: false); a read-only root with the data dir on
# a tmpfs (emptyDir); /proc unmasked (procMount: Unmasked); a cgroup
# namespace of its own. Explicit ulimits: Podman's defaults exceed some
# hosts' hard limits.
container_privileges=(
  --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096
  --cgroupns=private
  --cap-drop ALL --cap-add SYS_ADMIN,SETUID,SETGID,DAC_OVERRIDE
  --security-opt unmask=ALL --security-opt no-new-privileges
  --read-only --tmpfs /var/lib/boxer
)
