#!/usr/bin/env bash
# Runs boxer's x402 end-to-end test: installs the pinned npm packages
# (npm ci), builds boxer, and runs the harness, in which the official x402
# clients pay the real `boxer serve` through the official facilitator on
# local chains (anvil as Base, litesvm as Solana). Loopback only, bounded in
# time; exits non-zero on any failure and ends with "N passed, M failed".
# Needs root (boxer does).
#
#   test/x402e2e/run.sh
#   BOXER_E2E_SERVER_CMD='/path/to/boxer serve --addr {addr} ...' test/x402e2e/run.sh
#
# The server command may use {addr} {facilitator} {payTo} {network} {asset}
# {solanaPayTo}; the same values are in its environment as BOXER_LISTEN,
# BOXER_PAYMENTS, BOXER_X402_PAY_TO, BOXER_X402_FACILITATOR_URL,
# BOXER_X402_NETWORK, BOXER_X402_ASSET and BOXER_X402_SOLANA_PAY_TO. Set
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
server_cmd="${BOXER_E2E_SERVER_CMD:-}"
if [ -z "$server_cmd" ]; then
	(cd "$root" && timeout 300 go build -o "$tmp/boxer" ./cmd/boxer)
	state="/run/boxer-x402e2e-$$"
	trap 'rm -rf "$tmp" "$state"' EXIT
	server_cmd="exec $tmp/boxer serve --addr {addr} --x402-public-url http://{addr} --payments x402 --x402-pay-to {payTo} --x402-facilitator-url {facilitator} --x402-network {network} --x402-asset {asset} --x402-solana-pay-to {solanaPayTo} --state-dir $state --data-dir $tmp/data --pool-preimport ''"
fi

timeout 300 node harness.mjs --server-cmd "$server_cmd" --timeout-ms 240000
