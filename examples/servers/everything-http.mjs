// Starts @modelcontextprotocol/server-everything in one of its HTTP modes ('streamableHttp' or 'sse')
// on a free loopback port, for the demo and the tests.

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
export const EVERYTHING_BIN = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist', 'index.js');

function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Resolves to `{ url, stop }` once the server listens. */
export async function startEverythingHttp(mode) {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING_BIN, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise((resolve, reject) => {
    let seen = '';
    child.stderr.on('data', (chunk) => {
      seen += chunk;
      if (/listening on port|running on port/i.test(seen)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`server-everything ${mode} exited with ${code}: ${seen}`)));
  });
  child.stderr.resume();
  return { url: `http://localhost:${port}${mode === 'sse' ? '/sse' : '/mcp'}`, stop: () => child.kill() };
}

/**
 * server-everything over stdio and over Streamable HTTP, as `[label, start]` pairs: `start()` resolves to
 * `{ entry, stop }`, the server entry named `everything`.
 */
export const EVERYTHING_STDIO_AND_HTTP = [
  ['stdio', async () => ({ entry: { name: 'everything', type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] }, stop() {} })],
  ['streamable HTTP', async () => {
    const server = await startEverythingHttp('streamableHttp');
    return { entry: { name: 'everything', type: 'streamable-http', url: server.url }, stop: server.stop };
  }],
];
