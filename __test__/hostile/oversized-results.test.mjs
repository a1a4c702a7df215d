// Issue 26 item 2: an oversized result fails its call with `mcp_result_too_large` at once, whatever
// order the server writes a response's members in. The TypeScript SDK (and so the published
// @modelcontextprotocol/server-filesystem) writes `{"result":…,"jsonrpc":"2.0","id":N}`, the id last:
// the head of the dropped line names no call. Before the fix such a call waited for its whole timeout and
// failed `mcp_timeout`. On Node the stdio tests run twice: stdout read on the JS event loop, and by the
// engine (MCPFERRY_ENGINE_READER=1, as on Bun).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINE_READS, here, rerunWithEngineReader, scratchFile } from '../helpers.mjs';
import { hostileStdio, open, assertFails, assertAnswers, closeWithin, stillServes, MIB, exitWhenDone } from '../fixtures/hostile/harness.mjs';
import { startHttp, startSse } from '../fixtures/ts1-files-server.mjs';

exitWhenDone(after);

const READER = ENGINE_READS ? 'engine reader' : 'JS reader';
/** Far longer than the failure may take: a failure near it is the defect. */
const TIMEOUT_MS = 30_000;
/** How soon the oversized result must be refused. */
const PROMPT_MS = 5000;
const CLOSE_MS = 3000;
/** The runtime the stdio servers run on (Node also when the client runs on Bun, as the hostile fixture does). */
const NODE = typeof Bun === 'undefined' ? process.execPath : 'node';
const TS1_FILES = join(here, 'fixtures', 'ts1-files-server.mjs');
const FILESYSTEM = join(here, '..', 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');

/** A directory holding `big.txt`, `bytes` bytes of text. */
function bigFile(bytes) {
  const dir = scratchFile('files');
  mkdirSync(dir);
  writeFileSync(join(dir, 'big.txt'), 'x'.repeat(bytes));
  return { dir, path: join(dir, 'big.txt') };
}

async function withToolset(entries, opts, body) {
  const toolset = await open(entries, { timeoutMs: TIMEOUT_MS, ...opts });
  try {
    assert.deepEqual(toolset.diagnostics.filter((d) => d.code === 'server-degraded'), []);
    await body(toolset);
  } finally {
    await closeWithin(toolset, CLOSE_MS);
  }
}

test(`[${READER}] the published server-filesystem reading a 3 MB file rejects mcp_result_too_large at once`, {
  skip: !existsSync(FILESYSTEM) && '@modelcontextprotocol/server-filesystem is not installed (a devDependency to add)',
}, async () => {
  const { dir, path } = bigFile(3 * MIB);
  await withToolset([{ name: 'fs', type: 'stdio', command: NODE, args: [FILESYSTEM, dir] }], {}, async ({ tools }) => {
    await assertFails(() => tools.fs__read_text_file.execute({ path }), ['mcp_result_too_large'], PROMPT_MS);
    const listed = await assertAnswers(() => tools.fs__list_directory.execute({ path: dir }), PROMPT_MS);
    assert.match(listed, /big\.txt/);
  });
});

for (const { title, bytes, opts } of [
  { title: 'a 3 MB file, the default 2 MiB bound', bytes: 3 * MIB, opts: {} },
  { title: 'a 200 KB file, maxResultBytes 64 KiB', bytes: 200_000, opts: { maxResultBytes: 64 * 1024 } },
]) {
  test(`[${READER}] a TypeScript-SDK server over stdio reading ${title} rejects mcp_result_too_large at once; the server keeps serving`, async () => {
    const { path } = bigFile(bytes);
    await withToolset([{ name: 'fs', type: 'stdio', command: NODE, args: [TS1_FILES] }], opts, async ({ tools }) => {
      await assertFails(() => tools.fs__read_text_file.execute({ path }), ['mcp_result_too_large'], PROMPT_MS);
      assert.equal(await assertAnswers(() => tools.fs__echo.execute({ text: 'after' }), PROMPT_MS), 'echo: after');
    });
  });
}

test(`[${READER}] an id-last oversized line with other calls in flight fails its own call only, at once`, async () => {
  const server = hostileStdio('h');
  await withToolset([server.entry], {}, async ({ tools }) => {
    const slow = [1, 2].map(() => tools.h__slow.execute({ ms: 3000 }));
    await assertFails(() => tools.h__oversized_id_last.execute({ mib: 3 }), ['mcp_result_too_large'], PROMPT_MS);
    for (const answer of await Promise.all(slow)) assert.equal(answer.content[0].text, 'slow done');
    await stillServes(tools);
  });
});

test(`[${READER}] an oversized line that names no call fails the one call in flight at once`, async () => {
  const server = hostileStdio('h');
  await withToolset([server.entry], {}, async ({ tools }) => {
    await assertFails(() => tools.h__oversized_id_buried.execute({ mib: 3 }), ['mcp_result_too_large'], PROMPT_MS);
    await stillServes(tools);
  });
});

test(`[${READER}] an oversized line that names no call, with several calls in flight, fails them all at once; the server keeps serving`, async () => {
  const server = hostileStdio('h');
  await withToolset([server.entry], {}, async ({ tools }) => {
    // Any of them may be the one it answers: none is left waiting for its timeout.
    const slow = [1, 2].map(() => assertFails(() => tools.h__slow.execute({ ms: 20_000 }), ['mcp_result_too_large'], PROMPT_MS));
    await new Promise((r) => setTimeout(r, 200)); // the slow calls are sent first
    await assertFails(() => tools.h__oversized_id_buried.execute({ mib: 3 }), ['mcp_result_too_large'], PROMPT_MS);
    await Promise.all(slow);
    await stillServes(tools);
  });
});

rerunWithEngineReader(test, import.meta.url);

// HTTP: the same SDK's responses as a JSON body, as an SSE event on the POST's stream, and as an event on
// the legacy transport's one stream (which carries every answer: the event is skipped, not the stream).
if (!process.env.MCPFERRY_ENGINE_READER) {
  for (const { title, start, type } of [
    { title: 'Streamable HTTP, a JSON body', start: () => startHttp({ json: true }), type: 'streamable-http' },
    { title: 'Streamable HTTP, an SSE event', start: () => startHttp({ json: false }), type: 'streamable-http' },
    { title: 'legacy HTTP+SSE, an event on the shared stream', start: startSse, type: 'sse' },
  ]) {
    test(`${title}: a 3 MB result rejects mcp_result_too_large at once; the server keeps serving`, async () => {
      const server = await start();
      try {
        const { path } = bigFile(3 * MIB);
        await withToolset([{ name: 'fs', type, url: server.url }], {}, async ({ tools }) => {
          const slow = tools.fs__slow.execute({ ms: 1500 });
          await assertFails(() => tools.fs__read_text_file.execute({ path }), ['mcp_result_too_large'], PROMPT_MS);
          assert.equal((await slow).content[0].text, 'slow done');
          assert.equal(await assertAnswers(() => tools.fs__echo.execute({ text: 'after' }), PROMPT_MS), 'echo: after');
        });
      } finally {
        await server.close();
      }
    });
  }
}
