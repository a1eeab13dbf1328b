#!/usr/bin/env node
// End-to-end test of boxer's x402 payments with the protocol's official
// parts: a local chain (anvil as Base), a token with USDC's EIP-712 domain
// at USDC's address, the official facilitator pointed at that chain, and
// the official fetch client paying the server under test; then the
// official MCP client paying its tools the way x402's MCP transport says.
// Solana is offered beside Base and paid with @x402/svm on a local SVM
// (svm-cases.mjs).
//
// Usage: node harness.mjs --server-cmd '<command with {addr}>'
// (or BOXER_E2E_SERVER_CMD). Everything listens on 127.0.0.1 only; the run
// is bounded by --timeout-ms (default 240000) and ends with the line
// "N passed, M failed".
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from 'viem/accounts';
import { createWalletClient, http, toHex } from 'viem';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { authorizationTypes } from '@x402/evm';
import { wrapFetchWithPayment } from '@x402/fetch';
import { appendPaymentIdentifierToExtensions } from '@x402/extensions/payment-identifier';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CHAIN_ID, USDC, compileToken, installToken, startChain } from './lib/chain.mjs';
import { startFacilitator } from './lib/facilitator.mjs';
import { startServer } from './lib/server.mjs';
import { SOLANA_DEVNET, siwxTests } from './lib/siwx.mjs';
import { SVM_NETWORK, startSvmWorld, svmCases } from './svm-cases.mjs';
import { paymentIdTests } from './lib/paymentid.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const NETWORK = `eip155:${CHAIN_ID}`;
const PRICE = 20000n; // $0.02 in USDC atomic units
const REQUEST = { code: 'print(2 + 2)', language: 'python' };

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const serverCmd = arg('server-cmd', process.env.BOXER_E2E_SERVER_CMD);
const timeoutMs = Number(arg('timeout-ms', '240000'));
if (!serverCmd) {
  console.error('usage: node harness.mjs --server-cmd "<command with {addr}>"');
  process.exit(2);
}

