#!/usr/bin/env bash
# The cases run inside the test guest, as root, in the guest's own root
# cgroup (cgroup v2, cpu/memory/pids handed down as systemd would). Usage:
# suite.sh quick|full|attacks|bench [CASES-REGEX [VERBOSE]], with BOXER_REPO and BOXER_RUN set by the guest's init.
#
# Each case prints one line, "PASS <name> (<seconds>s)" or "FAIL <name> ...",
# then on failure its output indented with "    | ". The last line is the
# marker run.sh looks for: "boxer-guest: result <n> passed, <m> failed".
# The console is the only channel back to the host, so nothing else on it
# may start with PASS or FAIL.
set -u

suite=${1:-quick}
cases=${2:-.}     # a regular expression: only the cases whose names match
verbose=${3:-0} # 1: print every case's output, not only a failing one's
repo=$BOXER_REPO
run=$BOXER_RUN
boxer=$run/bin/boxer # built on the host: the guest has no Go toolchain
tests=$run/tests
out=/run/boxer-suite # tmpfs: the repo and the run folder are read-only, and under systemd a unit it starts may mount a new /tmp
mkdir -p "$out"
passed=0 failed=0

# check NAME FUNC [ARGS...] runs one case in a subshell, so that its
# ulimits, cwd and variables stay its own. A case may leave a one-line
# note in $out/$CASE.note, printed after its result either way.
check() {
  local name=$1 start=$SECONDS
  shift
  [[ $name =~ $cases ]] || return 0
  CASE=$name
  if ("$@") >"$out/$name.log" 2>&1; then
    echo "PASS $name ($((SECONDS - start))s)"
    [ "$verbose" = 1 ] && sed 's/^/    | /' "$out/$name.log"
    passed=$((passed + 1))
  else
    echo "FAIL $name ($((SECONDS - start))s)"
    sed 's/^/    | /' "$out/$name.log"
    failed=$((failed + 1))
  fi
  [ -s "$out/$name.note" ] && sed 's/^/    /' "$out/$name.note"
  return 0
}

# as_service raises the hard RLIMIT_NOFILE to what systemd gives a service
# or a login session (soft 1024, hard 524288), so that every case but
# doctor-default-nofile tests one thing: its own.
as_service() {
  ulimit -Hn 524288 && ulimit -Sn 1024 || return
  "$@"
}

# cg_remove DIR kills what is left in a cgroup tree and removes it, so that
# one case's cgroups cannot change the next case's outcome.
cg_remove() {
  [ -d "$1" ] || return 0
  echo 1 >"$1/cgroup.kill"
  for _ in $(seq 100); do
    [ -z "$(find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null)" ] && break
    sleep 0.1
  done
  find "$1" -depth -type d -exec rmdir {} +
}

# cg_left DIR prints each cgroup below DIR with its processes, and fails
# when one is not what boxer documents leaving: an empty
# <parent>/<name>-supervisor leaf (internal/cgroup/doc.go).
cg_left() {
  local bad=0 d procs
  echo "cgroups left below $1:"
  for d in $(cd "$1" && find . -mindepth 1 -type d | sed 's|^\./||' | sort); do
    procs=$(tr '\n' ' ' <"$1/$d/cgroup.procs")
    echo "  $d${procs:+ (processes: $procs)}"
    case "$d" in *-supervisor) [ -z "$procs" ] || bad=1 ;; *) bad=1 ;; esac
  done
  return $bad
}

# The kernel's default hard limit (4096), which init scripts, containers
# and minimal hosts keep: boxer must run under it.
doctor_default_nofile() {
  local hard
  hard=$(ulimit -Hn)
  echo "ulimit -Hn: $hard"
  [ "$hard" = 4096 ] || { echo "want 4096: the rig changed the guest's default"; return 1; }
  "$boxer" doctor
}

# As a systemd unit with Delegate=yes runs it: boxer alone in its cgroup.
doctor_delegated() {
  local cg=/sys/fs/cgroup/boxer.service rc
  mkdir "$cg" || return
  sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" doctor' sh "$cg" "$boxer"
  rc=$?
  echo "boxer doctor exited $rc"
  cg_left "$cg" || rc=1
  cg_remove "$cg"
  return $rc
}

# A login shell without systemd's help: boxer shares its session's cgroup
# with another process, which is not boxer's to move.
doctor_shared_cgroup() {
  local cg=/sys/fs/cgroup/user.slice/session-1.scope rc
  mkdir -p "$cg" || return
  echo "+cpu +memory +pids" >/sys/fs/cgroup/user.slice/cgroup.subtree_control || return
  sh -c 'echo $$ >"$1/cgroup.procs" || exit
         sleep 600 & other=$!
         "$2" doctor; rc=$?
         kill $other; wait $other; exit $rc' sh "$cg" "$boxer"
  rc=$?
  echo "boxer doctor exited $rc"
  cg_remove /sys/fs/cgroup/user.slice
  return $rc
}

