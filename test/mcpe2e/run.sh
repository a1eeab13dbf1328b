#!/usr/bin/env bash
# Runs boxer's MCP end-to-end test: installs the pinned npm packages (npm
# ci), builds boxer, and runs the harness, in which the official TypeScript
# MCP client calls the real boxer's tools over streamable HTTP (boxer serve's
# /mcp) and stdio (boxer mcp, forwarding and with its own sandboxes).
# Loopback only, bounded in time; prints the transcript and ends with
# "N passed, M failed". Needs root (boxer does). Set
# BOXER_E2E_SKIP_NPM_CI=1 to reuse node_modules.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

if [ "${BOXER_E2E_SKIP_NPM_CI:-}" != 1 ] || [ ! -d node_modules ]; then
	timeout 300 npm ci --no-audit --no-fund --loglevel=error
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && timeout 300 go build -o "$tmp/boxer" ./cmd/boxer)
timeout 600 node harness.mjs --boxer "$tmp/boxer" --timeout-ms 540000