let passed = 0;
let failed = 0;
async function test(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n     ${String(e?.stack ?? e).replace(/\n/g, '\n     ')}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function eq(got, want, what) {
  assert(got === want, `${what}: got ${typeof got} ${String(got)}, want ${typeof want} ${String(want)}`);
}

const stops = [];
async function cleanup() {
  for (const stop of stops.reverse()) {
    try { await stop(); } catch { /* best effort */ }
  }
}
const watchdog = setTimeout(async () => {
  console.log(`FAIL harness timed out after ${timeoutMs} ms`);
  await cleanup();
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
}, timeoutMs);

async function main() {
  // --- the world: chain, token, facilitator, server -----------------------
  const chainCtx = await startChain();
  stops.push(() => chainCtx.proc.stop());
  const token = await installToken(chainCtx, compileToken(here));

  const mnemonic = 'test test test test test test test test test test test junk'; // anvil's public dev mnemonic
  const facilitatorAccount = mnemonicToAccount(mnemonic, { addressIndex: 0 }); // pays gas
  const payer = privateKeyToAccount(generatePrivateKey()); // holds USDC, no ETH: payments are gasless
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const minter = createWalletClient({ account: facilitatorAccount, chain: chainCtx.chain, transport: http(chainCtx.rpcUrl) });
  const mintHash = await minter.writeContract({ address: USDC, abi: token.abi, functionName: 'mint', args: [payer.address, 1_000_000n] });
  await chainCtx.publicClient.waitForTransactionReceipt({ hash: mintHash });
  eq(await token.balanceOf(payer.address), 1_000_000n, 'payer balance after mint');

  const svmWorld = await startSvmWorld(); // Solana, offered beside Base
  stops.push(svmWorld.stop);
  const fac = await startFacilitator(chainCtx, facilitatorAccount,
    { network: SVM_NETWORK, feePayer: svmWorld.feePayer, rpcUrl: svmWorld.svm.rpcUrl });
  stops.push(fac.stop);
  // Sign-in (lib/siwx.mjs) is offered on Solana too, to try ed25519.
  process.env.BOXER_X402_SIGN_IN_NETWORKS ??= `${NETWORK},${SOLANA_DEVNET}`;
  const server = await startServer(serverCmd, {
    facilitatorUrl: fac.url, payTo, network: NETWORK, asset: USDC, solanaPayTo: svmWorld.payTo, cwd: here,
  });
  stops.push(() => server.proc.stop());
  console.log(`# anvil ${chainCtx.rpcUrl}, facilitator ${fac.url}, server ${server.url}`);

  // --- helpers -------------------------------------------------------------
  const post = (headers = {}) => fetch(`${server.url}/v1/exec`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(REQUEST),
  });
  // How many times the server ran code, from boxer's /v1/health (runsTotal).
  const handlerCalls = async () => {
    const r = await fetch(`${server.url}/v1/health`);
    if (!r.ok) return null;
    const h = await r.json();
    return typeof h.runsTotal === 'number' ? h.runsTotal : null; // null: no count to check
  };
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: payer });
  let lastPaymentHeader = null;
  const recordingFetch = async (input, init) => {
    const req = new Request(input, init);
    lastPaymentHeader = req.headers.get('PAYMENT-SIGNATURE') ?? lastPaymentHeader;
    return fetch(req);
  };
  const payingFetch = wrapFetchWithPayment(recordingFetch, client);
  const challenge = async () => {
    const r = await post();
    await r.arrayBuffer();
    return decodePaymentRequiredHeader(r.headers.get('PAYMENT-REQUIRED'));
  };
  // A refused payment: 402, no handler output, nothing ran, nothing moved.
  const expectRefused = async (paymentHeader, reason) => {
    const calls = await handlerCalls();
    const balance = await token.balanceOf(payTo);
    const r = await post({ 'PAYMENT-SIGNATURE': paymentHeader });
    const body = await r.json().catch(() => ({}));
    eq(r.status, 402, 'status');
    assert(!('result' in body), `402 body carries handler output: ${JSON.stringify(body).slice(0, 200)}`);
    const pr = decodePaymentRequiredHeader(r.headers.get('PAYMENT-REQUIRED'));
    assert(pr.error?.includes(reason), `error ${JSON.stringify(pr.error)} does not name ${reason}`);
    if (calls !== null) eq(await handlerCalls(), calls, 'handler runs');
    eq(await token.balanceOf(payTo), balance, 'payTo balance');
  };

  // --- the tests -----------------------------------------------------------
  let offered;
  await test("boxer asked the official facilitator's GET /supported at start, and is ready", async () => {
    assert(fac.supported.asked >= 1, `GET /supported asked ${fac.supported.asked} times`);
    const { kinds } = await (await fetch(`${fac.url}/supported`)).json();
    assert(kinds.some((k) => k.x402Version === 2 && k.scheme === 'exact' && k.network === NETWORK),
      `the facilitator lists ${JSON.stringify(kinds)}, not v2 exact on ${NETWORK}`);
    eq((await fetch(`${server.url}/readyz`)).status, 200, 'readyz');
  });
  await test('unpaid request gets a 402 challenge with the bazaar extension', async () => {
    const r = await post();
    const body = await r.text();
    eq(r.status, 402, 'status');
    const h = r.headers.get('PAYMENT-REQUIRED');
    assert(h && /^[A-Za-z0-9+/]*={0,2}$/.test(h), `PAYMENT-REQUIRED is not standard base64: ${h}`);
    const pr = decodePaymentRequiredHeader(h);
    eq(pr.x402Version, 2, 'x402Version');
    eq(pr.accepts.length, 2, 'accepts (Base, then Solana: svm-cases.mjs)');
    const a = pr.accepts[0];
    eq(a.scheme, 'exact', 'scheme');
    eq(a.network, NETWORK, 'network');
    eq(a.amount, '20000', 'amount (a string)');
    eq(a.maxTimeoutSeconds, 300, 'maxTimeoutSeconds (a number)');
    eq(a.asset.toLowerCase(), USDC.toLowerCase(), 'asset');
    eq(a.payTo.toLowerCase(), payTo.toLowerCase(), 'payTo');
    eq(JSON.stringify(a.extra), JSON.stringify({ name: 'USD Coin', version: '2' }), 'extra');
    assert(pr.resource?.url?.endsWith('/v1/exec'), `resource ${JSON.stringify(pr.resource)}`);
    const bazaar = pr.extensions?.bazaar;
    assert(bazaar?.info?.input?.type === 'http' && bazaar.info.input.method === 'POST', `bazaar info ${JSON.stringify(bazaar?.info)}`);
    assert(bazaar.info.output?.example && bazaar.schema?.properties?.input, 'bazaar output example and schema');
    assert(body.length > 0, 'empty 402 body');
    offered = pr;
  });

  await test('a CORS preflight of a priced route is never priced: 204, no challenge, nothing runs', async () => {
    const calls = await handlerCalls();
    const r = await fetch(`${server.url}/v1/exec`, {
      method: 'OPTIONS',
      headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type, payment-signature' },
    });
    eq(r.status, 204, 'status');
    eq(r.headers.get('PAYMENT-REQUIRED'), null, 'PAYMENT-REQUIRED');
    if (calls !== null) eq(await handlerCalls(), calls, 'handler runs');
  });
  await test('GET /.well-known/x402 lists every priced route with exactly its 402 challenge, as /llms.txt prices it', async () => {
    const r = await fetch(`${server.url}/.well-known/x402`);
    eq(r.status, 200, 'status');
    const doc = await r.json();
    eq(doc.x402Version, 2, 'x402Version');
    eq(doc.version, 1, 'version (the well-known document)');
    const pathOf = (u) => decodeURI(new URL(u).pathname);
    const paths = doc.items.map((it) => pathOf(it.resource));
    eq(JSON.stringify(paths), JSON.stringify(['/v1/exec', '/v1/run-python', '/v1/sessions',
      '/v1/sessions/{session_id}/exec', '/v1/sessions/{session_id}/fork']), 'priced routes');
    eq(JSON.stringify(doc.resources), JSON.stringify(doc.items.map((it) => it.resource)), 'resources');
    eq(JSON.stringify(doc.pagination), JSON.stringify({ limit: 5, offset: 0, total: 5 }), 'pagination');
    const llms = await (await fetch(`${server.url}/llms.txt`)).text();
    assert(llms.includes(`- x402 discovery: ${server.url}/.well-known/x402`), 'llms.txt does not point at the discovery document');
    assert(llms.includes(`- Also payable with x402 on ${SVM_NETWORK} `), 'llms.txt does not say Solana is offered');
    assert(llms.includes('send it in SIGN-IN-WITH-X'), 'llms.txt does not say how to sign in');
    for (const it of doc.items) {
      const route = pathOf(it.resource);
      // The challenge a caller gets there, decoded by the official client's code.
      const c = await fetch(it.resource.replace('{session_id}', 'sess_none'), {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}',
      });
      eq(c.status, 402, `${route}: unpaid status`);
      const pr = decodePaymentRequiredHeader(c.headers.get('PAYMENT-REQUIRED'));
      eq(JSON.stringify(it.accepts), JSON.stringify(pr.accepts), `${route}: accepts`);
      eq(JSON.stringify(it.metadata.extensions), JSON.stringify(pr.extensions), `${route}: extensions (bazaar)`);
      eq(it.metadata.description, pr.resource.description, `${route}: description`);
      const usd = String(Number(it.accepts[0].amount) / 1e6); // the default prices, as llms.txt writes them
      assert(llms.includes(`- Price of ${route}: $${usd} a call`), `llms.txt does not price ${route} at $${usd}`);
    }
  });

  await test('official client pays: "4\\n", PAYMENT-RESPONSE with a transaction, payTo +20000', async () => {
    const before = { to: await token.balanceOf(payTo), from: await token.balanceOf(payer.address), calls: await handlerCalls() };
    const r = await payingFetch(`${server.url}/v1/exec`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(REQUEST),
    });
    const body = await r.json();
    eq(r.status, 200, `status (body ${JSON.stringify(body).slice(0, 300)})`);
    eq(body?.result?.stdout, '4\n', 'stdout');
    const settle = decodePaymentResponseHeader(r.headers.get('PAYMENT-RESPONSE'));
    eq(settle.success, true, 'settle success');
    assert(/^0x[0-9a-fA-F]{64}$/.test(settle.transaction), `transaction ${settle.transaction}`);
    eq(settle.network, NETWORK, 'settle network');
    eq(settle.payer?.toLowerCase(), payer.address.toLowerCase(), 'settle payer');
    const receipt = await chainCtx.publicClient.getTransactionReceipt({ hash: settle.transaction });
    eq(receipt.status, 'success', 'receipt status');
    eq(await token.balanceOf(payTo) - before.to, PRICE, 'payTo balance rise');
    eq(before.from - await token.balanceOf(payer.address), PRICE, 'payer balance fall');
    if (before.calls !== null) eq(await handlerCalls(), before.calls + 1, 'handler runs');
    // The payer counts in the server's health record (uniquePayers30d).
    const health = await (await fetch(`${server.url}/v1/health`)).json();
    if (typeof health.uniquePayers30d === 'number') eq(health.uniquePayers30d, 1, 'uniquePayers30d');
    // The facilitator was sent the server's own requirements.
    const verify = fac.calls.find((c) => c.op === 'verify');
    eq(verify?.body?.paymentRequirements?.amount, '20000', 'requirements sent to /verify');
    eq(verify?.body?.x402Version, 2, 'x402Version sent to /verify');
  });

  await test('replayed payment is refused without running', async () => {
    assert(lastPaymentHeader, 'no payment was captured');
    await expectRefused(lastPaymentHeader, 'payment_already_used');
  });

  // Fresh payloads made by the official client, then altered.
  const fresh = async (pr = offered) => client.createPaymentPayload(pr);

  await test('tampered payment (nonce changed after signing) is refused without running', async () => {
    const p = await fresh();
    p.payload.authorization.nonce = toHex(randomBytes(32));
    await expectRefused(encodePaymentSignatureHeader(p), 'invalid_exact_evm_signature');
  });

  await test('tampered payment (value raised after signing) is refused without running', async () => {
    const p = await fresh();
    p.payload.authorization.value = '30000';
    await expectRefused(encodePaymentSignatureHeader(p), 'invalid_exact_evm_payload_authorization_value');
  });

  await test('expired payment is refused without running', async () => {
    const p = await fresh();
    const auth = { ...p.payload.authorization, validBefore: String(Math.floor(Date.now() / 1000) - 60) };
    p.payload.authorization = auth;
    p.payload.signature = await payer.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: CHAIN_ID, verifyingContract: USDC },
      types: authorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message: {
        from: auth.from, to: auth.to, value: BigInt(auth.value),
        validAfter: BigInt(auth.validAfter), validBefore: BigInt(auth.validBefore), nonce: auth.nonce,
      },
    });
    await expectRefused(encodePaymentSignatureHeader(p), 'invalid_exact_evm_payload_authorization_valid_before');
  });

  await test('underpaid payment (client signs a lowered price) is refused before the facilitator', async () => {
    const lowered = structuredClone(offered);
    lowered.accepts[0].amount = '10000';
    const p = await fresh(lowered);
    eq(p.payload.authorization.value, '10000', 'signed value');
    const facCalls = fac.calls.length;
    await expectRefused(encodePaymentSignatureHeader(p), 'payment_requirements_mismatch');
    eq(fac.calls.length, facCalls, 'facilitator calls');
  });

  await test('the same payment sent twice at once runs once and is charged once', async () => {
    const h = encodePaymentSignatureHeader(await fresh());
    const before = { to: await token.balanceOf(payTo), calls: await handlerCalls() };
    const answers = await Promise.all([post({ 'PAYMENT-SIGNATURE': h }), post({ 'PAYMENT-SIGNATURE': h })]);
    const statuses = answers.map((r) => r.status).sort();
    await Promise.all(answers.map((r) => r.arrayBuffer()));
    eq(JSON.stringify(statuses), JSON.stringify([200, 402]), 'statuses');
    eq(await token.balanceOf(payTo) - before.to, PRICE, 'payTo balance rise');
    if (before.calls !== null) eq(await handlerCalls(), before.calls + 1, 'handler runs');
  });

  await test('settlement_pending (the receipt came late): boxer asks once more with the same payment; charged once, released', async () => {
    const before = { to: await token.balanceOf(payTo), from: await token.balanceOf(payer.address), calls: await handlerCalls(), n: fac.calls.length };
    fac.faults.receiptFailures = 1;
    const r = await payingFetch(`${server.url}/v1/exec`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(REQUEST),
    });
    const body = await r.json();
    eq(r.status, 200, `status (body ${JSON.stringify(body).slice(0, 300)})`);
    eq(body?.result?.stdout, '4\n', 'stdout');
    const settle = decodePaymentResponseHeader(r.headers.get('PAYMENT-RESPONSE'));
    eq(settle.success, true, 'settle success');
    const calls = fac.calls.slice(before.n);
    eq(calls.map((c) => c.op).join(','), 'verify,settle,settle', 'facilitator calls');
    eq(calls[1].result.errorReason, 'settlement_pending', 'first settle answer');
    eq(calls[1].result.transaction, settle.transaction, 'the pending transfer is the settled one');
    eq(JSON.stringify(calls[2].body), JSON.stringify(calls[1].body), 'the second settle repeats the first');
    eq(await token.balanceOf(payTo) - before.to, PRICE, 'payTo balance rise');
    eq(before.from - await token.balanceOf(payer.address), PRICE, 'payer balance fall');
    if (before.calls !== null) eq(await handlerCalls(), before.calls + 1, 'handler runs');
  });
  await test('high-s twin of a valid signature is refused before the facilitator', async () => {
    const p = await fresh();
    const sig = p.payload.signature.slice(2);
    const n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141n;
    const s = BigInt(`0x${sig.slice(64, 128)}`);
    const v = parseInt(sig.slice(128, 130), 16);
    p.payload.signature = `0x${sig.slice(0, 64)}${(n - s).toString(16).padStart(64, '0')}${(55 - v).toString(16)}`;
    const facCalls = fac.calls.length;
    await expectRefused(encodePaymentSignatureHeader(p), 'invalid_exact_evm_signature');
    eq(fac.calls.length, facCalls, 'facilitator calls');
  });

  await test('payment from an unfunded payer is refused by the facilitator without running', async () => {
    const broke = privateKeyToAccount(generatePrivateKey());
    const brokeClient = new x402Client();
    registerExactEvmScheme(brokeClient, { signer: broke });
    const p = await brokeClient.createPaymentPayload(offered);
    await expectRefused(encodePaymentSignatureHeader(p), 'payment_verification_failed');
    const last = fac.calls.at(-1);
    eq(last.op, 'verify', 'last facilitator call');
    eq(last.result.isValid, false, 'facilitator isValid');
  });

  // Why boxer sends its own requirements: the facilitator checks the signed
  // value against whatever requirements it is handed.
  await test('facilitator fact: it accepts an underpayment when handed the client\'s own "accepted"', async () => {
    const lowered = structuredClone(offered);
    lowered.accepts[0].amount = '10000';
    const p = await fresh(lowered);
    const ask = async (requirements) => {
      const r = await fetch(`${fac.url}/verify`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ x402Version: 2, paymentPayload: p, paymentRequirements: requirements }),
      });
      return r.json();
    };
    eq((await ask(p.accepted)).isValid, true, 'isValid with the echoed requirements');
    eq((await ask(offered.accepts[0])).isValid, false, 'isValid with the route\'s requirements');
  });

  await svmCases({ test, assert, eq, post, handlerCalls, server, fac }, svmWorld);

  // --- MCP: x402's MCP transport, with the official MCP client ----------
  // There is no @x402/mcp to use here: the payment is made by the same
  // official x402 client and carried in _meta as the transport says.
  const mcp = new McpClient({ name: 'boxer-x402e2e', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
  stops.push(() => mcp.close());
  const mcpBefore = async () => ({ to: await token.balanceOf(payTo), from: await token.balanceOf(payer.address), calls: await handlerCalls() });
  let mcpRequired;
  let mcpPayment;

  await test('MCP: an unpaid tool call is a tool error whose structured content is the PaymentRequired; nothing runs', async () => {
    const before = await mcpBefore();
    const r = await mcp.callTool({ name: 'exec', arguments: REQUEST });
    console.log(`# mcp unpaid: ${JSON.stringify({ isError: r.isError, structuredContent: { ...r.structuredContent, extensions: '...' } })}`);
    eq(r.isError, true, 'isError');
    const pr = r.structuredContent;
    eq(pr?.x402Version, 2, 'x402Version');
    eq(pr.accepts?.[0]?.amount, '20000', 'amount');
    eq(pr.accepts[0].payTo.toLowerCase(), payTo.toLowerCase(), 'payTo');
    assert(pr.resource?.url?.endsWith('/v1/exec'), `resource ${JSON.stringify(pr.resource)}`);
    assert(!r.content.some((c) => c.type === 'text' && c.text.includes('4\n')), 'tool output without payment');
    if (before.calls !== null) eq(await handlerCalls(), before.calls, 'handler runs');
    eq(await token.balanceOf(payTo), before.to, 'payTo balance');
    mcpRequired = pr;
  });

  await test('MCP: paid in _meta["x402/payment"]: "4\\n", settlement in _meta["x402/payment-response"], payTo +20000', async () => {
    const before = await mcpBefore();
    mcpPayment = await client.createPaymentPayload(mcpRequired);
    const r = await mcp.callTool({ name: 'exec', arguments: REQUEST, _meta: { 'x402/payment': mcpPayment } });
    const settle = r._meta?.['x402/payment-response'];
    console.log(`# mcp paid: ${JSON.stringify({ isError: r.isError ?? false, stdout: r.structuredContent?.stdout, _meta: r._meta })}`);
    assert(!r.isError, `tool error: ${JSON.stringify(r.content)}`);
    eq(r.structuredContent?.stdout, '4\n', 'stdout');
    eq(settle?.success, true, 'settlement success');
    eq(settle.network, NETWORK, 'settlement network');
    eq(settle.payer?.toLowerCase(), payer.address.toLowerCase(), 'settlement payer');
    const receipt = await chainCtx.publicClient.getTransactionReceipt({ hash: settle.transaction });
    eq(receipt.status, 'success', 'receipt status');
    eq(await token.balanceOf(payTo) - before.to, PRICE, 'payTo balance rise');
    eq(before.from - await token.balanceOf(payer.address), PRICE, 'payer balance fall');
    if (before.calls !== null) eq(await handlerCalls(), before.calls + 1, 'handler runs');
  });

  // A refused MCP payment, as expectRefused for HTTP: a tool error naming
  // reason, nothing ran, nothing moved.
  const expectMcpRefused = async (payment, reason) => {
    const before = await mcpBefore();
    const r = await mcp.callTool({ name: 'exec', arguments: REQUEST, _meta: { 'x402/payment': payment } });
    eq(r.isError, true, 'isError');
    assert(r.structuredContent?.error?.includes(reason), `error ${JSON.stringify(r.structuredContent?.error)} does not name ${reason}`);
    if (before.calls !== null) eq(await handlerCalls(), before.calls, 'handler runs');
    eq(await token.balanceOf(payTo), before.to, 'payTo balance');
  };

  await test('MCP: the same payment again is refused without running or charging', async () => {
    await expectMcpRefused(mcpPayment, 'payment_already_used');
  });

  await test('MCP: a tampered payment is refused without running or charging', async () => {
    const p = await client.createPaymentPayload(mcpRequired);
    p.payload.authorization.value = '30000';
    await expectMcpRefused(p, 'invalid_exact_evm_payload_authorization_value');
  });

  await test('MCP: run_python is priced as /v1/run-python (10000) and paid the same way', async () => {
    const args = { code: 'print(6 * 7)' };
    const unpaid = await mcp.callTool({ name: 'run_python', arguments: args });
    eq(unpaid.isError, true, 'isError unpaid');
    eq(unpaid.structuredContent?.accepts?.[0]?.amount, '10000', 'amount');
    const before = await mcpBefore();
    const r = await mcp.callTool({ name: 'run_python', arguments: args,
      _meta: { 'x402/payment': await client.createPaymentPayload(unpaid.structuredContent) } });
    assert(!r.isError, `tool error: ${JSON.stringify(r.content)}`);
    eq(r.structuredContent?.stdout, '42\n', 'stdout');
    eq(r._meta?.['x402/payment-response']?.success, true, 'settlement');
    eq(await token.balanceOf(payTo) - before.to, 10000n, 'payTo balance rise');
  });

  await test('MCP with payment-identifier: a tool call retried with a new payment and the same id is answered once and charged once', async () => {
    const args = { code: 'import secrets; print(secrets.token_hex(16))' };
    const id = `pay_mcp_${randomBytes(12).toString('hex')}`;
    const withId = new x402Client();
    registerExactEvmScheme(withId, { signer: payer });
    withId.onBeforePaymentCreation(async ({ paymentRequired }) => {
      if (paymentRequired.extensions) appendPaymentIdentifierToExtensions(paymentRequired.extensions, id);
    });
    const before = await mcpBefore();
    const call = async () => {
      const unpaid = await mcp.callTool({ name: 'run_python', arguments: args });
      eq(unpaid.isError, true, 'isError unpaid');
      return mcp.callTool({ name: 'run_python', arguments: args,
        _meta: { 'x402/payment': await withId.createPaymentPayload(unpaid.structuredContent) } });
    };
    const first = await call();
    const again = await call(); // a new signature, the same id: a retry
    assert(!first.isError && !again.isError, `tool error: ${JSON.stringify(first.content)} / ${JSON.stringify(again.content)}`);
    assert(/^[0-9a-f]{32}\n$/.test(first.structuredContent?.stdout), `stdout ${first.structuredContent?.stdout}`);
    eq(again.structuredContent?.stdout, first.structuredContent.stdout, 'the retry gets the first answer');
    eq(again._meta?.['x402/payment-response']?.transaction, first._meta?.['x402/payment-response']?.transaction, 'the first settlement');
    eq(await token.balanceOf(payTo) - before.to, 10000n, 'payTo balance rise: one charge');
    eq(before.from - await token.balanceOf(payer.address), 10000n, 'payer balance fall: one charge');
    if (before.calls !== null) eq(await handlerCalls(), before.calls + 1, 'handler runs');
  });

  // --- sessions: creation and each cell are priced calls -----------------
  let sessionId;
  await test('a session is priced (10000), paid, and answers 201 with its id; listing it needs a key or a sign-in', async () => {
    const before = await mcpBefore();
    const create = () => payingFetch(`${server.url}/v1/sessions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    const unpaid = await fetch(`${server.url}/v1/sessions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    await unpaid.arrayBuffer();
    eq(unpaid.status, 402, 'unpaid status');
    eq(decodePaymentRequiredHeader(unpaid.headers.get('PAYMENT-REQUIRED')).accepts[0].amount, '10000', 'amount');
    const r = await create();
    const body = await r.json();
    eq(r.status, 201, `status (body ${JSON.stringify(body).slice(0, 300)})`);
    assert(/^ses_[a-z2-7]{26}$/.test(body.session_id ?? ''), `session_id ${body.session_id}`);
    eq(decodePaymentResponseHeader(r.headers.get('PAYMENT-RESPONSE')).success, true, 'settlement');
    eq(await token.balanceOf(payTo) - before.to, 10000n, 'payTo balance rise');
    const list = await fetch(`${server.url}/v1/sessions`);
    eq(list.status, 402, `GET /v1/sessions without a key asks to sign in (body ${await list.text()})`);
    sessionId = body.session_id;
  });

  await test('each cell is priced (5000) and paid; state persists; a cell for no session is not charged', async () => {
    const cell = (code) => payingFetch(`${server.url}/v1/sessions/${sessionId}/exec`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code }) });
    let before = await mcpBefore();
    let r = await cell('x = 20');
    eq(r.status, 200, `first cell (body ${await r.clone().text()})`);
    await r.arrayBuffer();
    r = await cell('x * 2 + 2');
    const body = await r.json();
    eq(r.status, 200, 'second cell');
    eq(body.result?.value, '42', 'state kept between paid cells');
    eq(await token.balanceOf(payTo) - before.to, 10000n, 'two cells, 5000 each');
    before = await mcpBefore();
    r = await payingFetch(`${server.url}/v1/sessions/ses_nosuchsessionxxxxxxxxxxxxxx/exec`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"code":"1"}' });
    eq(r.status, 404, `a cell for no session (body ${await r.text()})`);
    eq(await token.balanceOf(payTo), before.to, 'payTo balance after a refused cell');
  });

  await siwxTests({ test, eq, assert, server, payingFetch, token, payer, payTo, network: NETWORK, handlerCalls, sessionId, mcp, client, fac });
  const mint = async (to, amount) => {
    const hash = await minter.writeContract({ address: USDC, abi: token.abi, functionName: 'mint', args: [to, amount] });
    await chainCtx.publicClient.waitForTransactionReceipt({ hash });
  };
  await paymentIdTests({ test, eq, assert, server, token, payTo, mint, handlerCalls });

  if (await handlerCalls() === null) console.log('# server exposes no run count: run counts were not checked');
}

try {
  await main();
} catch (e) {
  failed++;
  console.log(`FAIL setup\n     ${String(e?.stack ?? e).replace(/\n/g, '\n     ')}`);
} finally {
  clearTimeout(watchdog);
  await cleanup();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
