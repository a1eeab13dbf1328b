#!/usr/bin/env bash
# Sets up this Debian/Ubuntu host, builds boxer and serves on its embedded
# defaults (127.0.0.1:8080). Needs root. Extra arguments go to boxer serve.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
go build -o bin/boxer ./cmd/boxer
exec ./bin/boxer serve "$@"
