#!/usr/bin/env node
// Minimal MCP server over stdio: newline-delimited JSON-RPC on stdin/stdout, no SDK.
// Tools and paging are configured by ECHO_TOOLS / ECHO_PAGE (see protocol.mjs). Extra argv (the harness
// passes `--bench-run=<id>` so it can find strays) is ignored.
//
// It exits when stdin ends, so a client process that dies never leaves this server behind.

import { handleText } from './protocol.mjs';

let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  let start = 0;
  let out = '';
  for (let nl = pending.indexOf('\n', start); nl !== -1; nl = pending.indexOf('\n', start)) {
    const line = pending.slice(start, nl);
    start = nl + 1;
    if (line.trim() === '') continue;
    for (const answer of handleText(line)) out += answer + '\n';
  }
  pending = pending.slice(start);
  // One write per chunk read: answers to requests that arrived together leave together, so the server
  // makes as few syscalls as the client lets it.
  if (out !== '') process.stdout.write(out);
});
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0)); // the client closed its end
