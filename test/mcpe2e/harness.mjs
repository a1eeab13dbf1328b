// End-to-end MCP test: the official TypeScript MCP client against the real
// boxer, over both transports. Each transport gets the same cases (a print,
// a traceback, a timeout, a matplotlib PNG, bad arguments), checked
// exactly; every call and its answer go to the transcript on stdout.
//
//   node harness.mjs --boxer /path/to/boxer [--url URL [--key KEY]] [--timeout-ms N]
//
// Transports: streamable HTTP at `boxer serve`'s /mcp; stdio through
// `boxer mcp --server URL` (tool calls forwarded to that server); stdio
// through `boxer mcp` running its own sandboxes, once the server is gone.
// With --url the server is one running already (test/container's image):
// the first two transports, and the server is left running.
import { parseArgs } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { freePort, startProcess, waitFor } from '../x402e2e/lib/proc.mjs';

const { values: opts } = parseArgs({
  options: { boxer: { type: 'string' }, url: { type: 'string' }, key: { type: 'string' }, 'timeout-ms': { type: 'string', default: '240000' } },
});
if (!opts.boxer) throw new Error('--boxer is required');
const deadline = setTimeout(() => { console.error('harness: out of time'); process.exit(1); }, Number(opts['timeout-ms']));

let passed = 0;
let failed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`  ok    ${name}`);
  } else {
    failed++;
    console.log(`  FAIL  ${name}: ${detail}`);
  }
}

/** A result as the transcript shows it: images by size, long text cut. */
function brief(result) {
  const content = (result.content ?? []).map((c) => (c.type === 'image'
    ? { type: 'image', mimeType: c.mimeType, bytes: Buffer.from(c.data, 'base64').length }
    : { ...c, text: c.text?.length > 400 ? c.text.slice(0, 400) + '...' : c.text }));
  const sc = result.structuredContent;
  const structured = sc && {
    ...sc,
    ...(sc.artifacts ? { artifacts: sc.artifacts.map((a) => ({ ...a, content: `(${a.content.length} chars)` })) } : {}),
  };
  return { isError: result.isError ?? false, content, structuredContent: structured };
}

async function call(client, label, name, args) {
  console.log(`> [${label}] tools/call ${name} ${JSON.stringify(args)}`);
  const result = await client.callTool({ name, arguments: args });
  console.log(`< ${JSON.stringify(brief(result))}`);
  return result;
}

const chart = `import os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
os.makedirs("output", exist_ok=True)
plt.plot([1, 2, 3, 4], [1, 4, 9, 16])
plt.title("squares")
plt.savefig("output/chart.png")
print("saved")
`;

