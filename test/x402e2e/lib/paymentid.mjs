// The payment-identifier extension, end to end: the official client helper
// (@x402/extensions/payment-identifier) adds an id to the official client's
// payments, and exact on-chain balances show what each call was charged.
//
// A retry, as the official client makes it, asks again without payment,
// gets a new 402 and signs a NEW payment with the same id: boxer answers it
// from the first call's kept answer, without running or settling again.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import {
  PAYMENT_IDENTIFIER,
  appendPaymentIdentifierToExtensions,
  declarePaymentIdentifierExtension,
  generatePaymentId,
} from '@x402/extensions/payment-identifier';

const RUN_PRICE = 10000n; // /v1/run-python, $0.01

// sorted is v with object keys in order, to compare JSON by value.
function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
  return v;
}

export async function paymentIdTests({ test, eq, assert, server, token, payTo, mint, handlerCalls }) {
  // A payer of its own, funded here, so that its balance says exactly
  // what these calls cost.
  const newPayer = async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    await mint(account.address, 1_000_000n);
    return account;
  };
  // The official client, paying with account, adding id to every payment
  // as the extension's documentation shows (onBeforePaymentCreation).
  const payingWithId = (account, id) => {
    const client = new x402Client();
    registerExactEvmScheme(client, { signer: account });
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      if (paymentRequired.extensions) appendPaymentIdentifierToExtensions(paymentRequired.extensions, id);
    });
    return { client, fetch: wrapFetchWithPayment(fetch, client) };
  };
  const runPython = (pay, body) => pay(`${server.url}/v1/run-python`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const balances = async (account) => ({ to: await token.balanceOf(payTo), from: await token.balanceOf(account.address), calls: await handlerCalls() });
  const expectCharged = async (account, before, times, runs, what) => {
    eq(await token.balanceOf(payTo) - before.to, RUN_PRICE * BigInt(times), `${what}: payTo balance rise`);
    eq(before.from - await token.balanceOf(account.address), RUN_PRICE * BigInt(times), `${what}: payer balance fall`);
    if (before.calls !== null) eq(await handlerCalls(), before.calls + runs, `${what}: runs`);
  };
  // Random output: a second run could not answer the same.
  const RANDOM = { files: { 'main.py': 'import secrets; print(secrets.token_hex(16))' } };

  await test('payment-identifier: every priced route declares it as the official helper does, beside bazaar', async () => {
    const want = JSON.stringify(sorted(declarePaymentIdentifierExtension(false)));
    for (const route of ['/v1/exec', '/v1/run-python', '/v1/sessions']) {
      const r = await fetch(`${server.url}${route}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
      await r.arrayBuffer();
      eq(r.status, 402, `${route} status`);
      const pr = decodePaymentRequiredHeader(r.headers.get('PAYMENT-REQUIRED'));
      eq(JSON.stringify(sorted(pr.extensions?.[PAYMENT_IDENTIFIER])), want, `${route} declaration`);
      assert(pr.extensions?.bazaar, `${route}: no bazaar beside it`);
    }
  });

  await test('payment-identifier: a retried id is answered once and charged once (new signature, same id)', async () => {
    const account = await newPayer();
    const id = generatePaymentId();
    const { fetch: pay } = payingWithId(account, id);
    const before = await balances(account);
    const first = await runPython(pay, RANDOM);
    const firstBody = await first.text();
    eq(first.status, 200, `first (body ${firstBody.slice(0, 300)})`);
    const receipt = decodePaymentResponseHeader(first.headers.get('PAYMENT-RESPONSE'));
    eq(receipt.success, true, 'first settled');
    await expectCharged(account, before, 1, 1, 'first');

    const retry = await runPython(pay, RANDOM);
    const retryBody = await retry.text();
    eq(retry.status, 200, `retry (body ${retryBody.slice(0, 300)})`);
    eq(retryBody, firstBody, 'retry body');
    eq(retry.headers.get('Idempotent-Replayed'), 'true', 'Idempotent-Replayed');
    eq(decodePaymentResponseHeader(retry.headers.get('PAYMENT-RESPONSE')).transaction, receipt.transaction, 'retry receipt');
    await expectCharged(account, before, 1, 1, 'after the retry');
  });

  await test('payment-identifier: the same id with a changed request is 409 payment_id_conflict, uncharged', async () => {
    const account = await newPayer();
    const { fetch: pay } = payingWithId(account, generatePaymentId('conflict_'));
    const before = await balances(account);
    const first = await runPython(pay, { files: { 'main.py': 'print(1)' } });
    await first.arrayBuffer();
    eq(first.status, 200, 'first');
    const changed = await runPython(pay, { files: { 'main.py': 'print(2)' } });
    const body = await changed.json();
    eq(changed.status, 409, `changed (body ${JSON.stringify(body)})`);
    eq(body.error?.code, 'payment_id_conflict', 'code');
    await expectCharged(account, before, 1, 1, 'after the conflict');
  });

  await test('payment-identifier: an id the spec does not allow is 400 invalid_payment_id, uncharged', async () => {
    const account = await newPayer();
    const client = new x402Client();
    registerExactEvmScheme(client, { signer: account });
    const unpaid = await fetch(`${server.url}/v1/run-python`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(RANDOM) });
    await unpaid.arrayBuffer();
    const pr = decodePaymentRequiredHeader(unpaid.headers.get('PAYMENT-REQUIRED'));
    const payload = await client.createPaymentPayload(pr);
    payload.extensions[PAYMENT_IDENTIFIER].info.id = 'pay_too/short'; // the helper would refuse it
    const before = await balances(account);
    const r = await fetch(`${server.url}/v1/run-python`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payload) },
      body: JSON.stringify(RANDOM),
    });
    const body = await r.json();
    eq(r.status, 400, `status (body ${JSON.stringify(body)})`);
    eq(body.error?.code, 'invalid_payment_id', 'code');
    await expectCharged(account, before, 0, 0, 'invalid id');
  });

  await test('payment-identifier: two calls with one id at once run once and are charged once', async () => {
    const account = await newPayer();
    const { fetch: pay } = payingWithId(account, generatePaymentId());
    const before = await balances(account);
    const answers = await Promise.all([runPython(pay, RANDOM), runPython(pay, RANDOM)]);
    const bodies = await Promise.all(answers.map((r) => r.text()));
    eq(answers.map((r) => r.status).join(), '200,200', `statuses (bodies ${bodies.map((b) => b.slice(0, 200))})`);
    eq(bodies[1], bodies[0], 'the same answer');
    await expectCharged(account, before, 1, 1, 'concurrent');
  });

  await test('payment-identifier with job_id: one charge per job for its payer, by any id; another payer with the same id and job_id gets a run of its own', async () => {
    const jobBody = { ...RANDOM, job_id: 'job_pid_e2e_1' };
    const id = generatePaymentId();
    const a = await newPayer();
    const { fetch: payA } = payingWithId(a, id);
    const beforeA = await balances(a);
    const first = await runPython(payA, jobBody);
    const firstBody = await first.text();
    eq(first.status, 200, `first (body ${firstBody.slice(0, 300)})`);
    const retry = await runPython(payA, jobBody);
    eq(await retry.text(), firstBody, 'retry body');
    await expectCharged(a, beforeA, 1, 1, 'payer A');
    // A new payment id with the same job_id gets the kept job result; it
    // was paid for once, and is not charged again.
    const { fetch: payA2 } = payingWithId(a, generatePaymentId());
    const again = await runPython(payA2, jobBody);
    eq(await again.text(), firstBody, 'the job\'s kept result under a new id');
    eq(again.headers.get('PAYMENT-RESPONSE'), null, 'a receipt for a kept job result');
    await expectCharged(a, beforeA, 1, 1, 'payer A, new id, same job_id');

    const b = await newPayer();
    const { fetch: payB } = payingWithId(b, id);
    const beforeB = await balances(b);
    const other = await runPython(payB, jobBody);
    const otherBody = await other.text();
    eq(other.status, 200, `payer B (body ${otherBody.slice(0, 300)})`);
    assert(JSON.parse(otherBody).stdout !== JSON.parse(firstBody).stdout, 'payer B got payer A\'s result');
    eq(other.headers.get('Idempotent-Replayed'), null, 'payer B replayed');
    await expectCharged(b, beforeB, 1, 1, 'payer B');
    eq(await token.balanceOf(a.address), beforeA.from - RUN_PRICE, 'payer A untouched by B');
  });
}
