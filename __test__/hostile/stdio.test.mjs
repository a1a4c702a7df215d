// Hostile stdio servers (issue 10, "Hostile servers"). Each test asserts a typed error or the correct
// result, an answer within a stated bound (never the full timeout where the client can know sooner),
// bounded memory where the server controls a size, and no process of the server's left after close().

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { connectMcpServer } from '../../dist/index.js';
import {
  hostileStdio, open, assertFails, assertAnswers, assertAllGone, closeWithin, rss, assertRssBounded, testConfinedToOneCall, stillServes, MIB, exitWhenDone,
} from '../fixtures/hostile/harness.mjs';
import { here, until } from '../helpers.mjs';

exitWhenDone(after);

/** timeoutMs for calls that must fail sooner than it: a result arriving near it is the defect. */
const LONG_TIMEOUT_MS = 5000;
/** How soon a failure the client can see in the bytes must reach the caller. */
const PROMPT_MS = 1500;
/** close() of a server that exits when stdin ends (STDIO_EXIT_GRACE_MS plus slack). */
const CLOSE_MS = 2000;
/** close() of a server that ignores stdin's end and SIGTERM (exit grace + term grace + slack). */
const STUBBORN_CLOSE_MS = 4000;
const PROVIDER_SAFE = /^[a-zA-Z0-9_-]{1,64}$/;

/** Open one hostile server, run `body`, then close and check every process it started is gone. */
async function withServer(mode, opts, body, closeMs = CLOSE_MS) {
  const server = hostileStdio('h', mode);
  const toolset = await open([server.entry], opts);
  try {
    await body(toolset, server);
  } finally {
    await closeWithin(toolset, closeMs);
    assertAllGone(server.pids(), `hostile server (${mode || 'default'})`);
  }
}

test('garbage on stdout fails the call as a protocol error at once', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__garbage.execute({}), ['mcp_protocol_error'], PROMPT_MS);
  });
});

test('invalid UTF-8 inside a response fails the call at once', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__invalid_utf8.execute({}), ['mcp_protocol_error'], PROMPT_MS);
  });
});

test('a line far over the limit with no newline fails the call the moment the limit passes, in bounded memory', async () => {
  const before = rss();
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__long_line.execute({ mib: 64 }), ['mcp_result_too_large'], PROMPT_MS);
    assertRssBounded(before, 48 * MIB, '64 MiB line without a newline');
  });
});

test('an oversized line that does end fails only its call; the next response is intact', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__oversized_then_ok.execute({ mib: 4 }), ['mcp_result_too_large'], PROMPT_MS);
    await stillServes(tools);
  });
});

testConfinedToOneCall(test, (body) => withServer('', { timeoutMs: LONG_TIMEOUT_MS }, body), PROMPT_MS);

test('a response after cancellation is dropped; the aborted call stays aborted', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async (toolset, server) => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    await assertFails(() => toolset.tools.h__answer_after_cancel.execute({}, { signal: controller.signal }), ['mcp_aborted'], PROMPT_MS);
    await until(() => server.methods().includes('notifications/cancelled'));
    await new Promise((r) => setTimeout(r, 100)); // the late answers arrive meanwhile
    await stillServes(toolset.tools);
    assert.equal(toolset.diagnostics.filter((d) => d.code === 'server-degraded').length, 0);
  });
});

test('a flood of 100 000 notifications mid-call: the call completes, memory stays bounded', async () => {
  const before = rss();
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    assert.equal(await assertAnswers(() => tools.h__notification_flood.execute({ count: 100_000 }), 20_000), 'flooded 100000');
    assertRssBounded(before, 64 * MIB, '100 000 notifications');
    await stillServes(tools);
  });
});

test('a stderr flood neither stalls calls nor grows memory', { skip: process.platform === 'win32' && "the fixture's flood loop never yields on Windows: Node writes stdout/stderr pipes blocking there, so write() never returns false and the server never reads its stdin" }, async () => {
  const before = rss();
  await withServer('stderr-flood', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    for (let i = 0; i < 20; i++) await stillServes(tools);
    assert.equal(await assertAnswers(() => tools.h__stderr_burst.execute({ mib: 32 }), 10_000), 'burst done');
    await stillServes(tools);
    assertRssBounded(before, 48 * MIB, 'stderr flood');
  });
});