# A container's entrypoint: its own cgroup namespace, whose root is a
# non-root cgroup of the host that holds boxer itself.
doctor_cgroupns_root() {
  local cg=/sys/fs/cgroup/ctr rc
  mkdir "$cg" || return
  # Inside, a fresh cgroup2 mount shows the namespace's root as /, as in a
  # container; $0 is boxer.
  local inner='umount /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup &&
    cat /proc/self/cgroup && exec "$0" doctor'
  sh -c 'echo $$ >"$1/cgroup.procs" && exec unshare --cgroup --mount sh -c "$2" "$3"' sh "$cg" "$inner" "$boxer"
  rc=$?
  echo "boxer doctor exited $rc"
  (cd "$cg" && find . -mindepth 1 -type d | sed 's|^|left: |')
  cg_remove "$cg"
  return $rc
}

# boxer serve answers the seed example on loopback and stops on SIGTERM.
serve_exec() {
  local dir pid rc
  dir=$(mktemp -d)
  "$boxer" serve --addr 127.0.0.1:18080 --state-dir /run/boxer-serve --data-dir "$dir/data" >"$dir/serve.log" 2>&1 &
  pid=$!
  python3 "$repo/test/guest/exec.py" http://127.0.0.1:18080 "$pid"
  rc=$?
  kill -TERM "$pid"
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "boxer serve still running 60 s after SIGTERM"
    kill -KILL "$pid"
    rc=1
  fi
  wait "$pid"
  local code=$?
  echo "boxer serve exited $code after SIGTERM"
  [ "$code" = 0 ] || rc=1
  [ "$rc" = 0 ] || { echo "--- serve log:"; cat "$dir/serve.log"; }
  return $rc
}

# container-userns: boxer's container image as Kubernetes runs it with
# hostUsers: false, on cgroup v2. run.sh unpacks the image built by
# deploy/image/build.sh (.cache/image/oci) with every file owned by the ids
# 200000-265535 and tars it into $run/userns; here it is unpacked into the
# guest's tmpfs (the guest has no overlayfs for Podman's storage) and run
# with Podman and runc from that directory (--rootfs) in a user namespace
# mapping 0-65535 to those ids, with test/container/run.sh's privileges
# (test/container/privileges.sh); boxer gets the id
# range deploy/kubernetes/configmap.yaml gives it. No network (the guest
# has no bridge): exec.py, the client, runs inside the container (podman
# exec). It checks boxer doctor as the entrypoint's command; then serve
# with a key: doctor beside it, print(2+2), a session and its fork, and
# exit status 0 on SIGTERM.
#
# The runtime's part: a user-namespaced container can make cgroups below
# its own only if its cgroup is handed to its root (the directory and the
# files /sys/kernel/cgroup/delegate names). runc does that only with its
# systemd driver and a read-write cgroup mount (Kubernetes: containerd's
# cgroup_writable = true), crun always; this guest has no systemd and no
# crun, and runc's cgroupfs driver leaves the cgroup to the host's root
# (boxer doctor: "write /sys/fs/cgroup/cgroup.subtree_control: permission
# denied"). So a createRuntime hook does here what runc's systemd driver
# does there, and nothing more.
userns_map=0:200000:65536
userns_dir=/run/userns
userns_name=boxer-userns
userns_podman=(podman --root "$userns_dir/storage" --runroot "$userns_dir/runroot" --storage-driver vfs
  --cgroup-manager cgroupfs --events-backend file --runtime runc --hooks-dir "$userns_dir/hooks")

# userns_start ARGS... runs the image with the manifests' privileges; ARGS
# go after them (podman run's options, then --rootfs DIR and the command).
userns_start() {
  . "$repo/test/container/privileges.sh"
  "${userns_podman[@]}" run --name "$userns_name" --uidmap "$userns_map" --gidmap "$userns_map" --network none \
    "${container_privileges[@]}" \
    --env-file "$userns_dir/env" --workdir /var/lib/boxer \
    "$@"
}

# The handover (above): runc runs it as the host's root with the
# container's state on stdin, once the container's cgroup and id maps exist.
userns_handover='pid=$(sed -n "s/.*\"pid\": *\([0-9]*\).*/\1/p")
cg=/sys/fs/cgroup$(sed -n "s/^0:://p" "/proc/$pid/cgroup")
uid=$(awk "\$1 == 0 { print \$2 }" "/proc/$pid/uid_map")
gid=$(awk "\$1 == 0 { print \$2 }" "/proc/$pid/gid_map")
chown "$uid:$gid" "$cg" || exit
for f in $(cat /sys/kernel/cgroup/delegate); do
  [ ! -e "$cg/$f" ] || chown "$uid:$gid" "$cg/$f" || exit
