// Skills (SEP-2640, issue 28) against a real server: fixtures/skills-server.mjs, built on the official
// TypeScript SDK 2.x's Skills extension, in 2026-07-28 and 2025-11-25 over stdio and over Streamable
// HTTP. What the extension asks of a host: listing reads no file; SKILL.md is read when a skill is
// loaded and verified (size, SHA-256, frontmatter) against its entry; a file is read only if the loaded
// entry lists it, only from the skill's own server, and verified too; a skill is the pair (server, URI).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import * as ai from 'ai';
import * as aiTest from 'ai/test';
import { connectMcpServer, mcpTools, composeMcpSystemPrompt, McpSkillVerificationFailedError, McpSkillInvalidError, McpNotSupportedError } from '../dist/index.js';
import { aiSdkTools } from '../entry/ai.mjs';
import { call, say, scriptedModel, toolOutput } from './adapters-fixture.mjs';
import { FIXTURE, here, startHttpFixture } from './helpers.mjs';
import { FORMS, LOGO, PDF_SKILL } from './fixtures/skills-server.mjs';

const SKILLS = join(here, 'fixtures', 'skills-server.mjs');
const PDF = 'skill://pdf-processing/SKILL.md';
const FORMS_URI = 'skill://pdf-processing/references/FORMS.md';
const options = { timeoutMs: 10_000, connectTimeoutMs: 30_000 };
const stdio = (name, mode = 'stdio', tamper = '') => ({ name, type: 'stdio', command: process.execPath, args: [SKILLS, mode, tamper] });

/** fixtures/skills-server.mjs over Streamable HTTP: `{ url, stop }`. */
const startSkillsHttp = (tamper = '') => startHttpFixture(SKILLS, ['http', tamper]);

/** The URIs the server behind `tools` has been asked to read so far. */
async function readsOf(tools, server) {
  return JSON.parse((await tools[`${server}__reads`].execute({})).content[0].text);
}

const modes = [
  ['stdio, 2026-07-28', async () => ({ entry: stdio('sk'), stop() {} }), '2026-07-28'],
  ['stdio, 2025-11-25', async () => ({ entry: stdio('sk', 'stdio-legacy'), stop() {} }), '2025-11-25'],
  ['Streamable HTTP', async () => {
    const server = await startSkillsHttp();
    return { entry: { name: 'sk', type: 'streamable-http', url: server.url }, stop: server.stop };
  }],
];

for (const [label, start, era] of modes) {
  test(`${label}: skills are listed without a file read, loaded verified, and their listed files read verified`, async () => {
    const { entry, stop } = await start();
    const diagnostics = [];
    const toolset = await mcpTools([entry], { ...options, onDiagnostic: (d) => diagnostics.push(d) });
    try {
      if (era) assert.equal(toolset.servers()[0].protocolVersion, era);
      const listed = await toolset.listSkills();
      assert.deepEqual(listed.map((s) => [s.server, s.uri, s.name]), [
        ['sk', PDF, 'pdf-processing'],
        ['sk', 'skill://acme/billing/refunds/SKILL.md', 'refunds'],
      ], 'the "dynamic" skill is not offered: it cannot be verified');
      const pdf = listed[0];
      assert.equal(pdf.description, 'Extract, fill, and assemble PDF documents');
      assert.deepEqual(pdf.frontmatter.metadata, { version: '2.1' });
      assert.deepEqual(pdf.files.map((f) => f.path), ['SKILL.md', 'references/FORMS.md', 'assets/logo.bin']);
      assert.equal(pdf.files[1].digest, `sha256:${createHash('sha256').update(FORMS).digest('hex')}`);
      assert.equal(pdf.files[1].size, Buffer.byteLength(FORMS));
      const skipped = diagnostics.find((d) => d.code === 'listing-entries-skipped' && d.list === 'skills');
      assert.equal(skipped?.skipped, 1, 'the dynamic entry is reported as left out');
      assert.deepEqual(await readsOf(toolset.tools, 'sk'), [], 'listing read no file');

      const loaded = await toolset.loadSkill('sk', PDF);
      assert.equal(loaded.server, 'sk');
      assert.equal(loaded.instructions, PDF_SKILL);
      assert.equal(loaded.name, 'pdf-processing');
      assert.deepEqual(await readsOf(toolset.tools, 'sk'), [PDF], 'loading read SKILL.md only');

      const forms = await toolset.readSkillFile('sk', PDF, 'references/FORMS.md');
      assert.deepEqual(forms.contents, [{ uri: FORMS_URI, mimeType: 'text/markdown', text: FORMS }]);
      const logo = await toolset.readSkillFile('sk', PDF, 'skill://pdf-processing/assets/logo.bin');
      assert.ok(logo.contents[0].blob instanceof Uint8Array, 'bytes that are not UTF-8 come back as a blob');
      assert.deepEqual(Buffer.from(logo.contents[0].blob), LOGO);

      const before = await readsOf(toolset.tools, 'sk');
      await assert.rejects(toolset.readSkillFile('sk', PDF, 'references/CREDIT-NOTE.md'), McpSkillVerificationFailedError, 'an unlisted file');
      await assert.rejects(toolset.readSkillFile('sk', PDF, '../acme/billing/refunds/SKILL.md'), { code: 'mcp_invalid_arguments' });
      assert.deepEqual(await readsOf(toolset.tools, 'sk'), before, 'nothing was sent for either');
    } finally {
      await toolset.close();
      stop();
    }
  });
}

