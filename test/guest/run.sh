#!/usr/bin/env bash
# Boots Debian's cloud kernels (cgroup v2) in qemu guests and runs boxer's
# binary and Go test binaries inside them: see test/guest/README.md.
#
#   ./test/guest/run.sh [--kernels 6.1,6.12,6.1+systemd] [--suite quick|full|attacks|bench] [--cases REGEX] [--verbose] [--keep] [--timeout 8m]
#
# Needs root (apt-get, virtiofsd). Environment: BOXER_GUEST_CACHE (default
# .cache/guest in the repo), BOXER_GUEST_TIMEOUT (per kernel; 8m quick, 10m
# quick with container-userns, 60m full), BOXER_GUEST_MEM (2G; 6G with
# container-userns), BOXER_GUEST_KVM=1 to use KVM instead of TCG (a KVM
# guest hangs on the machines this was written on), BOXER_GUEST_ACCEL to
# replace qemu's accelerator and CPU arguments, BOXER_GUEST_IMAGE the OCI
# layout with boxer's image for container-userns (default .cache/image/oci,
# where deploy/image/build.sh puts it).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${BOXER_GUEST_CACHE:-$repo/.cache/guest}
# A label is a kernel; +systemd boots the host's systemd as the guest's
# init and runs the systemd suite (test/guest/systemd.sh) in place of the
# chosen one.
kernels=6.1,6.12,6.1+systemd
suite=quick
keep=0
cases=
verbose=0
timeout=${BOXER_GUEST_TIMEOUT:-}
mem=${BOXER_GUEST_MEM:-2G}

usage() { sed -n 's/^#   //p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  --kernels) kernels=${2:?}; shift 2 ;;
  --suite) suite=${2:?}; shift 2 ;;
  --cases) cases=${2:?}; shift 2 ;;
  --verbose) verbose=1; shift ;;
  --keep) keep=1; shift ;;
  --timeout) timeout=${2:?}; shift 2 ;;
  *) usage ;;
  esac
done
# container-userns (suite.sh) unpacks boxer's 1.2 GB image into the
# guest's memory and runs it: more memory, and 2 minutes more, when chosen.
userns_case=0
if [ "$suite" = quick ] && [[ container-userns =~ ${cases:-.} ]]; then
  userns_case=1
  mem=${BOXER_GUEST_MEM:-6G}
fi
case "$suite" in quick) : "${timeout:=$((8 + 2 * userns_case))m}" ;; full) : "${timeout:=60m}" ;; attacks) : "${timeout:=30m}" ;; bench) : "${timeout:=40m}"; verbose=1 ;; *) usage ;; esac
[ "$(id -u)" = 0 ] || { echo "guest: run as root (apt-get, virtiofsd)" >&2; exit 1; }
# Paths travel on the kernel command line, split at whitespace.
case "$repo$cache$cases" in *[[:space:]]*) echo "guest: the repo and cache paths and --cases may not hold spaces" >&2; exit 1 ;; esac

log() { echo "guest: $*" >&2; }

# --- Host packages: CI starts on fresh machines. The guest runs the host's
# python3 (through virtiofs), with numpy and pandas, and qemu boots it from
# a busybox initramfs.
"$repo/scripts/setup.sh" qemu-system-x86 busybox-static cpio xz-utils >&2

# --- Kernels: Debian's linux-image-cloud-amd64, fetched through a private
# apt configuration so that the host's sources are left alone.
declare -A suite_of=([6.1]=bookworm [6.12]=bookworm-backports)
apt_dir=$cache/apt
O=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)

apt_update() {
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  printf 'deb http://deb.debian.org/debian %s main\n' bookworm bookworm-backports >"$apt_dir/sources.list"
  # Once a day is enough; without the network, yesterday's lists still name
  # the cached kernels.
  if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440)" ]; then
    apt-get "${O[@]}" update -qq ||
      [ -n "$(find "$apt_dir/lists" -maxdepth 1 -name '*_Packages*')" ] ||
      { log "apt-get update failed and no lists are cached"; exit 1; }
  fi
}

