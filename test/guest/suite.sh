#!/usr/bin/env bash
# The cases run inside the test guest, as root, in the guest's own root
# cgroup (cgroup v2, cpu/memory/pids handed down as systemd would). Usage:
# suite.sh quick|full [CASES-REGEX [VERBOSE]], with BOXER_REPO and BOXER_RUN set by the guest's init.
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
  ;;
full)
  for pkg in internal/cgroup internal/sandbox internal/pool cmd/boxer internal/api; do
    check "go-$(basename "$pkg")" as_service gotest "$pkg" -test.timeout 30m
  done
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
