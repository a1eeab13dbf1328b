# The cases of the systemd suite, sourced by suite.sh in a guest whose PID 1
# is the host's own systemd (booted with boxer.init=systemd): what a
# Debian or Ubuntu host with systemd does when boxer is started there.

# wait_gone UNIT waits, bounded, until systemd has collected UNIT.
wait_gone() {
  for _ in $(seq 100); do
    [ "$(systemctl show -P LoadState "$1")" = not-found ] && return 0
    sleep 0.1
  done
  echo "$1 is still loaded: $(systemctl show -P ActiveState "$1")"
  return 1
}

# A login shell's session: boxer shares a scope with other processes, so it
# asks systemd over D-Bus for a delegated scope of its own, which systemd
# removes once boxer has gone.
systemd_login_scope() {
  local rc log=$out/login-scope.doctor
  systemd-run --scope --quiet --unit=session-test.scope \
    sh -c 'sleep 600 & other=$!; "$1" doctor; rc=$?; kill $other; exit $rc' sh "$boxer" >"$log" 2>&1
  rc=$?
  cat "$log"
  echo "boxer doctor exited $rc"
  grep -q "systemd transient scope boxer-doctor-[0-9]*.scope (Delegate=yes)" "$log" ||
    { echo "doctor's cgroups line does not name a systemd scope"; rc=1; }
  local scope
  scope=$(grep -o "boxer-doctor-[0-9]*\.scope" "$log" | head -1)
  [ -z "$scope" ] || wait_gone "$scope" || rc=1
  return $rc
}

# The operators' unit, deploy/systemd/boxer.service, as the README installs
# it (with the binary of this run): it starts, serves, finds its runs'
# cgroups in its own delegated cgroup, and stops cleanly.
systemd_unit() {
  local rc=0 d=/etc/systemd/system/boxer.service.d
  cp "$repo/deploy/systemd/boxer.service" /etc/systemd/system/boxer.service || return
  mkdir -p $d
  # The binary where the unit can see it: PrivateTmp= hides a run folder
  # below /tmp (a CI clone's), ProtectHome= one below /root or /home.
  mkdir -p /opt/boxer && cp "$boxer" /opt/boxer/boxer || return
  printf '[Service]\nExecStart=\nExecStart=/opt/boxer/boxer serve\nEnvironment=BOXER_ADDR=127.0.0.1:18081\n' >$d/guest.conf
  systemctl daemon-reload || return
  systemctl start boxer || { systemctl status boxer --no-pager; journalctl -u boxer --no-pager | tail -30; return 1; }
  python3 "$repo/test/guest/exec.py" http://127.0.0.1:18081 0 fork || rc=1
  local cg main
  cg=/sys/fs/cgroup$(systemctl show -P ControlGroup boxer)
  main=$(systemctl show -P MainPID boxer)
  echo "unit cgroup $cg, main pid $main"
  [ "$cg" = /sys/fs/cgroup/system.slice/boxer.service ] || { echo "want /system.slice/boxer.service"; rc=1; }
  grep -qx "$main" "$cg/boxer-supervisor/cgroup.procs" || { echo "boxer is not in $cg/boxer-supervisor"; rc=1; }
  [ -d "$cg/boxer" ] || { echo "no base $cg/boxer for the runs"; rc=1; }
  journalctl -u boxer --no-pager -o cat | grep -m1 '"msg":"serving"'
  systemctl stop boxer
  local result
  result=$(systemctl show -P Result boxer)
  echo "stopped: Result=$result"
  [ "$result" = success ] || { journalctl -u boxer --no-pager | tail -30; rc=1; }
  [ ! -d "$cg" ] || { echo "$cg left after stop"; find "$cg" -type d; rc=1; }
  return $rc
}

check systemd-login-scope systemd_login_scope
check systemd-unit systemd_unit