/** The cases every transport must pass. */
async function cases(client, label) {
  const tools = await client.listTools();
  const names = tools.tools.map((t) => t.name).sort();
  check(`${label}: tools listed`, JSON.stringify(names) === '["exec","run_python","session_create","session_delete","session_exec","session_fork","session_list","session_read_file","session_write_files"]', JSON.stringify(names));
  check(`${label}: every tool has input and output schemas`,
    tools.tools.every((t) => t.inputSchema?.type === 'object' && t.outputSchema?.type === 'object'), JSON.stringify(tools.tools));

  let r = await call(client, label, 'exec', { code: 'print(2+2)', language: 'python' });
  check(`${label}: exec prints`, !r.isError && r.structuredContent?.stdout === '4\n' && r.structuredContent.exitCode === 0
    && r.structuredContent.status === 'ok' && r.content[0].text.includes('4\n'), JSON.stringify(r));

  r = await call(client, label, 'run_python', { code: 'def f():\n    return 1/0\nf()\n' });
  const sc = r.structuredContent ?? {};
  check(`${label}: a traceback is a result`, !r.isError && sc.exit_code === 1 && sc.status === 'nonzero_exit'
    && sc.stderr.includes('ZeroDivisionError: division by zero') && sc.stderr.includes('line 2, in f')
    && r.content[0].text.includes('ZeroDivisionError'), JSON.stringify(r));

  r = await call(client, label, 'run_python', { code: 'while True:\n    pass\n', timeout_seconds: 1 });
  check(`${label}: a timeout is a result`, !r.isError && r.structuredContent?.timed_out === true
    && r.structuredContent.status === 'timeout' && r.structuredContent.exit_code === -1
    && r.structuredContent.duration_ms >= 1000 && r.structuredContent.duration_ms < 5000, JSON.stringify(brief(r)));

  r = await call(client, label, 'run_python', { files: { 'main.py': chart }, artifact_paths: ['output/chart.png'], timeout_seconds: 20, memory_mb: 512 });
  const images = (r.content ?? []).filter((c) => c.type === 'image');
  const png = images.length === 1 ? Buffer.from(images[0].data, 'base64') : Buffer.alloc(0);
  const art = r.structuredContent?.artifacts?.[0];
  check(`${label}: the matplotlib chart comes back as a PNG image`, !r.isError && r.structuredContent?.stdout === 'saved\n'
    && images.length === 1 && images[0].mimeType === 'image/png'
    && png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))
    && art?.path === 'output/chart.png' && art.size === png.length && art.encoding === 'base64'
    && Buffer.from(art.content, 'base64').equals(png), JSON.stringify(brief(r)));

  r = await call(client, label, 'exec', { code: 42 });
  check(`${label}: arguments of the wrong type are a tool error`, r.isError === true
    && r.content[0].text.startsWith('invalid_request: arguments:') && !r.structuredContent, JSON.stringify(r));
  r = await call(client, label, 'run_python', { code: 'print(1)', memory_mb: 5 });
  check(`${label}: a limit out of range is the API's error, with its code (the published schema states it too)`, r.isError === true
    && r.content[0].text === 'invalid_request: memory_mb: 5 is out of range; allowed: 64 to 1024'
    && tools.tools.find((t) => t.name === 'run_python').inputSchema.properties.memory_mb.minimum === 64, JSON.stringify(r));
  r = await call(client, label, 'run_python', { files: { 'a/../../x.py': 'print(1)' } });
  check(`${label}: what only the API checks is the API's error, with its code`, r.isError === true
    && r.content[0].text.startsWith('invalid_request: files:'), JSON.stringify(r));
  r = await call(client, label, 'run_python', { stdin: 'x' });
  check(`${label}: nothing to run is refused`, r.isError === true && r.content[0].text === 'invalid_request: give code, or files to run', JSON.stringify(r));
  r = await call(client, label, 'run_python', { code: 'print(1)', surprise: true });
  check(`${label}: an unknown argument is refused`, r.isError === true && r.content[0].text.startsWith('invalid_request: arguments:'), JSON.stringify(r));
  await sessionCases(client, label);
}

