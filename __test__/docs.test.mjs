// The docs hold together: the README stays a landing page, every guide in docs/ is listed and linked, every
// relative link and #anchor points at something, the test files the docs name exist and so do the tests SECURITY.md
// cites by title, the Installing guide shows the install commands the install test runs from the README, and dated
// run tables stay in bench/results.md.
// (The framework recipes in docs/frameworks.md are checked against examples/recipes/ in adapters-recipes.test.mjs.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { here } from './helpers.mjs';

const root = join(here, '..');
const read = (path) => readFileSync(join(root, path), 'utf8');
/** The README's first screen: what a reader sees before scrolling. */
const FIRST_SCREEN_LINES = 40;
const README_MAX_LINES = 300;

const guides = readdirSync(join(root, 'docs'))
  .filter((file) => file.endsWith('.md') && file !== 'README.md')
  .sort();
const documents = ['README.md', 'SECURITY.md', ...['docs', 'bench'].flatMap((dir) => readdirSync(join(root, dir)).filter((f) => f.endsWith('.md')).map((f) => `${dir}/${f}`))];

/** A document's text without its fenced code blocks (a `# comment` in a shell block is no heading, a URL there no link). */
const prose = (text) => text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');

/** The relative links of a Markdown text: `[text](target)`, web and mail addresses left out. */
const linksIn = (text) => [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));

/** The anchors GitHub gives a document's headings (lower case, punctuation dropped, spaces to dashes, repeats numbered). */
function anchorsOf(text) {
  const seen = new Map();
  const anchors = new Set();
  for (const [, heading] of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const slug = heading.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const repeat = seen.get(slug) ?? 0;
    seen.set(slug, repeat + 1);
    anchors.add(repeat ? `${slug}-${repeat}` : slug);
  }
  return anchors;
}

test('the README is a landing page: at most 300 lines, with npm test and npm run demo on its first screen', () => {
  const lines = read('README.md').split('\n');
  assert.ok(lines.length <= README_MAX_LINES, `README.md has ${lines.length} lines`);
  const firstScreen = lines.slice(0, FIRST_SCREEN_LINES).join('\n');
  assert.match(firstScreen, /^npm test\b/m);
  assert.match(firstScreen, /^npm run demo\b/m);
  for (const stage of ['cargo fmt --check', 'clippy', 'oxlint']) assert.ok(firstScreen.includes(stage), `the README says npm test runs ${stage}`);
});

test('every guide in docs/ is listed in docs/README.md, and every guide but the designs is linked from the README', () => {
  const index = new Set(linksIn(read('docs/README.md')).map((target) => target.split('#')[0]));
  const readme = new Set(linksIn(read('README.md')).map((target) => target.split('#')[0]));
  assert.ok(readme.has('docs/README.md'), 'the README links the guides index');
  // Design notes (docs/README.md's "Designs:" line) are for contributors: the index lists them, the README need not.
  const designs = linksIn(read('docs/README.md').match(/^Designs:.*$/m)?.[0] ?? '');
  for (const guide of guides) {
    assert.ok(index.has(guide), `docs/README.md lists docs/${guide}`);
    if (!designs.includes(guide)) assert.ok(readme.has(`docs/${guide}`), `README.md links docs/${guide}`);
  }
});