for (const tamper of ['digest', 'size', 'frontmatter']) {
  test(`a SKILL.md that fails its entry's ${tamper} is not loaded, and nothing more of the skill is read`, async () => {
    const toolset = await mcpTools([stdio('sk', 'stdio', tamper)], options);
    try {
      await toolset.listSkills();
      await assert.rejects(toolset.loadSkill('sk', PDF), (error) => {
        assert.ok(error instanceof McpSkillVerificationFailedError, error.message);
        assert.equal(error.code, 'mcp_skill_verification_failed');
        assert.doesNotMatch(error.message, /Mail the keys|extra bytes/, 'none of the content is shown');
        return true;
      });
      await assert.rejects(toolset.readSkillFile('sk', PDF, 'references/FORMS.md'), { code: 'mcp_invalid_arguments' }, 'a skill that failed is not loaded');
      assert.deepEqual(await readsOf(toolset.tools, 'sk'), [PDF]);
    } finally {
      await toolset.close();
    }
  });
}

test('a supporting file that fails its digest is refused, and the skill stays loaded for the others', async () => {
  const toolset = await mcpTools([stdio('sk', 'stdio', 'file')], options);
  try {
    await toolset.loadSkill('sk', PDF);
    await assert.rejects(toolset.readSkillFile('sk', PDF, 'references/FORMS.md'), McpSkillVerificationFailedError);
    assert.deepEqual(Buffer.from((await toolset.readSkillFile('sk', PDF, 'assets/logo.bin')).contents[0].blob), LOGO);
  } finally {
    await toolset.close();
  }
});

test('a URI listed twice is shown and loaded once, as first listed; the second is counted as skipped', async () => {
  const diagnostics = [];
  const toolset = await mcpTools([stdio('sk', 'stdio', 'duplicate')], { ...options, onDiagnostic: (d) => diagnostics.push(d) });
  try {
    const listed = await toolset.listSkills();
    assert.deepEqual(listed.filter((s) => s.uri === PDF).map((s) => s.description), ['Extract, fill, and assemble PDF documents']);
    assert.equal(diagnostics.find((d) => d.code === 'listing-entries-skipped')?.skipped, 2, 'the dynamic entry and the repeated one');
    assert.equal((await toolset.loadSkill('sk', PDF)).description, 'Extract, fill, and assemble PDF documents');
  } finally {
    await toolset.close();
  }
});

test('a skill never listed is loaded from skills/get; a dynamic one is refused; an unknown URI is not found', async () => {
  const toolset = await mcpTools([stdio('sk')], options);
  try {
    const refunds = await toolset.loadSkill('sk', 'skill://acme/billing/refunds/SKILL.md');
    assert.equal(refunds.name, 'refunds');
    assert.match(refunds.instructions, /Refund within 30 days/);
    await assert.rejects(toolset.loadSkill('sk', 'skill://reports/daily/SKILL.md'), (e) => e instanceof McpSkillInvalidError && /dynamic/.test(e.message));
    await assert.rejects(toolset.loadSkill('sk', 'skill://nope/SKILL.md'), { code: 'mcp_resource_not_found' });
    assert.deepEqual(await readsOf(toolset.tools, 'sk'), ['skill://acme/billing/refunds/SKILL.md'], 'only the verifiable skill was read');
  } finally {
    await toolset.close();
  }
});

test('a skill is its server and its URI: the same URI on two servers is two skills, and one never reads from the other', async () => {
  const toolset = await mcpTools([stdio('one'), stdio('two')], options);
  try {
    const listed = await toolset.listSkills();
    assert.deepEqual(listed.filter((s) => s.uri === PDF).map((s) => s.server), ['one', 'two']);
    await toolset.loadSkill('one', PDF);
    await assert.rejects(toolset.readSkillFile('two', PDF, 'references/FORMS.md'), { code: 'mcp_invalid_arguments' }, 'loaded from one, not from two');
    await toolset.readSkillFile('one', PDF, 'references/FORMS.md');
    assert.deepEqual(await readsOf(toolset.tools, 'two'), [], 'server two was asked nothing');
    assert.deepEqual(await readsOf(toolset.tools, 'one'), [PDF, FORMS_URI]);
  } finally {
    await toolset.close();
  }
});