done'

container_userns() {
  local src=$run/userns dir=$userns_dir name=$userns_name rc=0 t status key doctor cg
  local podman=("${userns_podman[@]}")
  if [ ! -f "$src/rootfs.tar" ] || [ ! -f "$src/config.json" ]; then
    echo "no prepared image in $src: run.sh makes it, when this case is chosen, from the image"
    echo "deploy/image/build.sh builds (.cache/image/oci, or \$BOXER_GUEST_IMAGE); run.sh's log says why it did not"
    return 1
  fi
  # The unpacked image is a GiB of the guest's memory: gone after the case.
  trap '"${userns_podman[@]}" rm -f "$userns_name" >/dev/null 2>&1; rm -rf "$userns_dir"' EXIT
  t=$SECONDS
  rm -rf "$dir" && mkdir -p "$dir/rootfs" "$dir/hooks" || return
  tar -C "$dir/rootfs" --numeric-owner -xpf "$src/rootfs.tar" || return
  echo "image unpacked into tmpfs in $((SECONDS - t))s ($(du -sm "$dir/rootfs" | cut -f1) MiB), its root owned by $(stat -c "%u:%g, mode %a" "$dir/rootfs")"
  # The image's environment (umoci's runtime config of it), and boxer's ids.
  python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["process"]["env"]))' "$src/config.json" >"$dir/env" || return
  printf '%s\n' BOXER_ID_BASE=32768 BOXER_ID_SPAN=16384 >>"$dir/env"
  printf '%s\n' "$userns_handover" >"$dir/hooks/handover.sh"
  printf '{"version": "1.0.0", "hook": {"path": "/bin/sh", "args": ["sh", "%s"], "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}, "when": {"always": true}, "stages": ["createRuntime"]}\n' \
    "$dir/hooks/handover.sh" >"$dir/hooks/handover.json"

  echo "--- boxer doctor as the entrypoint's command"
  userns_start --rm --rootfs "$dir/rootfs" sh -c 'echo "uid_map: $(cat /proc/self/uid_map)"
    echo "cgroup: $(cat /proc/self/cgroup), owner $(stat -c %u:%g /sys/fs/cgroup); /run/.containerenv: $(ls /run/.containerenv 2>&1)"
    exec boxer-entrypoint doctor'
  status=$?
  echo "doctor exited $status"
  [ "$status" = 0 ] || return 1

  echo "--- boxer serve with a key"
  t=$SECONDS
  userns_start -d --rootfs "$dir/rootfs" sh -c 'boxer keys add --name userns >/var/lib/boxer/key && exec boxer-entrypoint serve' >/dev/null || return
  key=$("${podman[@]}" exec "$name" cat /var/lib/boxer/key) || rc=1
  "${podman[@]}" exec -i -e BOXER_KEY="$key" "$name" python3 - http://127.0.0.1:8080 0 fork <"$repo/test/guest/exec.py" || rc=1
  echo "ready and answered in $((SECONDS - t))s"
  # Its own state dir: the server holds the lock of /run/boxer.
  doctor=$("${podman[@]}" exec "$name" boxer doctor --state-dir /run/boxer-doctor 2>&1) || { rc=1; echo "$doctor"; }
  echo "doctor beside serve: $(echo "$doctor" | tail -1)"
  cg=/sys/fs/cgroup$("${podman[@]}" inspect -f '{{.State.CgroupPath}}' "$name")
  echo "the container's cgroup $cg, owned by $(stat -c %u:%g "$cg"), holds: $(cd "$cg" && find . -mindepth 1 -maxdepth 2 -type d | sort | tr '\n' ' ')"
  "${podman[@]}" stop -t 60 "$name" >/dev/null || rc=1
  status=$("${podman[@]}" inspect -f '{{.State.ExitCode}}' "$name")
  echo "boxer serve exited $status after SIGTERM"
  [ "$status" = 0 ] || rc=1
  [ "$rc" = 0 ] || { echo "--- container log:"; "${podman[@]}" logs "$name" 2>&1 | tail -40; }
  return $rc
}

