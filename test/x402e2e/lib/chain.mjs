// The local chain: anvil as Base (chain id 8453) with the test token's code
// at USDC's address, so the server under test runs with its default asset.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import solc from 'solc';
import { createPublicClient, createTestClient, defineChain, http } from 'viem';
import { freePort, startProcess, waitFor } from './proc.mjs';

const require = createRequire(import.meta.url);

export const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
export const CHAIN_ID = 8453;

/** The anvil binary shipped by the @foundry-rs/anvil-<os>-<arch> package. */
function anvilBinary() {
  const arch = { x64: 'amd64', arm64: 'arm64' }[process.arch];
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  const dir = path.dirname(require.resolve(`${pkg}/package.json`));
  const bin = path.join(dir, 'bin', 'anvil');
  fs.accessSync(bin, fs.constants.X_OK);
  return bin;
}

export async function startChain() {
  const port = await freePort();
  const rpcUrl = `http://127.0.0.1:${port}`;
  const proc = startProcess('anvil', anvilBinary(), [
    '--chain-id', String(CHAIN_ID), '--host', '127.0.0.1', '--port', String(port), '--silent',
  ]);
  const chain = defineChain({
    id: CHAIN_ID,
    name: 'Base (local anvil)',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const transport = http(rpcUrl);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 200 });
  await waitFor('anvil', async () => (await publicClient.getChainId()) === CHAIN_ID, 30000, proc);
  const testClient = createTestClient({ chain, transport, mode: 'anvil' });
  return { proc, rpcUrl, chain, publicClient, testClient };
}

/** Compiles contracts/TestUSDC.sol with the solc package (no download). */
export function compileToken(dir) {
  const source = fs.readFileSync(path.join(dir, 'contracts', 'TestUSDC.sol'), 'utf8');
  const input = {
    language: 'Solidity',
    sources: { 'TestUSDC.sol': { content: source } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: 'cancun',
      outputSelection: { '*': { TestUSDC: ['abi', 'evm.deployedBytecode.object'] } },
    },
  };
  const out = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(`solc: ${errors.map((e) => e.formattedMessage).join('\n')}`);
  const c = out.contracts['TestUSDC.sol'].TestUSDC;
  return { abi: c.abi, runtime: `0x${c.evm.deployedBytecode.object}` };
}

/** Places the token's runtime code at USDC's address. */
export async function installToken({ testClient, publicClient }, token) {
  await testClient.setCode({ address: USDC, bytecode: token.runtime });
  const read = (functionName, args = []) => publicClient.readContract({ address: USDC, abi: token.abi, functionName, args });
  const [name, version, decimals] = [await read('name'), await read('version'), await read('decimals')];
  if (name !== 'USD Coin' || version !== '2' || decimals !== 6) {
    throw new Error(`token at ${USDC} is ${name}/${version}/${decimals}`);
  }
  return { abi: token.abi, balanceOf: (who) => read('balanceOf', [who]) };
}
