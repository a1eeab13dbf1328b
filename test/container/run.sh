#!/usr/bin/env bash
# Builds boxer's container image (deploy/image/build.sh) and runs it with
# Podman as the container's entrypoint, with the privileges
# deploy/kubernetes/deployment.yaml asks for and no more
# (test/container/privileges.sh). Then, through the container's published port on
# loopback: boxer doctor inside it, an API key made with boxer keys, the
# MCP end-to-end cases over both transports with that key, and a SIGTERM
# that must end the container with status 0.
#
#   test/container/run.sh
#
# runc, not crun (crun refuses a hybrid cgroup layout). Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=boxer-container-test
image=localhost/boxer:latest

./deploy/image/build.sh
skopeo copy -q oci:.cache/image/oci:boxer "containers-storage:$image"
podman rm -f "$name" >/dev/null 2>&1 || true
trap 'podman rm -f "$name" >/dev/null 2>&1 || true' EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
. test/container/privileges.sh
# start runs the image detached with the manifests' privileges; its
# arguments go after them (an --entrypoint, then the image and command).
start() {
  podman run -d --name "$name" --runtime runc "${container_privileges[@]}" \
    -p "127.0.0.1:$port:8080" \
    "$@" >/dev/null
}

# No key exists yet, and the server listens on 0.0.0.0 in the container:
# it must refuse to start. Then a key, and the server again.
start "$image" serve
echo "container: $(podman inspect -f '{{.ImageDigest}}' "$name") on 127.0.0.1:$port"
status=$(podman wait "$name")
podman logs "$name" 2>&1 | grep -q 'API key' || { podman logs "$name" | tail -5; echo "container: want a refusal without keys"; exit 1; }
[ "$status" != 0 ] || { echo "container: serve exited 0 without keys"; exit 1; }
echo "container: without keys, serve refused to start (exit $status)"
podman rm "$name" >/dev/null
start --entrypoint sh "$image" -c 'boxer keys add --name container-test >/var/lib/boxer/key && exec boxer-entrypoint serve'

for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  [ "$(podman inspect -f '{{.State.Running}}' "$name")" = true ] || { podman logs "$name" | tail -20; exit 1; }
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { podman logs "$name" | tail -20; echo "container: not ready"; exit 1; }
# Its own state dir: the server holds the lock of /run/boxer.
podman exec "$name" boxer doctor --state-dir /run/boxer-doctor | tail -1
key=$(podman exec "$name" cat /var/lib/boxer/key)

go build -o .cache/image/boxer-host ./cmd/boxer
(cd test/mcpe2e && { [ -d node_modules ] || timeout 300 npm ci --no-audit --no-fund --loglevel=error; } &&
  timeout 600 node harness.mjs --boxer ../../.cache/image/boxer-host --url "http://127.0.0.1:$port" --key "$key" --timeout-ms 540000)

podman stop -t 60 "$name" >/dev/null
status=$(podman inspect -f '{{.State.ExitCode}}' "$name")
echo "container: stopped with SIGTERM, exit status $status"
[ "$status" = 0 ]