test('an initialize that is never answered ends in a timeout diagnostic, and the process is reaped', async () => {
  const server = hostileStdio('h', 'never-init');
  const started = Date.now();
  const toolset = await open([server.entry], { timeoutMs: 1000 });
  const took = Date.now() - started;
  assert.ok(took < 2500, `mcpTools took ${took} ms with timeoutMs 1000`);
  const degraded = toolset.diagnostics.find((d) => d.code === 'server-degraded');
  assert.equal(degraded?.errorCode, 'mcp_timeout');
  assert.deepEqual(Object.keys(toolset.tools).filter((n) => n.startsWith('h__')), []);
  await closeWithin(toolset, CLOSE_MS);
  assertAllGone(server.pids(), 'never-initializing server');
});

test('a server that ignores SIGTERM and forks children and grandchildren that do too: all gone after close()', async () => {
  const server = hostileStdio('h', 'ignore-term-forks');
  const toolset = await open([server.entry], { timeoutMs: LONG_TIMEOUT_MS });
  await until(() => server.pids().length === 5); // itself, two children, two grandchildren
  await stillServes(toolset.tools);
  await closeWithin(toolset, STUBBORN_CLOSE_MS);
  assertAllGone(server.pids(), 'stubborn family');
});

test('exit in the middle of a response fails the call as a transport error at once', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    await assertFails(() => tools.h__exit_mid_call.execute({}), ['mcp_transport_error'], PROMPT_MS);
  });
});

test('stdout closed by a server that stays alive fails the pending call at once; the server is replaced', { skip: process.platform === 'win32' && "closeSync(1) does not close the pipe on Windows: libuv holds its own duplicate of a stdio handle" }, async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async (toolset) => {
    const { tools } = toolset;
    await assertFails(() => tools.h__close_stdout.execute({}), ['mcp_transport_error'], PROMPT_MS);
    // The process that closed its stdout but lives on is reaped, and a new one started for the next call
    // (withServer checks every process it started is gone at the end).
    await until(() => toolset.servers()[0].state === 'live' && toolset.servers()[0].restarts === 1, { timeoutMs: 15_000 });
    assert.equal(await assertAnswers(() => tools.h__echo.execute({ text: 'x' }), PROMPT_MS), 'echo: x');
  });
});

test('10 000 tools: all projected, the last one callable', async () => {
  await withServer('tools-10000', { timeoutMs: 20_000 }, async ({ tools }) => {
    const mine = Object.keys(tools).filter((n) => n.startsWith('h__'));
    assert.equal(mine.length, 10_000);
    assert.equal(await assertAnswers(() => tools.h__t9999.execute({}), PROMPT_MS), 'called t9999');
  });
});

test('a 1 MiB description: that tool is left out with a diagnostic (over 64 KiB), its neighbours unharmed', async () => {
  await withServer('huge-description', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools, diagnostics }) => {
    assert.equal(tools.h__verbose, undefined, 'a description that size would flood any prompt');
    assert.ok(diagnostics.some((d) => d.code === 'tool-rejected' && d.tool === 'verbose' && /description/.test(d.message)));
    await stillServes(tools);
  });
});

test('one tool with a schema nested 2 000 deep is rejected alone; the good tools stay', async () => {
  await withServer('deep-schema', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools, diagnostics }) => {
    assert.deepEqual(diagnostics.filter((d) => d.code === 'server-degraded'), []);
    assert.equal(tools.h__bomb, undefined);
    assert.ok(diagnostics.some((d) => d.code === 'tool-rejected' && d.tool === 'bomb'), JSON.stringify(diagnostics).slice(0, 500));
    await stillServes(tools);
  });
});

test('tools with a null or numeric name, a string schema or no object at all are rejected alone', async () => {
  await withServer('null-name', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools, diagnostics }) => {
    assert.deepEqual(diagnostics.filter((d) => d.code === 'server-degraded'), []);
    assert.ok(tools.h__echo && tools.h__pid, 'the well-formed tools are kept');
    assert.ok(diagnostics.filter((d) => d.code === 'tool-rejected').length >= 1);
    await stillServes(tools);
  });
});

test('a schema with $ref cycles is projected and described without looping, at every disclosure tier', async () => {
  for (const disclosure of [undefined, { budget: 1 }]) {
    await withServer('ref-cycle', { timeoutMs: LONG_TIMEOUT_MS, disclosure }, async ({ tools }) => {
      const cyclic = tools.h__cyclic;
      assert.ok(cyclic, 'the cyclic tool is listed');
      JSON.stringify(cyclic.inputSchema);
      if (tools.mcp__describe_tool) {
        const described = await assertAnswers(() => tools.mcp__describe_tool.execute({ name: 'h__cyclic' }), PROMPT_MS);
        assert.match(described, /\$defs/);
      }
      assert.equal(await assertAnswers(() => cyclic.execute({ a: {} }), PROMPT_MS), 'called cyclic');
    });
  }
});