# fetch_kernel LABEL prints the folder holding LABEL's vmlinuz and the
# virtio modules the initramfs loads (none for kernels that build them in).
fetch_kernel() {
  local label=$1 dist ver pkg dir tmp m f
  dist=${suite_of[$label]:-}
  [ -n "$dist" ] || { log "unknown kernel $label (known: ${!suite_of[*]})"; exit 1; }
  # madison lists the newest version first.
  ver=$(apt-cache "${O[@]}" madison linux-image-cloud-amd64 | awk -F' *[|] *' -v d=" $dist/main " 'index($3, d) { print $2; exit }')
  [ -n "$ver" ] || { log "no linux-image-cloud-amd64 in $dist"; exit 1; }
  case "$ver" in "$label".*) ;; *) log "$dist's cloud kernel is now $ver, not $label: update suite_of in $0"; exit 1 ;; esac
  pkg=$(apt-cache "${O[@]}" depends "linux-image-cloud-amd64=$ver" | sed -n 's/^ *Depends: \(linux-image-[^ ]*\).*/\1/p' | head -1)
  [ -n "$pkg" ] || { log "linux-image-cloud-amd64=$ver depends on no linux-image package"; exit 1; }
  dir=$cache/kernels/${pkg}_$ver
  if [ ! -f "$dir/vmlinuz" ]; then
    log "fetching $pkg ($ver) from $dist"
    tmp=$(mktemp -d "$cache/kernels/.fetch.XXXXXX")
    (cd "$tmp" && apt-get "${O[@]}" download -qq "$pkg=$ver") >&2
    dpkg-deb -x "$tmp"/*.deb "$tmp/x"
    mkdir -p "$tmp/out/modules"
    cp "$tmp"/x/boot/vmlinuz-* "$tmp/out/vmlinuz"
    for m in virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci fuse virtiofs; do
      f=$(find "$tmp/x/lib/modules" -name "$m.ko" -o -name "$m.ko.xz" | head -1)
      case "$f" in
      *.xz) xz -dc "$f" >"$tmp/out/modules/$m.ko" ;;
      ?*) cp "$f" "$tmp/out/modules/" ;;
      esac
    done
    rm -rf "$dir" && mv "$tmp/out" "$dir" && rm -rf "$tmp"
  fi
  echo "$dir"
}

mkdir -p "$cache/kernels" "$cache/runs"
apt_update
declare -A kdir
IFS=, read -ra labels <<<"$kernels"
for k in "${labels[@]}"; do kdir[$k]=$(fetch_kernel "${k%+systemd}"); done

# --- The run folder: what the guest reads, through virtiofs, read-only.
work=$(mktemp -d "$cache/runs/$(date +%Y%m%d-%H%M%S).XXXX")
sockdir=$(mktemp -d /tmp/boxer-guest.XXXXXX) # short: a socket path is at most 107 bytes
vfs_pid=
cleanup() {
  if [ -n "$vfs_pid" ]; then kill "$vfs_pid" 2>/dev/null; wait "$vfs_pid" 2>/dev/null; fi
  rm -rf "$sockdir"
  if [ "$keep" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

log "building into $work"
(cd "$repo" && go build -o "$work/bin/boxer" ./cmd/boxer)
for pkg in internal/cgroup internal/sandbox internal/pool cmd/boxer internal/api; do
  (cd "$repo" && go test -c -o "$work/tests/$(basename "$pkg").test" "./$pkg")
done
[ "$suite" = bench ] && (cd "$repo" && go build -o "$work/bin/bench-service" ./bench/service)

# --- container-userns (quick suite): boxer's image as a user-namespaced
# container runs it (suite.sh). The guest has no overlayfs for Podman's
# storage, and cannot read the image's 42,000 files through virtiofs
# (virtiofsd holds a descriptor per file the guest has looked up, more
# than this host's hard RLIMIT_NOFILE of 20000 lets it raise): so the image
# deploy/image/build.sh built (test/container/run.sh builds it before the
# guests in CI) is unpacked here with its files owned by the ids the
# guest's container maps to 0-65535, into one tar that the guest unpacks
# into its memory. Kept in the cache by the image's manifest digest. When
# this fails, the case fails in the guest for want of $work/userns.
userns_map=0:200000:65536 # as in suite.sh
prepare_userns() {
  local image=${BOXER_GUEST_IMAGE:-$repo/.cache/image/oci} digest udir tmp
  command -v umoci >/dev/null || { log "container-userns: umoci missing (apt-get install umoci)"; return 1; }
  digest=$(python3 -c 'import json, sys
for m in json.load(open(sys.argv[1]))["manifests"]:
    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "boxer": print(m["digest"].split(":")[1][:16])' \
    "$image/index.json" 2>/dev/null)
  [ -n "$digest" ] || { log "container-userns: no image $image:boxer (deploy/image/build.sh builds it)"; return 1; }
  udir=$cache/userns/$digest
  if [ ! -f "$udir/rootfs.tar" ]; then
    log "container-userns: unpacking $image:boxer ($digest), its ids moved to ${userns_map#*:}"
    rm -rf "$cache/userns" && mkdir -p "$cache/userns" && tmp=$(mktemp -d "$cache/userns/.unpack.XXXXXX") &&
      umoci unpack --uid-map "$userns_map" --gid-map "$userns_map" --image "$image:boxer" "$tmp/bundle" >/dev/null &&
      tar -C "$tmp/bundle/rootfs" --numeric-owner -cf "$tmp/rootfs.tar" . &&
      mv "$tmp/bundle/config.json" "$tmp/config.json" &&
      rm -rf "$tmp/bundle" && mv "$tmp" "$udir" || { log "container-userns: unpacking failed"; return 1; }
  fi
  # Links: the run folder's copy costs nothing and goes with it.
  mkdir "$work/userns" && ln "$udir/rootfs.tar" "$udir/config.json" "$work/userns/"
}
if [ "$userns_case" = 1 ]; then
  prepare_userns || log "container-userns will fail"
fi

# initrd LABEL builds the initramfs: static busybox, the init, the modules.
initrd() {
  local root=$work/initrd-$1
  mkdir -p "$root/bin" "$root/modules"
  cp /bin/busybox "$root/bin/busybox"
  cp "$repo/test/guest/init" "$root/init"
  cp "${kdir[$1]}"/modules/* "$root/modules/" 2>/dev/null || true
  (cd "$root" && find . | cpio -o -H newc --quiet) >"$work/initrd-$1.cpio"
  echo "$work/initrd-$1.cpio"
}

# boot LABEL runs the suite in one guest; the console goes to stdout, each
# line prefixed with the kernel's label, and to $work/console-LABEL.log.
boot() {
  # Two workarounds for this qemu's (7.2) TCG, both found booting 6.12: with
  # cmpxchg16b (cx16) the guest double-faults in the slab allocator in about
  # half of its boots, whatever the threading; with one host thread per vCPU
  # (MTTCG), a vCPU runs code the kernel is live-patching (an int3 oops in
  # the scheduler). Without both, 6.12 boots and runs the suite every time;
  # one thread for 2 vCPUs cost no measurable wall time here.
  local label=$1 sock=$sockdir/vfs-$1.sock accel rc guest_suite=$suite init=
  case "$label" in *+systemd) guest_suite=systemd init=" boxer.init=systemd" ;; esac
  read -ra accel <<<"${BOXER_GUEST_ACCEL:--accel tcg,thread=single -cpu max,-cx16}"
  [ "${BOXER_GUEST_KVM:-}" = 1 ] && accel=(-accel kvm -cpu host)
  # The whole host / is exported, and the guest mounts it read-only.
  # cache=always: the guest keeps what it has looked up instead of asking
  # the host again, which made a sandbox's start 5x faster under TCG (a
  # Python start is thousands of lookups). Files changed on the host while a
  # guest runs may then be seen late; the run folder is complete before boot.
  /usr/lib/qemu/virtiofsd --socket-path="$sock" -o source=/ -o cache=always -o sandbox=chroot \
    >"$work/virtiofsd-$label.log" 2>&1 &
  vfs_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { log "virtiofsd did not start: $(cat "$work/virtiofsd-$label.log")"; return 1; }
  local ird
  ird=$(initrd "$label")
  set +e
  # sed -u, not tr: tr's output to a pipe is block-buffered, so the console
  # would show in 4 KiB steps instead of line by line.
  timeout -k 10s "$timeout" qemu-system-x86_64 "${accel[@]}" -smp 2 -m "$mem" \
    -nodefaults -nic none -display none -serial stdio -monitor none -no-reboot \
    -object "memory-backend-memfd,id=mem,size=$mem,share=on" -numa node,memdev=mem \
    -chardev "socket,id=vfs,path=$sock" -device vhost-user-fs-pci,chardev=vfs,tag=host \
    -kernel "${kdir[$label]}/vmlinuz" -initrd "$ird" \
    -append "console=ttyS0 quiet loglevel=1 panic=-1 boxer.repo=$repo boxer.run=$work boxer.suite=$guest_suite$init${cases:+ boxer.cases=$cases} boxer.verbose=$verbose" \
    </dev/null 2>&1 | sed -u 's/\r$//' | tee "$work/console-$label.log" | sed -u "s/^/[$label] /"
  rc=${PIPESTATUS[0]}
  set -e
  kill "$vfs_pid" 2>/dev/null || true # it may have quit with its guest
  wait "$vfs_pid" 2>/dev/null || true
  vfs_pid=
  if [ "$rc" = 124 ]; then
    echo "guest: killed after $timeout (timeout)" | tee -a "$work/console-$label.log" | sed "s/^/[$label] /"
  fi
  return 0
}

# --- Boot each kernel in turn (two guests at once would share 2 cores and
# skew the timing tests), then sum up.
declare -A wall
for k in "${labels[@]}"; do
  log "booting $k ($(basename "${kdir[$k]}")), suite $suite, timeout $timeout"
  start=$SECONDS
  boot "$k"
  wall[$k]=$((SECONDS - start))
done

status=0 total_passed=0 total_failed=0
echo
echo "=== boxer guest summary (suite $suite)"
for k in "${labels[@]}"; do
  c=$work/console-$k.log
  echo "--- $k: $(basename "${kdir[$k]}"), wall $((wall[$k] / 60))m$((wall[$k] % 60))s"
  grep -E '^(PASS|FAIL) |^    failed: ' "$c" | sed 's/^/  /' || true
  marker=$(grep -E '^boxer-guest: result [0-9]+ passed, [0-9]+ failed$' "$c" || true)
  if [ -z "$marker" ]; then
    echo "  no result marker: the guest crashed, hung or its init failed"
    total_failed=$((total_failed + 1)) # the guest itself, as one
    grep -m3 -E 'Kernel panic|Oops|boxer-guest: init:|killed after' "$c" | sed 's/^/  /' || true
    status=1
  else
    echo "  ${marker#boxer-guest: }"
    read -r _ _ p _ f _ <<<"$marker"
    total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
    case "$marker" in *" 0 failed") ;; *) status=1 ;; esac
  fi
done
# The plain closing line, for readers of CI's output.
echo "guest: $total_passed passed, $total_failed failed"
exit $status
