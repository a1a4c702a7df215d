#!/usr/bin/env node
// Minimal MCP server over Streamable HTTP on node:http, no SDK: POST answers with application/json bodies
// (never an event stream), a stateful Mcp-Session-Id issued by initialize, GET refused with 405 (no
// server-initiated stream is offered), DELETE ends the session. Same tools as echo-stdio.mjs.
//
// With ECHO_MODERN=1 it speaks 2026-07-28 too (BENCH_SESSIONS_ERA=modern): a POST whose MCP-Protocol-Version
// is 2026-07-28 is served without a session (`server/discover` answered, results with `resultType`), while
// `initialize` still opens a session for clients of the 2025 era.
//
// Listens on 127.0.0.1 on a free port (ECHO_PORT: that port) and prints one line
// `{"url":"http://127.0.0.1:PORT/mcp"}`. With ECHO_LISTEN=stdin it prints `{"waiting":true}` once started and
// starts listening only when a line arrives on stdin: the recovery row (R2) starts the replacement of a server
// ahead, so that bringing the server back on its port takes a bind, not a Node start-up.
// It exits when stdin ends: the process that started it holds the other end, so it cannot outlive it.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { handleMessage, modernEnabled } from './protocol.mjs';

const sessions = new Set();

function send(res, status, body, headers = {}) {
  if (body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function rpcError(code, message) {
  return JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } });
}

function onPost(req, res, body) {
  let parsed;
  try {
    parsed = JSON.parse(body);
  } catch {
    return send(res, 400, rpcError(-32700, 'Parse error'));
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  const headers = {};
  let session = req.headers['mcp-session-id'];
  const modern = modernEnabled && req.headers['mcp-protocol-version'] === '2026-07-28';
  if (modern) {
    // Stateless: no session to check.
  } else if (messages.some((m) => m?.method === 'initialize')) {
    session = randomUUID();
    sessions.add(session);
    headers['mcp-session-id'] = session;
  } else if (session !== undefined && !sessions.has(session)) {
    return send(res, 404, rpcError(-32001, 'Session not found'));
  } else if (session === undefined) {
    // Only probes for methods this server does not have (server/discover) may come before initialize;
    // they are answered with "method not found" like on stdio.
    const needsSession = messages.some((m) => ['tools/list', 'tools/call', 'ping'].includes(m?.method));
    if (needsSession) return send(res, 400, rpcError(-32000, 'Bad Request: Mcp-Session-Id header is required'));
  }
  const answers = [];
  for (const msg of messages) {
    const answer = handleMessage(msg, modern);
    if (answer !== null) answers.push(answer);
  }
  if (answers.length === 0) return send(res, 202, undefined, headers); // notifications only
  send(res, 200, Array.isArray(parsed) ? `[${answers.join(',')}]` : answers[0], headers);
}

const server = createServer((req, res) => {
  if (new URL(req.url, 'http://x').pathname !== '/mcp') return send(res, 404, rpcError(-32000, 'Not found'));
  if (req.method === 'POST') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => onPost(req, res, Buffer.concat(chunks).toString('utf8')));
    return;
  }
  if (req.method === 'DELETE') {
    const session = req.headers['mcp-session-id'];
    return send(res, sessions.delete(session) ? 200 : 404, undefined);
  }
  send(res, 405, undefined, { allow: 'POST, DELETE' });
});
// Clients keep connections alive between calls; a short server timeout would race their reuse.
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;

const listen = () =>
  server.listen(Number(process.env.ECHO_PORT ?? 0), '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}/mcp` }) + '\n');
  });
if (process.env.ECHO_LISTEN === 'stdin') {
  process.stdin.once('data', listen);
  process.stdout.write('{"waiting":true}\n'); // started: a line on stdin now takes only a bind
} else listen();
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
