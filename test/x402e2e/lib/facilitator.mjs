// The official facilitator (x402Facilitator with the exact EVM scheme, and
// the exact SVM scheme when given a Solana fee payer), served over HTTP on
// loopback and pointed at the local chains. The HTTP
// shell is ours (the package has none); the verify and settle logic is the
// package's, unchanged. Every request is recorded for the assertions.
import http from 'node:http';
import { createWalletClient, publicActions, http as viemHttp } from 'viem';
import { x402Facilitator } from '@x402/core/facilitator';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactSvmScheme } from '@x402/svm/exact/facilitator';
import { toFacilitatorSvmSigner } from '@x402/svm';

// svm, if given, is { network, feePayer (a @solana/kit signer), rpcUrl }:
// the official SVM signer takes a custom RPC URL for any network id it knows.
export async function startFacilitator({ chain, rpcUrl }, account, svm) {
  const wallet = createWalletClient({ account, chain, transport: viemHttp(rpcUrl), pollingInterval: 200 })
    .extend(publicActions);
  const signer = toFacilitatorEvmSigner(Object.assign(wallet, { address: account.address }), {
    confirmationTimeoutMs: 30000,
  });
  // faults.receiptFailures > 0 makes that many waits for a receipt fail,
  // after the transfer was sent: what a slow chain or RPC does, and what
  // the facilitator answers settlement_pending for.
  // faults.settleRefusals > 0 makes that many /settle calls answer a
  // refusal without touching the chain: what a payment whose funds left
  // between verify and settle gets.
  const faults = { receiptFailures: 0, settleRefusals: 0 };
  const waitForReceipt = signer.waitForTransactionReceipt.bind(signer);
  signer.waitForTransactionReceipt = async (args) => {
    if (faults.receiptFailures > 0) {
      faults.receiptFailures--;
      throw new Error('injected by the test: the receipt did not come in time');
    }
    return waitForReceipt(args);
  };
  const facilitator = new x402Facilitator().register(`eip155:${chain.id}`, new ExactEvmScheme(signer));
  if (svm) {
    facilitator.register(svm.network, new ExactSvmScheme(toFacilitatorSvmSigner(svm.feePayer, { defaultRpcUrl: svm.rpcUrl })));
  }

  const calls = [];
  const supported = { asked: 0 };
  const server = http.createServer(async (req, res) => {
    const answer = (status, body) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      if (req.method === 'GET' && req.url === '/supported') {
        supported.asked++;
        return answer(200, facilitator.getSupported());
      }
      const op = { '/verify': 'verify', '/settle': 'settle' }[req.url];
      if (req.method !== 'POST' || !op) return answer(404, { error: 'not found' });
      let raw = '';
      for await (const chunk of req) raw += chunk;
      const body = JSON.parse(raw);
      const call = { op, body, auth: req.headers.authorization };
      calls.push(call);
      if (op === 'settle' && faults.settleRefusals > 0) {
        faults.settleRefusals--;
        call.result = { success: false, errorReason: 'insufficient_funds', transaction: '', network: body.paymentRequirements?.network };
        return answer(200, call.result);
      }
      call.result = await facilitator[op](body.paymentPayload, body.paymentRequirements);
      return answer(200, call.result);
    } catch (e) {
      return answer(500, { error: String(e?.message ?? e) });
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    calls,
    supported,
    faults,
    stop: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); }),
  };
}
