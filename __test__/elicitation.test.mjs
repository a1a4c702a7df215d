// Elicitation against a real MCP server (the official SDK's, in fixtures/elicitation-server.mjs) whose
// tools send `elicitation/create` and return what the client answered: the capability, SEP-1034
// defaults, the three actions, answers checked against the schema, URL mode, bounds, and close(); and the
// host's open questions, withdrawn in whatever order the engine's two callback queues deliver.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { mcpTools } from '../dist/index.js';
import { OpenQuestions, MAX_REMEMBERED_QUESTIONS } from '../dist/questions.js';
import { here, until } from './helpers.mjs';
import { startHttp } from './fixtures/elicitation-server.mjs';

const SERVER = { name: 'srv', type: 'stdio', command: process.execPath, args: [join(here, 'fixtures', 'elicitation-server.mjs')] };

/** The `elicitation-sep1034-client-defaults` conformance scenario's request. */
const SEP1034 = {
  message: 'Test client default value handling - please accept with defaults',
  requestedSchema: {
    type: 'object',
    properties: {
      name: { type: 'string', description: 'User name', default: 'John Doe' },
      age: { type: 'integer', description: 'User age', default: 30 },
      score: { type: 'number', description: 'User score', default: 95.5 },
      status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
      verified: { type: 'boolean', description: 'Verification status', default: true },
    },
    required: [],
  },
};

const URL_REQUEST = { mode: 'url', message: 'Connect your account', url: 'https://example.com/connect?e=1', elicitationId: 'e-1' };

async function call(toolset, tool, args = {}) {
  const result = await toolset.tools[`srv__${tool}`].execute(args);
  assert.equal(result.isError, undefined, result.content[0].text);
  return JSON.parse(result.content[0].text);
}

async function withToolset(opts, body, server = SERVER) {
  const toolset = await mcpTools([server], opts);
  try {
    return await body(toolset);
  } finally {
    await toolset.close();
  }
}

test('without onElicitation no capability is declared and a request is method-not-found', async () => {
  await withToolset({}, async (toolset) => {
    assert.deepEqual(await call(toolset, 'capabilities'), {});
    const { error } = await call(toolset, 'ask', { params: SEP1034 });
    assert.equal(error.code, -32601);
  });
});

test('with onElicitation the form capability is declared, url only when configured', async () => {
  const onElicitation = () => ({ action: 'cancel' });
  await withToolset({ onElicitation }, async (toolset) => {
    assert.deepEqual(await call(toolset, 'capabilities'), { elicitation: { form: {} } });
    const { error } = await call(toolset, 'ask', { params: URL_REQUEST });
    assert.equal(error.code, -32602, 'url mode was not declared');
  });
  await withToolset({ onElicitation, elicitationModes: ['form', 'url'] }, async (toolset) => {
    assert.deepEqual(await call(toolset, 'capabilities'), { elicitation: { form: {}, url: {} } });
  });
});

test('SEP-1034: defaults fill every primitive field the host left out; the host sees the request and who asks', async () => {
  const seen = [];
  const session = { user: 'u1' };
  const onElicitation = (request, ctx) => {
    seen.push({ request, ctx });
    return { action: 'accept', content: {} };
  };
  await withToolset({ onElicitation, session }, async (toolset) => {
    const { result } = await call(toolset, 'ask', { params: SEP1034 });
    assert.deepEqual(result, {
      action: 'accept',
      content: { name: 'John Doe', age: 30, score: 95.5, status: 'active', verified: true },
    });
  });
  assert.equal(seen.length, 1);
  assert.deepEqual(seen[0].request, { mode: 'form', ...SEP1034 });
  assert.equal(seen[0].ctx.server, 'srv');
  assert.equal(seen[0].ctx.session, session);
});

test('what the host gave is kept; titled and multi-select enums take their defaults too', async () => {
  const params = {
    message: 'Pick',
    requestedSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', default: 'John Doe' },
        color: { type: 'string', oneOf: [{ const: '#f00', title: 'Red' }, { const: '#0f0', title: 'Green' }], default: '#f00' },
        tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, default: ['a', 'c'] },
      },
      required: ['name'],
    },
  };
  await withToolset({ onElicitation: () => ({ action: 'accept', content: { name: 'Ada' } }) }, async (toolset) => {
    const { result } = await call(toolset, 'ask', { params });
    assert.deepEqual(result, { action: 'accept', content: { name: 'Ada', color: '#f00', tags: ['a', 'c'] } });
  });
});

