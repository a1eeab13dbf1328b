#!/usr/bin/env bash
# Builds boxer's OCI image offline, with no Docker engine and no registry:
# a Debian bookworm root from debootstrap (minbase) with Debian's python3
# and the scientific packages boxer's sandboxes offer, nothing recommended
# beside them, and boxer itself, packed by umoci into an OCI image layout.
#
#   deploy/image/build.sh [OUT]      # default OUT: .cache/image/oci
#
# The image is OUT:boxer (podman run oci:OUT:boxer, or skopeo copy it to a
# registry). Two layers: Debian with Python (cached by its package list in
# .cache/image, or $BOXER_IMAGE_CACHE, so a rebuild after a code change
# only packs boxer again) and boxer with its entrypoint. It prints the
# image's digest and size. Needs root (debootstrap, chroot) and Go.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.cache/image/oci}
cache=${BOXER_IMAGE_CACHE:-.cache/image}
suite=bookworm
mirror=${BOXER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What the sandboxes run: the same packages scripts/setup.sh installs on a
# host, and ca-certificates for the x402 facilitator's HTTPS.
packages=(python3 python3-numpy python3-pandas python3-matplotlib python3-scipy python3-pytest ca-certificates)

for tool in debootstrap umoci; do
  command -v "$tool" >/dev/null || { echo "build: $tool missing: apt-get install debootstrap umoci" >&2; exit 1; }
done
mkdir -p "$cache"

# The base layer's root: built once per package list and kept as a tar.
key=$(printf '%s\n' "$suite" "${packages[@]}" | sha256sum | cut -c1-12)
base="$cache/base-$key.tar"
if [ ! -f "$base" ]; then
  root=$(mktemp -d "$cache/root.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  echo "build: debootstrap $suite (minbase) into $root"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  echo "build: installing ${packages[*]}"
  # apt as root in the chroot (no _apt sandbox user to drop to there);
  # its chatter goes to the log, shown if it fails.
  apt=(chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root -qq)
  { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "${packages[@]}" && "${apt[@]}" clean; } \
    >"$cache/apt.log" 2>&1 || { tail -20 "$cache/apt.log" >&2; exit 1; }
  # What no program reads at run time: package lists, documentation,
  # translations, logs. dpkg's own records stay, so an image built FROM
  # this one can apt-get install more Python packages.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
    "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/var/log/* "$root"/var/cache/debconf/*-old
  # The state dir's parent must be searchable by the sandboxes' ids.
  mkdir -p "$root/run" "$root/var/lib/boxer"
  chmod 0755 "$root/run"
  tar -C "$root" --numeric-owner -cf "$base.tmp" .
  mv "$base.tmp" "$base"
  rm -rf "$root"
  trap - EXIT
fi

echo "build: boxer"
CGO_ENABLED=0 go build -trimpath -o "$cache/boxer" ./cmd/boxer

rm -rf "$out"
umoci init --layout "$out"
umoci new --image "$out:boxer"
bundle=$(mktemp -d "$cache/bundle.XXXXXX")
trap 'rm -rf "$bundle"' EXIT
umoci unpack --image "$out:boxer" "$bundle"
tar -C "$bundle/rootfs" --numeric-owner -xf "$base"
# The base tar's "." is its mktemp folder, 0700: a runtime that unpacks the
# layer itself (umoci, containerd's snapshotters) would give the image a
# root no one else may search, and boxer's checks refuse it.
chmod 0755 "$bundle/rootfs"
umoci repack --image "$out:boxer" --history.created_by "debootstrap $suite; apt-get install ${packages[*]}" "$bundle"
rm -rf "$bundle"
umoci unpack --image "$out:boxer" "$bundle"
install -m 0755 "$cache/boxer" "$bundle/rootfs/usr/local/bin/boxer"
install -m 0755 deploy/image/entrypoint.sh "$bundle/rootfs/usr/local/bin/boxer-entrypoint"
umoci repack --image "$out:boxer" --history.created_by "boxer $(git describe --always --dirty 2>/dev/null || echo unknown)" "$bundle"

# Root inside the container's user namespace (hostUsers: false in a pod,
# --uidmap with Podman): boxer makes namespaces, cgroups and id maps.
umoci config --image "$out:boxer" \
  --config.entrypoint /usr/local/bin/boxer-entrypoint \
  --config.cmd serve \
  --config.user 0:0 \
  --config.workingdir /var/lib/boxer \
  --config.exposedports 8080/tcp \
  --config.env BOXER_ADDR=0.0.0.0:8080 \
  --config.env BOXER_DATA_DIR=/var/lib/boxer \
  --config.env BOXER_STATE_DIR=/run/boxer \
  --config.stopsignal SIGTERM \
  --config.label org.opencontainers.image.source=boxer \
  --config.label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  --history.created_by "boxer's entrypoint and settings"
umoci gc --layout "$out"

manifest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$out/index.json")
size=$(python3 - "$out" "$manifest" <<'EOF'
import json, os, sys
out, digest = sys.argv[1], sys.argv[2]
blob = lambda d: os.path.join(out, "blobs", *d.split(":"))
m = json.load(open(blob(digest)))
print(sum(l["size"] for l in m["layers"]) + m["config"]["size"])
EOF
)
echo "build: image $out:boxer"
echo "build: manifest digest $manifest"
echo "build: compressed size $size bytes ($((size / 1048576)) MiB), unpacked $(du -sm "$base" | cut -f1) MiB base + $(du -sm "$cache/boxer" | cut -f1) MiB boxer"