/** A session through the tools: state kept across cells, files both ways, a figure, its end. */
async function sessionCases(client, label) {
  let r = await call(client, label, 'session_create', { files: { 'data/rows.csv': 'x\n1\n2\n' } });
  const id = r.structuredContent?.session_id;
  check(`${label}: session_create answers a session_id`, !r.isError && /^ses_[a-z2-7]{26}$/.test(id ?? '') && r.structuredContent.idle_timeout_seconds === 600, JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: id, code: "rows = open('data/rows.csv').read().split()[1:]" });
  check(`${label}: a cell runs`, !r.isError && r.structuredContent?.result?.status === 'ok' && r.structuredContent.result.sessionAlive === true, JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: id, code: 'total = sum(map(int, rows))\nprint(total)' });
  check(`${label}: the next cell sees the first's variables`, r.structuredContent?.result?.stdout === '3\n', JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: id, code: "open('out/total.txt', 'w').write(str(total * 10)) if __import__('os').makedirs('out', exist_ok=True) is None else 0" });
  check(`${label}: a third cell too, its value shown`, r.structuredContent?.result?.value === '2' && r.content[0].text.includes('--- value ---\n2'), JSON.stringify(r));
  r = await call(client, label, 'session_read_file', { session_id: id, path: 'out/total.txt' });
  check(`${label}: a file the session wrote is read back`, !r.isError && r.structuredContent?.content === '30' && r.structuredContent.encoding === 'utf-8', JSON.stringify(r));
  r = await call(client, label, 'session_write_files', { session_id: id, files: { 'more.txt': '12' } });
  check(`${label}: files are written into the session`, !r.isError && JSON.stringify(r.structuredContent?.written) === '["more.txt"]', JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: id, code: "import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\nplt.plot([total, int(open('more.txt').read())])\nNone", timeout_seconds: 60 });
  const img = (r.content ?? []).find((c) => c.type === 'image');
  check(`${label}: a figure left open comes back as an image`, !r.isError && img?.mimeType === 'image/png'
    && Buffer.from(img.data, 'base64').subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47])), JSON.stringify(brief(r)));
  r = await call(client, label, 'session_fork', { session_id: id });
  const fork = r.structuredContent?.session_id;
  check(`${label}: session_fork answers a new session_id`, !r.isError && /^ses_[a-z2-7]{26}$/.test(fork ?? '') && fork !== id, JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: fork, code: 'total += 100\ntotal' });
  check(`${label}: the fork holds its parent's variables`, r.structuredContent?.result?.value === '103', JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: id, code: 'total' });
  check(`${label}: and the parent does not see the fork's change`, r.structuredContent?.result?.value === '3', JSON.stringify(r));
  r = await call(client, label, 'session_delete', { session_id: fork });
  check(`${label}: the fork is ended`, !r.isError && r.structuredContent?.deleted === true, JSON.stringify(r));
  r = await call(client, label, 'session_list', {});
  check(`${label}: the session is listed`, !r.isError && r.structuredContent?.sessions?.some((s) => s.session_id === id), JSON.stringify(r));
  r = await call(client, label, 'session_delete', { session_id: id });
  check(`${label}: the session is ended`, !r.isError && r.structuredContent?.deleted === true, JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: id, code: 'total' });
  check(`${label}: an ended session says so, with its code`, r.isError === true && r.content[0].text.startsWith('session_ended:'), JSON.stringify(r));
  r = await call(client, label, 'session_exec', { session_id: '../../v1/exec', code: '1' });
  check(`${label}: an id is one path segment, whatever it holds`, r.isError === true && r.content[0].text.startsWith('not_found:'), JSON.stringify(r));
}

async function withClient(label, transport, fn) {
  const client = new Client({ name: 'boxer-mcpe2e', version: '1.0.0' });
  await client.connect(transport);
  console.log(`# ${label}: connected to ${JSON.stringify(client.getServerVersion())}`);
  try {
    await fn(client);
  } finally {
    await client.close();
  }
}

const tmp = mkdtempSync(path.join(tmpdir(), 'boxer-mcpe2e-'));
let server;
try {
  // --url: a boxer serving already (test/container runs its image);
  // the harness then tests it over both transports and leaves it be.
  let url = opts.url;
  if (!url) {
    const addr = `127.0.0.1:${await freePort()}`;
    server = startProcess('boxer serve', opts.boxer, ['serve', '--addr', addr, '--data-dir', path.join(tmp, 'serve')]);
    url = `http://${addr}`;
  }
  await waitFor('boxer serve', async () => (await fetch(`${url}/readyz`)).ok, 180000, server);

  // --key: the server asks for API keys; both transports send this one.
  const headers = opts.key ? { Authorization: `Bearer ${opts.key}` } : {};
  const env = opts.key ? { ...process.env, BOXER_API_KEY: opts.key } : undefined;
  await withClient('streamable HTTP', new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }),
    (c) => cases(c, 'http'));
  await withClient('stdio, --server', new StdioClientTransport({ command: opts.boxer, args: ['mcp', '--server', url], env, stderr: 'pipe' }),
    (c) => cases(c, 'stdio --server'));
  if (server) {
    await server.stop();
    server = null;
    await withClient('stdio, local sandboxes', new StdioClientTransport({
      command: opts.boxer, args: ['mcp', '--data-dir', path.join(tmp, 'stdio')], stderr: 'pipe',
    }), (c) => cases(c, 'stdio local'));
  }
} catch (e) {
  failed++;
  console.log(`  FAIL  harness: ${e.stack ?? e}`);
  if (server) console.log(server.log());
} finally {
  if (server) await server.stop();
  rmSync(tmp, { recursive: true, force: true });
  clearTimeout(deadline);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