test("loading and reading are put to policy.decide as kind 'skill'; a denial reads nothing", async () => {
  const asked = [];
  let allowReads = true;
  const policy = {
    decide: (request) => {
      asked.push(request);
      if (request.kind === 'tool') return { kind: 'allow' };
      if (request.kind === 'skill' && request.operation === 'load' && request.name === 'refunds') return { kind: 'deny', reason: 'not this one' };
      return allowReads || request.operation === 'load' ? { kind: 'allow' } : { kind: 'deny' };
    },
  };
  const toolset = await mcpTools([stdio('sk')], { ...options, policy, session: 'user-7' });
  try {
    await toolset.listSkills();
    await assert.rejects(toolset.loadSkill('sk', 'skill://acme/billing/refunds/SKILL.md'), { code: 'mcp_policy_denied' });
    await toolset.loadSkill('sk', PDF);
    allowReads = false;
    await assert.rejects(toolset.readSkillFile('sk', PDF, 'references/FORMS.md'), { code: 'mcp_policy_denied' });
    const skillRequests = asked.filter((r) => r.kind === 'skill');
    assert.deepEqual(skillRequests.map(({ session, ...r }) => r), [
      { kind: 'skill', operation: 'load', server: 'sk', uri: 'skill://acme/billing/refunds/SKILL.md', name: 'refunds' },
      { kind: 'skill', operation: 'load', server: 'sk', uri: PDF, name: 'pdf-processing' },
      { kind: 'skill', operation: 'read', server: 'sk', uri: PDF, name: 'pdf-processing', file: FORMS_URI },
    ]);
    assert.ok(skillRequests.every((r) => r.session === 'user-7'));
    assert.equal(skillRequests.some((r) => 'toolName' in r && r.toolName !== undefined), false, 'no toolName: allowlists by tool name refuse them');
    assert.deepEqual(await readsOf(toolset.tools, 'sk'), [PDF], 'the denied load and the denied read sent nothing');
  } finally {
    await toolset.close();
  }
});

test('a server without the Skills extension lists none and takes no skills/get', async () => {
  const toolset = await mcpTools([{ name: 'plain', type: 'stdio', command: process.execPath, args: [FIXTURE] }, stdio('sk')], options);
  try {
    assert.deepEqual([...new Set((await toolset.listSkills()).map((s) => s.server))], ['sk']);
    assert.deepEqual(await toolset.listSkills({ server: 'plain' }), []);
    await assert.rejects(toolset.loadSkill('plain', PDF), McpNotSupportedError);
    await assert.rejects(toolset.loadSkill('nobody', PDF), { code: 'mcp_server_unavailable' });
  } finally {
    await toolset.close();
  }
});

test('connectMcpServer: listSkills, loadSkill and readSkillFile without the server argument', async () => {
  const client = await connectMcpServer(stdio('sk'), options);
  try {
    const [pdf] = await client.listSkills();
    assert.equal(pdf.server, 'sk');
    assert.equal((await client.loadSkill(pdf.uri)).instructions, PDF_SKILL);
    assert.equal((await client.readSkillFile(pdf.uri, 'references/FORMS.md')).contents[0].text, FORMS);
  } finally {
    await client.close();
  }
});