test('decline and cancel pass through without content', async () => {
  for (const action of ['decline', 'cancel']) {
    await withToolset({ onElicitation: async () => ({ action, content: { name: 'leak' } }) }, async (toolset) => {
      assert.deepEqual(await call(toolset, 'ask', { params: SEP1034 }), { result: { action } });
    });
  }
});

test('a throwing or rejecting callback, or a malformed answer, declines', async () => {
  const hosts = [
    () => {
      throw new Error('host broke');
    },
    () => Promise.reject(new Error('host broke')),
    () => undefined,
    () => ({ action: 'yes' }),
    () => ({ action: 'accept', content: { age: 1n } }),
  ];
  for (const onElicitation of hosts) {
    await withToolset({ onElicitation }, async (toolset) => {
      assert.deepEqual(await call(toolset, 'ask', { params: SEP1034 }), { result: { action: 'decline' } }, String(onElicitation));
    });
  }
});

test('an answer that does not match the schema is never sent as accept', async () => {
  const answers = [
    { age: 'thirty' },
    { age: 30.5 },
    { status: 'retired' },
    { verified: 'yes' },
    { name: 42 },
    { password: 'not asked for' },
  ];
  for (const content of answers) {
    await withToolset({ onElicitation: () => ({ action: 'accept', content }) }, async (toolset) => {
      assert.deepEqual(await call(toolset, 'ask', { params: SEP1034 }), { result: { action: 'decline' } }, JSON.stringify(content));
    });
  }
  // A required field the host left out (and no default) declines too.
  const params = { message: 'Name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } };
  await withToolset({ onElicitation: () => ({ action: 'accept', content: {} }) }, async (toolset) => {
    assert.deepEqual(await call(toolset, 'ask', { params }), { result: { action: 'decline' } });
  });
});

test('url mode, when declared: the host gets the URL, parsed and normalized, and its accept carries no content', async () => {
  const seen = [];
  const onElicitation = (request) => {
    seen.push(request);
    return { action: 'accept', content: { secret: 'x' } };
  };
  await withToolset({ onElicitation, elicitationModes: ['url'] }, async (toolset) => {
    assert.deepEqual(await call(toolset, 'capabilities'), { elicitation: { url: {} } });
    assert.deepEqual(await call(toolset, 'ask', { params: URL_REQUEST }), { result: { action: 'accept' } });
    const { error } = await call(toolset, 'ask', { params: SEP1034 });
    assert.equal(error.code, -32602, 'form mode was not declared');
    const { error: scheme } = await call(toolset, 'ask', { params: { ...URL_REQUEST, url: 'javascript:alert(1)' } });
    assert.equal(scheme.code, -32602);
    // The URL as parsed, not as sent: escapes and controls percent-encoded, the host lowercased.
    assert.deepEqual(await call(toolset, 'ask', { params: { ...URL_REQUEST, url: ' HTTPS://Example.COM:443/a\u001b]52;c;aGk=\u0007\u009b2J?q=\u202ex\n' } }), { result: { action: 'accept' } });
    // A URL that reads as one host and opens another (userinfo) is refused, as invalid params.
    for (const url of ['https://accounts.google.com@evil.example/', 'https://user:pw@example.com/']) {
      const { error: userinfo } = await call(toolset, 'ask', { params: { ...URL_REQUEST, url } });
      assert.equal(userinfo.code, -32602, url);
      assert.match(userinfo.message, /must not carry a user name or password/);
    }
    // The message a person is shown: no terminal escapes, bidi overrides or invisible characters; lines kept.
    assert.deepEqual(await call(toolset, 'ask', { params: { ...URL_REQUEST, message: 'Log in\u001b[2J\u202ex\u200b\nnow\u0007' } }), { result: { action: 'accept' } });
  });
  assert.deepEqual(seen, [URL_REQUEST, { ...URL_REQUEST, url: 'https://example.com/a%1B]52;c;aGk=%07%C2%9B2J?q=%E2%80%AEx' }, { ...URL_REQUEST, message: 'Log in [2J x \nnow ' }]);
});

test('a flood of elicitations stays bounded: the excess is refused at once, the host sees at most 4', async () => {
  const open = [];
  const onElicitation = () => new Promise((resolve) => open.push(resolve));
  await withToolset({ onElicitation }, async (toolset) => {
    const flooding = call(toolset, 'flood', { params: SEP1034, count: 20 });
    await until(() => open.length === 4);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(open.length, 4, 'no more than 4 reach the host');
    for (const answer of open) answer({ action: 'accept', content: {} });
    const outcomes = await flooding;
    assert.equal(outcomes.filter((o) => o.result?.action === 'accept').length, 4);
    const refused = outcomes.filter((o) => o.error);
    assert.equal(refused.length, 16);
    assert.ok(refused.every((o) => o.error.code === -32000), JSON.stringify(refused[0]));
    // The slots are free again.
    open.length = 0;
    const again = call(toolset, 'ask', { params: SEP1034 });
    await until(() => open.length === 1);
    open[0]({ action: 'decline' });
    assert.deepEqual(await again, { result: { action: 'decline' } });
  });
});

test("a server's cancellation stops the answer, not the prompt count: the slot is freed when the host settles", async () => {
  const settle = [];
  const signals = [];
  let asked = 0;
  const onElicitation = (_request, { signal }) => {
    asked++;
    signals.push(signal);
    return new Promise((resolve) => settle.push(resolve));
  };
  await withToolset({ onElicitation }, async (toolset) => {
    const { error } = await call(toolset, 'ask_then_cancel', { params: SEP1034, afterMs: 100 });
    assert.match(error.message, /changed my mind|abort/i);
    // The host's signal for the withdrawn question aborts, so it can stop asking the person.
    await until(() => signals[0].aborted);
    // Cancelling made no room: of five more, only three reach the host (a server can't pile prompts up
    // by asking and cancelling).
    const flooding = call(toolset, 'flood', { params: SEP1034, count: 5 }).then(() => null, (error) => error);
    await until(() => asked === 4);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(asked, 4);
    // The host settles the cancelled prompt (the server gets no answer for it): its slot is free again as
    // soon as the engine hears of it, and a prompt asked for after that reaches the host.
    settle[0]({ action: 'decline' });
    const more = [];
    await until(
      () => {
        // Never more than one over the four: every other slot is still held.
        if (asked < 5) more.push(call(toolset, 'ask', { params: SEP1034 }).then(() => null, (error) => error));
        return asked === 5;
      },
      { stepMs: 50 },
    );
    await toolset.close();
    await Promise.all([flooding, ...more]);
  });
});

test('close() while an elicitation is pending settles the call and resolves', async () => {
  let asked = false;
  const toolset = await mcpTools([SERVER], {
    onElicitation: () => {
      asked = true;
      return new Promise(() => {});
    },
  });
  const pending = toolset.tools.srv__ask.execute({ params: SEP1034 }).then(() => null, (error) => error);
  await until(() => asked);
  const started = Date.now();
  await toolset.close();
  assert.equal((await pending)?.code, 'mcp_connection_closed');
  assert.ok(Date.now() - started < 5000, 'close does not wait for the host');
});

test('a tool call waiting on the person does not time out while the elicitation is open', async () => {
  let answer;
  const onElicitation = () => new Promise((resolve) => (answer = resolve));
  // Long enough for the server to start, short against the wait below.
  await withToolset({ onElicitation, timeoutMs: 1500, connectTimeoutMs: 30_000 }, async (toolset) => {
    const calling = call(toolset, 'ask', { params: SEP1034 });
    await until(() => answer);
    await new Promise((r) => setTimeout(r, 3000));
    answer({ action: 'accept', content: { name: 'Late' } });
    const { result } = await calling;
    assert.equal(result.content.name, 'Late');
  });
});

test('streamable HTTP: the request arrives on the call\'s response stream and the answer is posted back', async (t) => {
  const http = await startHttp();
  t.after(http.close);
  const onElicitation = () => ({ action: 'accept', content: { name: 'Ada' } });
  await withToolset({ onElicitation }, async (toolset) => {
    assert.deepEqual(await call(toolset, 'capabilities'), { elicitation: { form: {} } });
    const { result } = await call(toolset, 'ask', { params: SEP1034 });
    assert.deepEqual(result.content, { name: 'Ada', age: 30, score: 95.5, status: 'active', verified: true });
  }, { name: 'srv', type: 'streamable-http', url: http.url });
});

test('streamable HTTP: a tool call made at once waits for the GET stream the server asks on (a question sent before it opened is dropped by the SDK)', async (t) => {
  const http = await startHttp({ getDelayMs: 600 });
  t.after(http.close);
  const onElicitation = () => ({ action: 'accept', content: { name: 'Ada' } });
  // The call goes out as soon as the tool map is there, while the server still holds the GET back.
  await withToolset({ onElicitation, timeoutMs: 5_000 }, async (toolset) => {
    const { result } = await call(toolset, 'ask', { params: SEP1034 });
    assert.equal(result.content.name, 'Ada');
  }, { name: 'srv', type: 'streamable-http', url: http.url });
});

test('streamable HTTP: a server that holds its GET stream back delays only the calls of the first 2 s after the handshake', async (t) => {
  const http = await startHttp({ getDelayMs: 60_000 });
  t.after(http.close);
  // timeoutMs long enough that the held GET is still pending (its deadline is timeoutMs + 1 s) for the whole test.
  await withToolset({ timeoutMs: 20_000 }, async (toolset) => {
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    // Past the bound (counted from the handshake), a call goes at once: it used to wait the whole 2 s each time.
    for (let i = 0; i < 3; i++) {
      const result = await toolset.tools.srv__capabilities.execute({}, { signal: AbortSignal.timeout(1_900) });
      assert.deepEqual(JSON.parse(result.content[0].text), {});
    }
  }, { name: 'srv', type: 'streamable-http', url: http.url });
});

test('streamable HTTP: a response stream quiet while the person answers is not timed out', async (t) => {
  const http = await startHttp();
  t.after(http.close);
  // Longer than timeoutMs plus the HTTP deadline's slack: the stream stays quiet all that time. timeoutMs
  // leaves a loaded machine's server time to send its question (1 s did not, once: a CI flake).
  const onElicitation = () => new Promise((resolve) => setTimeout(() => resolve({ action: 'accept', content: {} }), 6500));
  await withToolset({ onElicitation, timeoutMs: 2500, connectTimeoutMs: 30_000 }, async (toolset) => {
    const { result } = await call(toolset, 'ask', { params: SEP1034 });
    assert.equal(result.action, 'accept');
  }, { name: 'srv', type: 'streamable-http', url: http.url });
});

test('options: elicitationModes needs onElicitation and valid modes', async () => {
  await assert.rejects(mcpTools([], { elicitationModes: ['form'] }), { code: 'mcp_config_invalid', message: /needs options.onElicitation/ });
  await assert.rejects(mcpTools([], { onElicitation: () => ({ action: 'cancel' }), elicitationModes: ['sms'] }), { code: 'mcp_config_invalid' });
  await assert.rejects(mcpTools([], { onElicitation: 'yes' }), { code: 'mcp_config_invalid', message: /onElicitation must be a function/ });
});

// The open questions of a toolset (lib/questions.ts): the engine's withdrawals and questions reach JavaScript
// through two callback queues, so every arrival order must end with the right signals aborted.
test('a withdrawal aborts its open question, and only it', () => {
  const questions = new OpenQuestions();
  const a = questions.ask(1);
  const b = questions.ask(2);
  questions.withdraw(1);
  assert.equal(a.signal.aborted, true);
  assert.equal(b.signal.aborted, false);
});

test('a withdrawal that arrives before its question aborts it when it is asked', () => {
  const questions = new OpenQuestions();
  questions.withdraw(5);
  assert.equal(questions.ask(5).signal.aborted, true);
});

test('a later question arriving first does not make an earlier question\'s withdrawal look stale', () => {
  // Ask ids are process-wide: this toolset may see 9 before 4 (and never 5–8, which belong to others).
  const questions = new OpenQuestions();
  const later = questions.ask(9);
  questions.withdraw(4);
  const earlier = questions.ask(4);
  assert.equal(earlier.signal.aborted, true, 'the withdrawal of 4 was kept until 4 was asked');
  assert.equal(later.signal.aborted, false);
});

test('a withdrawal of an answered question is ignored; remembered ids stay bounded', () => {
  const questions = new OpenQuestions();
  const answered = questions.ask(3);
  answered.done();
  questions.withdraw(3);
  assert.equal(answered.signal.aborted, false);
  for (let id = 10_000; id < 10_000 + 3 * MAX_REMEMBERED_QUESTIONS; id++) questions.withdraw(id);
  const recent = 10_000 + 3 * MAX_REMEMBERED_QUESTIONS - 1;
  assert.equal(questions.ask(recent).signal.aborted, true, 'the newest early withdrawals are kept');
  assert.equal(questions.ask(10_000).signal.aborted, false, 'the oldest were let go (bounded)');
});
