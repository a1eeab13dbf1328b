#!/usr/bin/env bash
# Installs what boxer needs on a Debian or Ubuntu host: the Python runtime
# and the scientific packages the sandboxes offer. With --test, also what
# the tests need (Node.js and npm, for the x402 and MCP end-to-end tests
# with the protocols' official clients; Chromium, for the playground's test
# in a real browser; PostgreSQL, whose server the store's tests start, and
# HAProxy, the balancer of the cluster proof; debootstrap, umoci, skopeo,
# Podman and runc, which build and run the container image). Further arguments are more Debian packages to
# install (test/guest/run.sh's qemu and busybox). Idempotent; needs root.
#
#   scripts/setup.sh [--test] [PACKAGE...]
set -euo pipefail

packages=(python3 python3-numpy python3-pandas python3-matplotlib python3-scipy python3-pytest)
if [ "${1:-}" = "--test" ]; then
  shift
  command -v npm >/dev/null || packages+=(nodejs npm)
  packages+=(chromium postgresql haproxy debootstrap umoci skopeo podman runc)
fi
packages+=("$@")

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (boxer itself needs root for namespaces and cgroups)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
  echo "setup: Go is not installed. Install Go 1.21 or newer (the go command then fetches the toolchain go.mod names)." >&2
  exit 1
fi
echo "setup: ok ($(/usr/bin/python3 --version), $(go version | cut -d' ' -f3))"