test('every relative link and #anchor in the README, SECURITY.md, docs/ and bench/ points at something', () => {
  const broken = [];
  for (const document of documents) {
    for (const target of linksIn(read(document))) {
      const [path, anchor] = target.split('#');
      const file = path ? join(dirname(join(root, document)), path) : join(root, document);
      if (!existsSync(file)) broken.push(`${document}: ${target} (no such file)`);
      else if (anchor && file.endsWith('.md') && !anchorsOf(readFileSync(file, 'utf8')).has(anchor)) {
        broken.push(`${document}: ${target} (no heading ${relative(root, file)}#${anchor})`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test('every test file the README, SECURITY.md and the guides name exists under __test__/', () => {
  const missing = [];
  for (const document of documents.filter((d) => !d.startsWith('bench/'))) {
    for (const [, name] of read(document).matchAll(/`(?:__test__\/)?((?:[\w-]+\/)?[\w-]+\.test\.mjs)`/g)) {
      if (!existsSync(join(here, name))) missing.push(`${document}: ${name}`);
    }
  }
  assert.deepEqual(missing, []);
});

/** The titles of a JS test file's tests: the first argument of each `test(…)`, quoted or a template. */
function testTitles(file) {
  const text = readFileSync(join(here, file), 'utf8');
  return [...text.matchAll(/\btest\(\s*(['"`])((?:\\.|(?!\1)[^\\])*)\1/g)].map((m) => m[2].replace(/\\(.)/g, '$1'));
}

/**
 * Whether a cited name (`*a test's title…*`, its parts cut with `…`) names this title: every part is in one of the
 * title's literal pieces, or holds a whole long piece of it (a template's `${…}` stands for what the citation spells out).
 */
function cites(citation, title) {
  const pieces = title.split(/\$\{[^}]*\}/).map((p) => p.trim());
  const parts = citation.replace(/\\(.)/g, '$1').split('…').map((p) => p.trim()).filter(Boolean);
  return parts.every((part) => pieces.some((piece) => piece.includes(part) || (piece.length >= 12 && part.includes(piece))));
}

test('every test SECURITY.md cites by title is a test of the file it names', () => {
  const titles = new Map();
  const titlesOf = (file) => titles.get(file) ?? titles.set(file, testTitles(file)).get(file);
  const allFiles = ['.', 'hostile'].flatMap((dir) => readdirSync(join(here, dir)).filter((f) => f.endsWith('.test.mjs')).map((f) => (dir === '.' ? f : `${dir}/${f}`)));
  const unknown = [];
  for (const row of read('SECURITY.md').split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| Guarantee'))) {
    const proof = row.split('|').at(-2);
    // A cited title belongs to the last test file named before it in the cell; after a Rust file, it is a Rust test.
    let file;
    for (const [, named, rust, citation] of proof.matchAll(/`(?:__test__\/)?((?:[\w-]+\/)?[\w-]+\.test\.mjs)`|`[^`]*(\.rs)`|\*([^*]+)\*/g)) {
      if (named || rust) {
        file = named ?? null;
        continue;
      }
      if (file === null) continue;
      const files = file === undefined ? allFiles : [file];
      if (!files.some((f) => titlesOf(f).some((title) => cites(citation, title)))) unknown.push(`${file ?? '(any file)'} › ${citation}`);
    }
  }
  assert.deepEqual(unknown, []);
});

test('the Installing guide shows the install commands the install test runs from the README, as written', () => {
  /** The first shell block after a heading. */
  const block = (text, heading) => {
    const start = text.indexOf(`\n${heading}\n`);
    assert.ok(start >= 0, `${heading} is there`);
    return text.slice(start).match(/```sh\n([\s\S]*?)```/)[1];
  };
  assert.equal(block(read('docs/installing.md'), '## From a checkout (until it is on the registry)'), block(read('README.md'), '## Install'));
});

test('dated run tables and commit ids live in bench/results.md, not in the README or the guides', () => {
  const eras = /^(2024-11-05|2025-03-26|2025-06-18|2025-11-25|2026-07-28)$/;
  const found = [];
  for (const document of ['README.md', ...guides.map((g) => `docs/${g}`)]) {
    for (const line of prose(read(document)).split('\n')) {
      const dates = (line.match(/\b\d{4}-\d{2}-\d{2}\b/g) ?? []).filter((date) => !eras.test(date));
      if (line.startsWith('|') && dates.length) found.push(`${document}: a dated table row: ${line.slice(0, 120)}`);
      const commits = (line.match(/\b[0-9a-f]{7,40}\b/g) ?? []).filter((word) => /[a-f]/.test(word) && /\d/.test(word));
      if (commits.length) found.push(`${document}: commit ${commits.join(', ')}: ${line.slice(0, 120)}`);
    }
  }
  assert.deepEqual(found, []);
});
