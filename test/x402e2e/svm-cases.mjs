// The Solana half of the harness: boxer offers exact on SVM beside Base, the
// official @x402/svm client pays it, and the official facilitator verifies
// and settles through a local SVM (litesvm behind lib/svm.mjs's JSON-RPC).
// The network id is Solana mainnet's, boxer's default: the official client
// and facilitator take a custom RPC URL for it, so nothing but the RPC URL
// differs from a real deployment. Balances are read from the ledger itself.
import { generateKeyPairSigner } from '@solana/kit';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { ExactSvmScheme } from '@x402/svm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SOLANA_MAINNET, USDC_MINT, ata, startSvm } from './lib/svm.mjs';

export const SVM_NETWORK = SOLANA_MAINNET;
const PRICE = 20000n;
const FUNDED = 1_000_000n;
const FEE_PAYER_SOL = 1_000_000_000n;
// What the fee payer pays per settlement: 5000 lamports for each of the two
// signatures, plus the priority fee of the official client's compute budget
// (20000 units at 1 micro-lamport, rounded up to 1 lamport).
const SETTLEMENT_FEE = 10001n;

/** Starts the local SVM and its accounts: the facilitator's fee payer with
 * SOL, a payer with 1 USDC and no SOL (payments are gasless), and payTo's
 * empty token account. */
export async function startSvmWorld() {
  const svm = await startSvm();
  const feePayer = await generateKeyPairSigner();
  const payer = await generateKeyPairSigner();
  const payTo = (await generateKeyPairSigner()).address;
  svm.createMint(feePayer.address, FUNDED);
  svm.airdrop(feePayer.address, FEE_PAYER_SOL);
  await svm.fundToken(payer.address, FUNDED);
  await svm.fundToken(payTo, 0n);
  return { svm, feePayer, payer, payTo, stop: svm.stop };
}

