// One shared HTTP client multiplexes every session to a server onto one
// HTTP/2 connection, and hyper never opens a second one when the server's SETTINGS_MAX_CONCURRENT_STREAMS
// is reached: requests wait for a free stream. Each session holds its standalone GET stream open for its
// whole life, so once the sessions outnumber the server's limit, every further request (a new session's
// initialize, every user's calls) waits until its deadline. One connection per toolset (before) had none of this.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStreamableFixture } from './fixtures/http-server.mjs';
import { here } from './helpers.mjs';

function makeCertificates(dir) {
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=mcpferry test CA');
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem', '-out', 'leaf.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'cert.pem', '-days', '2', '-extfile', 'ext.cnf');
  return { ca: join(dir, 'ca.pem'), key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
}

test('sessions beyond the server\u2019s HTTP/2 stream limit still connect and call', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpferry-h2-limit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const certs = makeCertificates(dir);
  const server = await startStreamableFixture({ tls: { key: certs.key, cert: certs.cert }, getStream: 'sse', h2Settings: { maxConcurrentStreams: 3 } });
  t.after(server.close);
  const { stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, [join(here, 'fixtures', 'h2-streams-child.mjs'), server.url], { env: { ...process.env, SSL_CERT_FILE: certs.ca }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ error, stdout, stderr }));
  });
  const { outcome, timings } = JSON.parse(stdout.trim().split('\n').at(-1) || '{}');
  const gets = server.log.filter((r) => r.method === 'GET');
  // The held-open GET streams each ride an HTTP/1.1 connection of their own; the requests stay on HTTP/2.
  assert.ok(gets.length >= 4 && gets.every((r) => r.httpVersion === '1.1'), `GET streams: ${gets.map((r) => r.httpVersion)}; connect times ${JSON.stringify(timings)}`);
  assert.ok(server.log.filter((r) => r.method === 'POST').every((r) => r.httpVersion === '2.0'), 'POSTs multiplexed on HTTP/2');
  assert.deepEqual(outcome, { u1: 'echo: u1', u2: 'echo: u2', u3: 'echo: u3', u4: 'echo: u4' }, `${JSON.stringify(outcome)}; GET streams opened: ${gets.length} on ${[...new Set(server.log.map((r) => r.socket))]}; ${stderr.slice(-500)}`);
});