test('names that collide after sanitizing (even with the client\'s own rewrites) stay distinct, safe and correctly routed', async () => {
  await withServer('colliding-names', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }, server) => {
    const colliding = ['a.b', 'a,b', 'a b', 'a_b', 'a/b', 'á_b', 'a.b ', `${'n'.repeat(80)}.1`, `${'n'.repeat(80)}.2`, 'x.y'];
    const mine = Object.values(tools).filter((t) => t.server === 'h');
    const remotes = new Set(mine.map((t) => t.remoteName));
    for (const name of colliding) assert.ok(remotes.has(name), `${name} is projected`);
    // Two names made to equal the rewrites of x.y, plus the 22 ordinary tools, plus the list above.
    assert.equal(mine.length, 22 + colliding.length + 2, `every published tool has its own entry: ${[...remotes].filter((r) => r.startsWith('x'))}`);
    assert.equal(new Set(mine.map((t) => t.name)).size, mine.length);
    for (const tool of mine) {
      assert.match(tool.name, PROVIDER_SAFE);
      if (colliding.includes(tool.remoteName) || tool.remoteName.startsWith('x_y_')) {
        assert.equal(await assertAnswers(() => tool.execute({}), PROMPT_MS).catch((e) => assert.fail(`${tool.name} (${tool.remoteName}): ${e.message}`)), `called ${tool.remoteName}`, `${tool.name} routes to ${tool.remoteName}`);
      }
    }
    assert.ok(server.pids().length > 0);
  });
});

test('a flood of 1 000 list_changed notifications is coalesced into a couple of re-lists', async () => {
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }, server) => {
    const listsBefore = server.methods().filter((m) => m === 'tools/list').length;
    assert.equal(await assertAnswers(() => tools.h__list_changed_flood.execute({ count: 1000 }), 5000), 'announced 1000 changes');
    // Quiet for a while: every re-list the flood caused has been sent.
    let last = -1;
    await until(async () => {
      const now = server.methods().length;
      const settled = now === last;
      last = now;
      await new Promise((r) => setTimeout(r, 200));
      return settled;
    }, { timeoutMs: 10_000 });
    const relists = server.methods().filter((m) => m === 'tools/list').length - listsBefore;
    assert.ok(relists >= 1, 'the change was picked up');
    assert.ok(relists <= 3, `${relists} tools/list requests for one burst of 1 000 notifications`);
    await stillServes(tools);
  });
});

// connectMcpServer's announcements (`tools-announced`, onToolsChanged) are coalesced as the engine's re-listings
// are: once per re-listing cycle, not one per notification (an unbounded threadsafe-function queue, and one
// tools/list per notification from a listener that re-lists).
test('a flood of list_changed reaches onToolsChanged coalesced', async (t) => {
  const client = await connectMcpServer({ name: 'f', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'announce-flood-server.mjs')] });
  t.after(() => client.close());
  let announced = 0;
  client.onToolsChanged(() => void announced++);
  const settle = () => new Promise((resolve) => setTimeout(resolve, 2000));
  await client.callTool({ name: 'flood', arguments: {} });
  await settle();
  assert.ok(announced >= 1 && announced <= 100, `200 000 notifications, ${announced} listener calls`);
  // Coalescing holds back repeats until the engine's next re-listing, not for good: a later flood is heard.
  const first = announced;
  await client.callTool({ name: 'flood', arguments: {} });
  await settle();
  assert.ok(announced > first && announced <= first + 100, `a second flood: ${announced - first} listener calls`);
});

test('a flood of 10 000 server-to-client pings is answered in bounded memory; calls go on', async () => {
  const before = rss();
  await withServer('', { timeoutMs: LONG_TIMEOUT_MS }, async ({ tools }) => {
    const answered = Number(await assertAnswers(() => tools.h__ping_flood.execute({ count: 10_000, waitMs: 10_000 }), 15_000));
    assert.equal(answered, 10_000, 'every ping gets a response (a result or a refusal)');
    assertRssBounded(before, 64 * MIB, '10 000 pings');
    await stillServes(tools);
  });
});
