// Child processes and ports for the harness: loopback only, every process
// started here is killed by its own id on the way out.
import { spawn } from 'node:child_process';
import net from 'node:net';

/** A free TCP port on 127.0.0.1, as the kernel hands it out. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Starts a command in its own process group, so that stop() ends it and
 * anything it started (a `go run` child, a shell's child). Output is kept
 * for the failure report.
 */
export function startProcess(name, file, args, opts = {}) {
  const child = spawn(file, args, { ...opts, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  const keep = (chunk) => {
    log.push(chunk.toString());
    if (log.length > 400) log.shift();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = null;
  const done = new Promise((resolve) => child.on('exit', (code, sig) => { exited = { code, sig }; resolve(); }));
  return {
    name,
    child,
    log: () => log.join(''),
    exited: () => exited,
    async stop() {
      if (exited) return;
      try { process.kill(-child.pid, 'SIGTERM'); } catch { /* already gone */ }
      const timer = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }, 3000);
      await done;
      clearTimeout(timer);
    },
  };
}

/** Calls probe until it resolves truthy, or fails after timeoutMs. */
export async function waitFor(what, probe, timeoutMs, proc) {
  const deadline = Date.now() + timeoutMs;
  let lastErr;
  while (Date.now() < deadline) {
    if (proc?.exited()) throw new Error(`${what}: process exited ${JSON.stringify(proc.exited())}\n${proc.log()}`);
    try {
      if (await probe()) return;
    } catch (e) {
      lastErr = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not ready after ${timeoutMs} ms (${lastErr?.message ?? 'no answer'})\n${proc?.log() ?? ''}`);
}
