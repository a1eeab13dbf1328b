#!/usr/bin/env bash
# Runs boxer's x402 end-to-end test: installs the pinned npm packages
# (npm ci), builds the stand-in server unless BOXER_E2E_SERVER_CMD names
# another one, and runs the harness. Loopback only, bounded in time; exits
# non-zero on any failure and ends with "N passed, M failed".
#
#   test/x402e2e/run.sh
#   BOXER_E2E_SERVER_CMD='/path/to/boxer serve --listen {addr}' test/x402e2e/run.sh
#
# The server command may use {addr} {facilitator} {payTo} {network} {asset};
# the same values are in its environment as BOXER_LISTEN, BOXER_PAYMENTS,
# BOXER_X402_PAY_TO, BOXER_X402_FACILITATOR_URL, BOXER_X402_NETWORK and
# BOXER_X402_ASSET. Set BOXER_E2E_SKIP_NPM_CI=1 to reuse node_modules.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"

if [ "${BOXER_E2E_SKIP_NPM_CI:-}" != 1 ] || [ ! -d node_modules ]; then
	timeout 300 npm ci --no-audit --no-fund --loglevel=error
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
server_cmd="${BOXER_E2E_SERVER_CMD:-}"
if [ -z "$server_cmd" ]; then
	(cd "$root" && timeout 300 go build -o "$tmp/fakeserver" ./test/x402e2e/fakeserver)
	server_cmd="$tmp/fakeserver --listen {addr}"
fi

timeout 300 node harness.mjs --server-cmd "$server_cmd" --timeout-ms 240000
