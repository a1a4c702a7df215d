// The floor: a minimal hand-written JSON-RPC client over the same stdio server, in plain Node. No
// validation, no schemas, no timeouts, no cancellation: what is left is the pipe, JSON and the event loop,
// i.e. the practical limit any Node-hosted client is up against. Stdio only (W1, W2, W4, W5 and W11's resources/read).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { runClient } from '../lib/workloads.mjs';

class RawConnection {
  constructor(server) {
    this.child = spawn(server.command, server.args, { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...server.env } });
    this.pending = new Map();
    this.nextId = 1;
    this.inbox = '';
    this.outbox = '';
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (chunk) => this.onData(chunk));
    this.child.on('exit', () => {
      for (const { reject } of this.pending.values()) reject(new Error('server exited'));
      this.pending.clear();
    });
  }

  onData(chunk) {
    this.inbox += chunk;
    let start = 0;
    for (let nl = this.inbox.indexOf('\n', start); nl !== -1; nl = this.inbox.indexOf('\n', start)) {
      const msg = JSON.parse(this.inbox.slice(start, nl));
      start = nl + 1;
      const waiter = this.pending.get(msg.id);
      if (!waiter) continue;
      this.pending.delete(msg.id);
      if (msg.error) waiter.reject(new Error(msg.error.message));
      else waiter.resolve(msg.result);
    }
    this.inbox = this.inbox.slice(start);
  }

  // Messages written in the same tick leave in one write (as mcpferry's writer does), so 64 calls in
  // flight cost one syscall rather than 64.
  send(msg) {
    if (this.outbox === '') queueMicrotask(() => {
      this.child.stdin.write(this.outbox);
      this.outbox = '';
    });
    this.outbox += JSON.stringify(msg) + '\n';
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  async close() {
    this.child.stdin.end();
    if (this.child.exitCode === null && this.child.signalCode === null) await once(this.child, 'exit');
  }
}

async function connectOne(server) {
  const conn = new RawConnection(server);
  await conn.request('initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'bench-raw', version: '1.0.0' },
  });
  conn.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  const tools = [];
  let cursor;
  do {
    const page = await conn.request('tools/list', cursor === undefined ? {} : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { server, conn, tools };
}

await runClient({
  name: 'raw',
  imports: [],
  async connect(servers) {
    const connected = await Promise.all(servers.map(connectOne));
    const map = new Map();
    const byServer = new Map(connected.map(({ server, conn }) => [server.name, conn]));
    for (const { server, conn, tools } of connected) {
      for (const tool of tools) map.set(`${server.name}__${tool.name}`, { conn, tool });
    }
    return {
      toolCount: map.size,
      tool(server, name) {
        const { conn, tool } = map.get(`${server}__${name}`);
        return (args) => conn.request('tools/call', { name: tool.name, arguments: args });
      },
      readResource(server, uri) {
        return byServer.get(server).request('resources/read', { uri });
      },
      close: () => Promise.all(connected.map((c) => c.conn.close())).then(() => {}),
    };
  },
});
