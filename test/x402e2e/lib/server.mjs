// The server under test, started from a command template so the same
// harness drives the fake server now and `boxer serve` later. The template
// may use {addr} (host:port to listen on), {facilitator}, {payTo},
// {network}, {asset} and {solanaPayTo}; the same values are also in the environment under
// the names boxer's flags read (BOXER_PAYMENTS, BOXER_X402_*), plus
// BOXER_LISTEN.
import { freePort, startProcess, waitFor } from './proc.mjs';

export async function startServer(template, { facilitatorUrl, payTo, network, asset, solanaPayTo = '', cwd }) {
  const addr = `127.0.0.1:${await freePort()}`;
  const values = { addr, facilitator: facilitatorUrl, payTo, network, asset, solanaPayTo };
  const cmd = template.replace(/\{(addr|facilitator|payTo|network|asset|solanaPayTo)\}/g, (_, k) => values[k]);
  const env = {
    ...process.env,
    BOXER_LISTEN: addr,
    BOXER_PAYMENTS: 'x402',
    BOXER_X402_PAY_TO: payTo,
    BOXER_X402_FACILITATOR_URL: facilitatorUrl,
    BOXER_X402_NETWORK: network,
    BOXER_X402_ASSET: asset,
    BOXER_X402_SOLANA_PAY_TO: solanaPayTo,
    BOXER_X402_PUBLIC_URL: `http://${addr}`, // sign-in needs it
  };
  const proc = startProcess('server', 'sh', ['-c', cmd], { env, cwd });
  const url = `http://${addr}`;
  // Ready when a priced route answers at all (402 expected).
  await waitFor('server under test', async () => {
    const r = await fetch(`${url}/v1/exec`, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
    await r.arrayBuffer();
    return true;
  }, 120000, proc);
  return { proc, url };
}