export async function svmCases(h, world) {
  const { test, assert, eq, post, handlerCalls, server, fac } = h;
  const { svm, feePayer, payer, payTo } = world;

  const client = new x402Client().register('solana:*', new ExactSvmScheme(payer, { rpcUrl: svm.rpcUrl }));
  let lastHeader = null;
  const recordingFetch = async (input, init) => {
    const req = new Request(input, init);
    lastHeader = req.headers.get('PAYMENT-SIGNATURE') ?? lastHeader;
    return fetch(req);
  };
  const payingFetch = wrapFetchWithPayment(recordingFetch, client);
  const balances = async () => ({
    to: await svm.tokenBalance(payTo),
    from: await svm.tokenBalance(payer.address),
    fee: svm.lamports(feePayer.address),
    payerSol: svm.lamports(payer.address),
    calls: await handlerCalls(),
  });
  const offered = async () => {
    const r = await post();
    await r.arrayBuffer();
    return decodePaymentRequiredHeader(r.headers.get('PAYMENT-REQUIRED'));
  };
  // A refused payment: 402 naming reason, nothing ran, no token or SOL moved.
  const expectRefused = async (paymentHeader, reason) => {
    const before = await balances();
    const r = await post({ 'PAYMENT-SIGNATURE': paymentHeader });
    const body = await r.json().catch(() => ({}));
    eq(r.status, 402, 'status');
    assert(!('result' in body), `402 body carries handler output: ${JSON.stringify(body).slice(0, 200)}`);
    const pr = decodePaymentRequiredHeader(r.headers.get('PAYMENT-REQUIRED'));
    assert(pr.error?.includes(reason), `error ${JSON.stringify(pr.error)} does not name ${reason}`);
    const after = await balances();
    eq(after.to, before.to, 'payTo token balance');
    eq(after.from, before.from, 'payer token balance');
    eq(after.fee, before.fee, 'fee payer lamports');
    if (before.calls !== null) eq(after.calls, before.calls, 'handler runs');
  };
  // The wire transaction of a payload, and the payload with it replaced.
  const txOf = (p) => Buffer.from(p.payload.transaction, 'base64');
  const withTx = (p, bytes) => ({ ...p, payload: { transaction: Buffer.from(bytes).toString('base64') } });
  // Where TransferChecked's data (12, u64 amount, u8 decimals) sits.
  const transferData = (bytes, amount) => {
    const needle = Buffer.alloc(10);
    needle[0] = 12;
    needle.writeBigUInt64LE(amount, 1);
    needle[9] = 6;
    const i = Buffer.from(bytes).indexOf(needle);
    assert(i > 0, 'no TransferChecked data in the transaction');
    return i;
  };

  let svmOffer;
  await test('Solana: the facilitator lists exact on SVM with its fee payer, and the 402 offers it beside Base', async () => {
    const { kinds } = await (await fetch(`${fac.url}/supported`)).json();
    const kind = kinds.find((k) => k.network === SVM_NETWORK);
    eq(kind?.extra?.feePayer, feePayer.address, 'facilitator fee payer');
    const pr = await offered();
    eq(pr.accepts.length, 2, 'accepts');
    eq(pr.accepts[0].network.startsWith('eip155:'), true, 'Base first');
    const a = pr.accepts[1];
    eq(a.scheme, 'exact', 'scheme');
    eq(a.network, SVM_NETWORK, 'network');
    eq(a.amount, '20000', 'amount');
    eq(a.asset, USDC_MINT, 'asset');
    eq(a.payTo, payTo, 'payTo');
    eq(a.maxTimeoutSeconds, 60, 'maxTimeoutSeconds (a blockhash lives 60-90 s)');
    eq(JSON.stringify(a.extra), JSON.stringify({ feePayer: feePayer.address }), 'extra');
    svmOffer = pr;
  });

  await test('Solana: official client pays: "4\\n", settled on the SVM, payTo +20000, payer -20000, fee payer -10001 lamports', async () => {
    const before = await balances();
    eq(before.from, FUNDED, 'payer funded');
    eq(before.payerSol, 0n, 'payer holds no SOL');
    const verifies = fac.calls.filter((c) => c.op === 'verify').length;
    const r = await payingFetch(`${server.url}/v1/exec`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code: 'print(2 + 2)', language: 'python' }),
    });
    const body = await r.json();
    eq(r.status, 200, `status (body ${JSON.stringify(body).slice(0, 300)})`);
    eq(body?.result?.stdout, '4\n', 'stdout');
    const settle = decodePaymentResponseHeader(r.headers.get('PAYMENT-RESPONSE'));
    eq(settle.success, true, 'settle success');
    eq(settle.network, SVM_NETWORK, 'settle network');
    eq(settle.payer, payer.address, 'settle payer');
    assert(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/.test(settle.transaction), `transaction ${settle.transaction}`);
    eq(JSON.stringify(svm.status(settle.transaction)?.err), 'null', 'ledger status of the transaction');
    const after = await balances();
    eq(after.to - before.to, PRICE, 'payTo token rise');
    eq(before.from - after.from, PRICE, 'payer token fall');
    eq(before.fee - after.fee, SETTLEMENT_FEE, 'fee payer lamports spent');
    eq(after.payerSol, 0n, 'payer SOL after');
    if (before.calls !== null) eq(after.calls, before.calls + 1, 'handler runs');
    const verify = fac.calls.filter((c) => c.op === 'verify').at(-1);
    eq(fac.calls.filter((c) => c.op === 'verify').length, verifies + 1, 'verify calls');
    eq(verify.body.paymentRequirements.network, SVM_NETWORK, 'requirements sent to /verify');
    eq(verify.body.paymentRequirements.extra.feePayer, feePayer.address, 'fee payer sent to /verify');
  });

  await test('Solana: replayed payment is refused without running or reaching the facilitator', async () => {
    assert(lastHeader, 'no payment was captured');
    const calls = fac.calls.length;
    await expectRefused(lastHeader, 'payment_already_used');
    eq(fac.calls.length, calls, 'facilitator calls');
  });

  const fresh = async (pr = svmOffer) => client.createPaymentPayload(pr);

  await test('Solana: tampered payment (amount raised after signing) is refused before the facilitator', async () => {
    const p = await fresh();
    const bytes = txOf(p);
    bytes.writeBigUInt64LE(30000n, transferData(bytes, PRICE) + 1);
    const calls = fac.calls.length;
    await expectRefused(encodePaymentSignatureHeader(withTx(p, bytes)), 'invalid_exact_svm_payload_signature_invalid');
    eq(fac.calls.length, calls, 'facilitator calls');
  });

  await test('Solana: tampered payment (client signature replaced) is refused before the facilitator', async () => {
    const p = await fresh();
    const bytes = txOf(p);
    bytes.fill(7, 1 + 64, 1 + 128); // signature 1 is the client's
    await expectRefused(encodePaymentSignatureHeader(withTx(p, bytes)), 'invalid_exact_svm_payload_signature_invalid');
  });

  await test('Solana: underpaid payment (client signs a lowered price) is refused before the facilitator', async () => {
    const lowered = structuredClone(svmOffer);
    lowered.accepts = [lowered.accepts[1]];
    lowered.accepts[0].amount = '10000';
    const p = await fresh(lowered);
    transferData(txOf(p), 10000n); // the client did sign 10000
    const calls = fac.calls.length;
    await expectRefused(encodePaymentSignatureHeader(p), 'payment_requirements_mismatch');
    // ... and with the echo put back to the price, the transaction itself is refused.
    p.accepted.amount = '20000';
    await expectRefused(encodePaymentSignatureHeader(p), 'invalid_exact_svm_payload_amount_mismatch');
    eq(fac.calls.length, calls, 'facilitator calls');
  });

  await test('Solana: payment with another fee payer is refused before the facilitator', async () => {
    const other = structuredClone(svmOffer);
    other.accepts = [other.accepts[1]];
    other.accepts[0].extra.feePayer = (await generateKeyPairSigner()).address;
    const p = await fresh(other);
    await expectRefused(encodePaymentSignatureHeader(p), 'invalid_exact_svm_fee_payer_mismatch');
  });

  await test('Solana: expired payment (its blockhash no longer recent) is refused by the facilitator without running', async () => {
    const p = await fresh();
    svm.expireBlockhash();
    await expectRefused(encodePaymentSignatureHeader(p), 'payment_verification_failed');
    const last = fac.calls.at(-1);
    eq(last.op, 'verify', 'last facilitator call');
    eq(last.result.isValid, false, 'facilitator isValid');
    eq(last.result.invalidReason, 'invalid_exact_svm_transaction_simulation_failed', 'facilitator reason');
    assert(/BlockhashNotFound/.test(last.result.invalidMessage ?? ''), `facilitator message ${last.result.invalidMessage}`);
  });

  await test('Solana: payment from an unfunded payer is refused by the facilitator without running', async () => {
    const broke = await generateKeyPairSigner();
    await svm.fundToken(broke.address, 0n);
    const brokeClient = new x402Client().register('solana:*', new ExactSvmScheme(broke, { rpcUrl: svm.rpcUrl }));
    const p = await brokeClient.createPaymentPayload(svmOffer);
    await expectRefused(encodePaymentSignatureHeader(p), 'payment_verification_failed');
    const last = fac.calls.at(-1);
    eq(last.op, 'verify', 'last facilitator call');
    eq(last.result.isValid, false, 'facilitator isValid');
    eq(last.result.invalidReason, 'invalid_exact_svm_transaction_simulation_failed', 'facilitator reason');
    // Custom error 1 of the Token program at instruction 2: insufficient
    // funds (the facilitator writes the RPC's numbers, bigints, as strings).
    assert(/\{"InstructionError":\["2",\{"Custom":"1"\}\]\}/.test(last.result.invalidMessage ?? ''), `facilitator message ${last.result.invalidMessage}`);
    eq(await svm.tokenBalance(broke.address), 0n, 'unfunded payer balance');
  });

  await test('Solana: payment from a payer with no token account is refused by the facilitator without running', async () => {
    const none = await generateKeyPairSigner();
    const noneClient = new x402Client().register('solana:*', new ExactSvmScheme(none, { rpcUrl: svm.rpcUrl }));
    const p = await noneClient.createPaymentPayload(svmOffer);
    eq(svm.svm.getAccount(await ata(none.address)).exists, false, 'token account exists');
    await expectRefused(encodePaymentSignatureHeader(p), 'payment_verification_failed');
  });

  await test('Solana: the same payment sent twice at once runs once and is charged once', async () => {
    const hdr = encodePaymentSignatureHeader(await fresh());
    const before = await balances();
    const answers = await Promise.all([post({ 'PAYMENT-SIGNATURE': hdr }), post({ 'PAYMENT-SIGNATURE': hdr })]);
    const statuses = answers.map((r) => r.status).sort();
    await Promise.all(answers.map((r) => r.arrayBuffer()));
    eq(JSON.stringify(statuses), JSON.stringify([200, 402]), 'statuses');
    const after = await balances();
    eq(after.to - before.to, PRICE, 'payTo token rise');
    eq(before.from - after.from, PRICE, 'payer token fall');
    eq(before.fee - after.fee, SETTLEMENT_FEE, 'fee payer lamports spent');
    if (before.calls !== null) eq(after.calls, before.calls + 1, 'handler runs');
  });

  await test('Solana over MCP: paid in _meta["x402/payment"], settled on the SVM; the same payment again is refused', async () => {
    const mcp = new McpClient({ name: 'boxer-x402e2e-svm', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
    try {
      const args = { code: 'print(2 + 2)' };
      const unpaid = await mcp.callTool({ name: 'exec', arguments: args });
      eq(unpaid.isError, true, 'unpaid isError');
      eq(unpaid.structuredContent?.accepts?.[1]?.network, SVM_NETWORK, 'Solana offered over MCP');
      const payment = await client.createPaymentPayload(unpaid.structuredContent);
      eq(payment.accepted.network, SVM_NETWORK, 'the Solana client chose Solana');
      const before = await balances();
      const r = await mcp.callTool({ name: 'exec', arguments: args, _meta: { 'x402/payment': payment } });
      assert(!r.isError, `tool error: ${JSON.stringify(r.content)}`);
      eq(r.structuredContent?.stdout, '4\n', 'stdout');
      const settle = r._meta?.['x402/payment-response'];
      eq(settle?.success, true, 'settlement');
      eq(settle.network, SVM_NETWORK, 'settlement network');
      eq(settle.payer, payer.address, 'settlement payer');
      const after = await balances();
      eq(after.to - before.to, PRICE, 'payTo token rise');
      eq(before.from - after.from, PRICE, 'payer token fall');
      if (before.calls !== null) eq(after.calls, before.calls + 1, 'handler runs');
      const again = await mcp.callTool({ name: 'exec', arguments: args, _meta: { 'x402/payment': payment } });
      eq(again.isError, true, 'replay isError');
      assert(again.structuredContent?.error?.includes('payment_already_used'), `replay error ${JSON.stringify(again.structuredContent?.error)}`);
      const last = await balances();
      eq(last.to, after.to, 'payTo token balance after the replay');
      eq(last.fee, after.fee, 'fee payer lamports after the replay');
      if (after.calls !== null) eq(last.calls, after.calls, 'handler runs after the replay');
    } finally {
      await mcp.close();
    }
  });
}