test('exposeSkills: the skills are named in the system prompt by server and used through mcp__skills; off, neither is there', async () => {
  const off = await mcpTools([stdio('sk')], options);
  try {
    assert.equal('mcp__skills' in off.tools, false);
    assert.doesNotMatch(composeMcpSystemPrompt(off), /skill/i);
  } finally {
    await off.close();
  }
  const toolset = await mcpTools([stdio('sk'), { name: 'plain', type: 'stdio', command: process.execPath, args: [FIXTURE] }], { ...options, exposeSkills: true });
  try {
    const prompt = composeMcpSystemPrompt(toolset);
    assert.match(prompt, /## MCP skills/);
    const skillsPart = prompt.slice(prompt.indexOf('## MCP skills'));
    assert.match(skillsPart, /- `sk`: 2 skills/);
    assert.doesNotMatch(skillsPart, /pdf-processing|refunds|Extract, fill|daily|plain/, 'counted, not named: names and descriptions are the server\'s words');
    assert.deepEqual(await readsOf(toolset.tools, 'sk'), [], 'listing at connect read no file');
    const tool = toolset.tools.mcp__skills;
    assert.equal(tool.server, 'mcpferry');

    const listing = async (args) => JSON.parse((await tool.execute(args)).content[0].text.split('\n')[1]);
    const listed = await listing({});
    assert.deepEqual(listed.map((s) => [s.server, s.skill]), [['sk', 'refunds'], ['sk', 'pdf-processing']]);
    assert.equal(listed[1].description, 'Extract, fill, and assemble PDF documents');
    assert.deepEqual(await listing({ server: 'sk' }), listed, 'a server named lists its own');
    assert.equal((await tool.execute({ server: 'plain' })).content[0].text, 'No MCP server offers a skill.');

    const loaded = await tool.execute({ server: 'sk', skill: 'pdf-processing' });
    assert.match(loaded.content[0].text, /^Skill pdf-processing from MCP server sk \(skill:\/\/pdf-processing\/SKILL\.md\), verified/);
    assert.ok(loaded.content[0].text.includes(PDF_SKILL), 'the verified SKILL.md, whole');
    assert.deepEqual(loaded.structuredContent.files, ['references/FORMS.md', 'assets/logo.bin']);
    const forms = await tool.execute({ server: 'sk', skill: 'pdf-processing', file: 'references/FORMS.md' });
    assert.ok(forms.content[0].text.endsWith(FORMS));
    assert.match((await tool.execute({ server: 'sk', skill: 'pdf-processing', file: 'assets/logo.bin' })).content[0].text, /binary \(8 bytes, application\/octet-stream\)/);
    assert.deepEqual(await readsOf(toolset.tools, 'sk'), [PDF, FORMS_URI, 'skill://pdf-processing/assets/logo.bin']);

    await assert.rejects(tool.execute({ server: 'sk', skill: 'nope' }), (e) => e.code === 'mcp_tool_error' && /offers no skill named "nope"/.test(e.message));
    await assert.rejects(tool.execute({ server: 'plain', skill: 'pdf-processing' }), { code: 'mcp_tool_error' }, 'names resolve within the named server only');
    await assert.rejects(tool.execute({ server: 'sk', skill: 'pdf-processing', file: 'references/NOPE.md' }), { code: 'mcp_skill_verification_failed' });
    await assert.rejects(tool.execute({ skill: 'pdf-processing' }), { code: 'mcp_tool_error' }, 'a skill is named within its server');
    await assert.rejects(tool.execute({ server: 'nobody' }), { code: 'mcp_server_unavailable' });
  } finally {
    await toolset.close();
  }
});

test('exposeSkills in an AI SDK generateText loop: the model lists the skills, loads one, then reads its file', async () => {
  const toolset = await mcpTools([stdio('sk')], { ...options, exposeSkills: true });
  try {
    const steps = [
      (o) => {
        assert.match(JSON.stringify(o.prompt[0]), /MCP skills/, 'the system prompt names the skills');
        return [call('c1', 'mcp__skills', {})];
      },
      () => [call('c2', 'mcp__skills', { server: 'sk', skill: 'pdf-processing' })],
      () => [call('c3', 'mcp__skills', { server: 'sk', skill: 'pdf-processing', file: 'references/FORMS.md' })],
      () => say('form filled'),
    ];
    const { model, seen } = scriptedModel(aiTest.MockLanguageModelV3, steps);
    const result = await ai.generateText({ model, system: composeMcpSystemPrompt(toolset), tools: aiSdkTools(toolset), prompt: 'fill the PDF form', stopWhen: ai.stepCountIs(6) });
    assert.equal(result.text, 'form filled');
    const shown = (step, id) => JSON.stringify(toolOutput(seen, step, id) ?? '');
    assert.match(shown(1, 'c1'), /Extract, fill, and assemble PDF documents/);
    assert.match(shown(2, 'c2'), /Fill the form described in references\/FORMS\.md/);
    assert.match(shown(3, 'c3'), /Supporting content: the forms/);
    assert.deepEqual(await readsOf(toolset.tools, 'sk'), [PDF, FORMS_URI]);
  } finally {
    await toolset.close();
  }
});

test('exposeSkills: an aborted mcp__skills call rejects at once, even while its policy decision is pending', async () => {
  const asked = [];
  const policy = { decide: (request) => (asked.push(request), request.kind === 'skill' ? new Promise(() => {}) : { kind: 'allow' }) };
  const toolset = await mcpTools([stdio('sk')], { ...options, exposeSkills: true, policy });
  try {
    const controller = new AbortController();
    const loading = toolset.tools.mcp__skills.execute({ server: 'sk', skill: 'pdf-processing' }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    await assert.rejects(loading, { code: 'mcp_aborted' });
    assert.ok(Date.now() - started < 5_000);
    assert.deepEqual(await readsOf(toolset.tools, 'sk'), [], 'nothing was read');
    const load = asked.find((r) => r.kind === 'skill');
    assert.deepEqual([load.operation, load.origin], ['load', 'model'], 'the policy is told the model asked');
  } finally {
    await toolset.close();
  }
});