# gotest PKG ARGS... runs the test binary of PKG (built by run.sh) in
# PKG's source folder, as go test would, and notes the slowest tests.
gotest() {
  local pkg=$1 log=$out/$CASE.gotest rc
  shift
  (cd "$repo/$pkg" && "$tests/$(basename "$pkg").test" -test.count=1 -test.v "$@") >"$log" 2>&1
  rc=$?
  {
    printf '%s passed, %s skipped, %s failed; slowest:' \
      "$(grep -c '^--- PASS' "$log")" "$(grep -c '^--- SKIP' "$log")" "$(grep -c '^--- FAIL' "$log")"
    sed -n 's/^--- [A-Z]*: \([^ ]*\) (\([0-9.]*\)s)$/\2 \1/p' "$log" | sort -rn | head -3 |
      while read -r s t; do printf ' %s %ss' "$t" "$s"; done
    echo
    # Each failed test with its first logged line, for the run's summary.
    awk '/^ *--- FAIL: /{name=$3; getline; sub(/^ +/, ""); print "failed: " name ": " substr($0, 1, 160)}' "$log"
  } >"$out/$CASE.note"
  # On failure the whole -v log is the output; -v shows each test's logs
  # in order, which is what a reader of a console needs.
  [ "$rc" = 0 ] || cat "$log"
  return $rc
}

echo "boxer-guest: suite $suite on $(uname -r), $(nproc) CPUs, $(ulimit -Hn) hard open files"

if [ "$suite" != systemd ]; then
  check doctor-default-nofile doctor_default_nofile
  check doctor-delegated as_service doctor_delegated
  check doctor-shared-cgroup as_service doctor_shared_cgroup
  check doctor-cgroupns-root as_service doctor_cgroupns_root
  check serve-exec as_service serve_exec
  # The warm pool's zygote under the kernel's default hard limit: serve
  # refused to start ("setrlimit 7: operation not permitted").
  check serve-default-nofile serve_exec
fi

export BOXER_TEST_BIN=$boxer # cmd/boxer's tests use it instead of go build
# TCG runs Python 10 to 40 times slower than the host: tests scale the time
# they give a slow program by this (never the bounds on boxer's reactions).
export BOXER_TEST_SLOWDOWN=${BOXER_TEST_SLOWDOWN:-20}
case "$suite" in
quick)
  # What differs between cgroup v1 and v2, and the limits and the teardown
  # that depend on it, on both the cold and the warm path.
  check go-cgroup-v2 as_service gotest internal/cgroup -test.timeout 5m -test.run V2
  check go-sandbox-outcomes as_service gotest internal/sandbox -test.timeout 5m \
    -test.run '^TestOutcomes$/^(cold|warm)$/^(oom|fork_bomb_stops_at_pids_limit|busy_loop_timeout)$'
  check go-sandbox-limits as_service gotest internal/sandbox -test.timeout 5m \
    -test.run '^(TestTimeoutIsPrompt|TestUsageReported|TestTeardown|TestWarmSmoke|TestWarmSlotCgroupStartsClean|TestChildOOMKillsReported|TestBoxersUmaskDoesNotReachRuns|TestCPUQuota)$'
  # A session's cgroup for its whole life: its memory read and limited,
  # its OOM, its timeout's interrupt and kill; a fork's own cgroup, uid and
  # namespaces, its memory copied by ptrace under the kernel's own rules.
  check go-sandbox-sessions as_service gotest internal/sandbox -test.timeout 5m \
    -test.run '^(TestSessionKeepsState|TestSessionOOM|TestSessionTimeout|TestSessionFork.*)$'
  # A warm slot's network namespace passed on only when its job made no IP
  # socket: the seccomp listener's behaviour is the kernel's (its waits
  # changed in 6.6).
  check go-sandbox-netns as_service gotest internal/sandbox -test.timeout 5m \
    -test.run '^(TestWarmNetnsKeptOnlyUntouched|TestWarmSessionNetnsNotKept|TestWarmNetnsNotKeptByDefault|TestWarmIPGateBudget)$'
  check container-userns as_service container_userns
  ;;
full)
  for pkg in internal/cgroup internal/sandbox internal/pool cmd/boxer internal/api; do
    check "go-$(basename "$pkg")" as_service gotest "$pkg" -test.timeout 30m
  done
  ;;
attacks)
  # The attack suite (cmd/boxer's TestServiceAttacks) against a service on
  # this kernel, cold and warm: 387 s on 6.12 under TCG (75 s on the host),
  # too long for every CI run.
  check go-attacks as_service gotest cmd/boxer -test.timeout 30m -test.run '^TestServiceAttacks$'
  ;;
bench)
  # bench/service on this kernel, on boxer's defaults: its figures are
  # ratios to a bare python3 measured in the same guest, which under TCG
  # starts Python some forty times slower than the host (no KVM here).
  # The case passes if the benchmark runs; its verdicts are in the output.
  check bench-service as_service env BOXER_BENCH_BIN="$boxer" "$run/bin/bench-service" -duration 60s -n 40 -imports 4 -sweep ''
  ;;
systemd)
  . "$repo/test/guest/systemd.sh"
  ;;
*)
  echo "boxer-guest: unknown suite $suite"
  exit 2
  ;;
esac

echo "boxer-guest: result $passed passed, $failed failed"
