#!/usr/bin/env node
// Module import cycles, file by file, in the engine (`src/**/*.rs`) and the package (`lib/**/*.ts`).
//
// A cycle means no file in it can be read, tested or moved without the others, so a new one fails
// `npm test` (a stage of scripts/test.mjs). The graph is of files; a cycle counts when it runs through
// more than one module (a top-level file or folder of `src/` or `lib/`): inside one folder, a mod.rs and
// its children use each other by design. Exits 1 naming each cycle (its modules and files, then one loop
// through them; `--all`: every edge across modules in it), 0 when there is none.
//
// Rust: an edge goes from a file to the file that defines the module a path names, for every `use` and
// every `crate::…`, `super::…` or `self::…` path in the file's code (comments and string literals left
// out), and for paths that start with a name a `use` bound (`use crate::transport; transport::http::x`).
// A path resolves to the deepest module that has a file (`crate::transport::http::read_body` →
// transport/http.rs). `mod x;` declarations are not edges (a parent declares its children; that is
// structure, not use), and `#[cfg(test)]` modules are left out: a test may reach anywhere.
// TypeScript: every relative `import`/`export … from`, `import type` included, and `import('…')`.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(new URL('..', import.meta.url).pathname);

function filesUnder(dir, suffix) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path, suffix));
    else if (name.endsWith(suffix) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out.sort();
}

/** Rust source with comments, string and char literals blanked (lengths kept), so paths are only code. */
function rustCode(text) {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      i = end < 0 ? text.length : end;
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < text.length && depth > 0) {
        if (text[i] === '/' && text[i + 1] === '*') {
          depth++;
          i += 2;
        }
        else if (text[i] === '*' && text[i + 1] === '/') {
          depth--;
          i += 2;
        }
        else i++;
      }
      out += ' ';
    } else if ((c === 'r' || c === 'b') && /^(br|r)#*"/.test(text.slice(i, i + 260)) && !/\w/.test(text[i - 1] ?? '')) {
      const head = text.slice(i).match(/^(br|r)(#*)"/);
      const close = `"${head[2]}`;
      const end = text.indexOf(close, i + head[0].length);
      i = end < 0 ? text.length : end + close.length;
      out += '""';
    } else if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      i++;
      out += '""';
    } else if (c === "'") {
      // A char literal ('a', '\n', '\u{1F600}'), not a lifetime ('a).
      const literal = text.slice(i).match(/^'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'/);
      if (literal) {
        i += literal[0].length;
        out += "' '";
      } else {
        out += c;
        i++;
      }
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** The index just past the block that opens at `open` (a `{`). */
function blockEnd(code, open) {
  let depth = 0;
  for (let i = open; i < code.length; i++) {
    if (code[i] === '{') depth++;
    else if (code[i] === '}' && --depth === 0) return i + 1;
  }
  return code.length;
}

/** The code without its `#[cfg(test)]` items (a test module, a test-only function or impl). */
function withoutTests(code) {
  let out = code;
  for (;;) {
    const at = out.search(/#\[cfg\(test\)\]/);
    if (at < 0) return out;
    const rest = out.slice(at);
    const brace = rest.indexOf('{');
    const semi = rest.indexOf(';');
    const end = semi >= 0 && (brace < 0 || semi < brace) ? at + semi + 1 : blockEnd(out, at + brace);
    out = out.slice(0, at) + out.slice(end);
  }
}

/** `use` trees expanded to their paths: `crate::{a::B, c::{self, D}}` → crate::a::B, crate::c, crate::c::D. */
function expandUse(tree) {
  tree = tree.replace(/\s+/g, '');
  const brace = tree.indexOf('{');
  if (brace < 0) return [tree];
  const prefix = tree.slice(0, brace);
  const inner = tree.slice(brace + 1, tree.lastIndexOf('}'));
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < inner.length; i++) {
    if (inner[i] === '{') depth++;
    else if (inner[i] === '}') depth--;
    else if (inner[i] === ',' && depth === 0) {
      parts.push(inner.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(inner.slice(start));
  return parts
    .filter(Boolean)
    .flatMap((part) => expandUse(part))
    .map((p) => (p === 'self' ? prefix.replace(/::$/, '') : prefix + p));
}

function rustGraph() {
  const src = join(root, 'src');
  const files = filesUnder(src, '.rs');
  /** Module path (segments joined by ::) → file. */
  const moduleFile = new Map();
  const fileModule = new Map();
  for (const file of files) {
    const rel = relative(src, file).replace(/\.rs$/, '');
    const segments = rel.split('/');
    if (segments.at(-1) === 'mod' || rel === 'lib') segments.pop();
    if (rel === 'main') continue;
    moduleFile.set(segments.join('::'), file);
    fileModule.set(file, segments);
  }
  /** The file of the deepest module a path of absolute segments names. */
  const fileOf = (segments) => {
    for (let n = segments.length; n >= 0; n--) {
      const file = moduleFile.get(segments.slice(0, n).join('::'));
      if (file) return file;
    }
    return undefined;
  };
  const graph = new Map();
  for (const file of files) {
    const module = fileModule.get(file);
    if (!module) continue;
    const code = withoutTests(rustCode(readFileSync(file, 'utf8')));
    /** `crate::a::b`, `super::x`, `self::y` → absolute segments, or null for another crate's path. */
    const absolute = (path) => {
      const segments = path.split('::').filter(Boolean);
      let base;
      if (segments[0] === 'crate') base = [];
      else if (segments[0] === 'self') base = [...module];
      else if (segments[0] === 'super') {
        base = [...module];
        while (segments[0] === 'super') {
          segments.shift();
          base.pop();
        }
        return [...base, ...segments];
      } else if (moduleFile.has([...module, segments[0]].join('::'))) {
        // A child module named without a prefix (2018 paths: `pub use authorizer::Authorizer` in auth/mod.rs).
        return [...module, ...segments];
      } else return null;
      return [...base, ...segments.slice(1)];
    };
    const targets = new Set();
    const bound = new Map();
    for (const [, tree] of code.matchAll(/\buse\s+([^;]+);/g)) {
      for (const path of expandUse(tree)) {
        const [plain, alias] = path.split(/as(?=[A-Za-z_])/);
        const segments = absolute(plain.replace(/::\*$/, ''));
        if (!segments) continue;
        targets.add(fileOf(segments));
        const name = alias ?? segments.at(-1);
        if (name && moduleFile.has(segments.join('::'))) bound.set(name, segments);
      }
    }
    for (const [path] of code.matchAll(/(?<![\w:$])(?:crate|super|self)(?:::\w+)+/g)) {
      const segments = absolute(path);
      if (segments) targets.add(fileOf(segments));
    }
    for (const [path, first] of code.matchAll(/(?<![\w:$])(\w+)(?:::\w+)+/g)) {
      const base = bound.get(first);
      if (base) targets.add(fileOf([...base, ...path.split('::').slice(1)]));
      else if (moduleFile.has([...module, first].join('::'))) targets.add(fileOf([...module, ...path.split('::')]));
    }
    targets.delete(undefined);
    targets.delete(file);
    graph.set(file, targets);
  }
  return graph;
}

function tsGraph() {
  const lib = join(root, 'lib');
  const files = filesUnder(lib, '.ts');
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, '');
    const specifiers = [
      ...[...text.matchAll(/\b(?:import|export)\b[^'";]*?\bfrom\s*['"]([^'"]+)['"]/g)].map((m) => m[1]),
      ...[...text.matchAll(/\bimport\s*['"]([^'"]+)['"]/g)].map((m) => m[1]),
      ...[...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]),
    ];
    const targets = new Set();
    for (const specifier of specifiers) {
      if (!specifier.startsWith('.')) continue;
      const base = resolve(dirname(file), specifier).replace(/\.(js|ts|mjs|cjs)$/, '');
      const target = [`${base}.ts`, join(base, 'index.ts')].find((f) => known.has(f));
      if (target && target !== file) targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan, iterative). */
function cycles(graph) {
  let counter = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work = [[start, [...(graph.get(start) ?? [])], 0]];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length) {
      const frame = work.at(-1);
      const [node, edges] = frame;
      if (frame[2] < edges.length) {
        const next = edges[frame[2]++];
        if (!index.has(next)) {
          index.set(next, counter);
          low.set(next, counter++);
          stack.push(next);
          onStack.add(next);
          work.push([next, [...(graph.get(next) ?? [])], 0]);
        } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), index.get(next)));
        continue;
      }
      work.pop();
      if (work.length) {
        const parent = work.at(-1)[0];
        low.set(parent, Math.min(low.get(parent), low.get(node)));
      }
      if (low.get(node) === index.get(node)) {
        const component = [];
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          component.push(member);
        } while (member !== node);
        if (component.length > 1) found.push(component.sort());
      }
    }
  }
  return found;
}

/** The shortest path from `from` to `to` inside `component` (breadth first), both ends included. */
function pathWithin(graph, component, from, to) {
  const inside = new Set(component);
  const previous = new Map([[from, null]]);
  const queue = [from];
  while (queue.length) {
    const node = queue.shift();
    if (node === to) break;
    for (const next of graph.get(node) ?? []) {
      if (inside.has(next) && !previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  const path = [to];
  while (previous.get(path[0])) path.unshift(previous.get(path[0]));
  return path;
}

/**
 * The module a file belongs to: a top-level file of its tree, or a top-level folder with everything in it
 * (`src/egress/clients.rs` and `src/egress/mod.rs` are both `egress/`; `src/auth/store/memory.rs` is `auth/`).
 * Files of one module may use each other both ways (a folder's mod.rs and its children do); a cycle
 * counts when it runs through more than one module.
 */
function moduleOf(tree, file) {
  const name = relative(join(root, tree), file).split('/')[0].replace(/\.(rs|ts)$/, '');
  const folder = join(root, tree, name);
  return existsSync(folder) && statSync(folder).isDirectory() ? `${tree}/${name}/` : `${tree}/${name}`;
}

let failed = false;
for (const [tree, graph] of [['src', rustGraph()], ['lib', tsGraph()]]) {
  const found = cycles(graph).filter((files) => new Set(files.map((f) => moduleOf(tree, f))).size > 1);
  if (!found.length) {
    console.log(`${tree}: no import cycle across modules (${graph.size} files)`);
    continue;
  }
  failed = true;
  for (const files of found) {
    const modules = [...new Set(files.map((f) => moduleOf(tree, f)))];
    console.log(`${tree}: import cycle through ${modules.length} modules (${modules.join(', ')}), ${files.length} files:`);
    console.log(`  ${files.map((f) => relative(root, f)).join(', ')}`);
    // One loop that leaves a module: an edge across, then the shortest way back.
    const [from, to] = files
      .flatMap((f) => [...(graph.get(f) ?? [])].filter((t) => files.includes(t)).map((t) => [f, t]))
      .find(([f, t]) => moduleOf(tree, f) !== moduleOf(tree, t));
    const loop = [from, ...pathWithin(graph, files, to, from)];
    console.log(`  for example ${loop.map((f) => relative(root, f)).join(' → ')}`);
    if (process.argv.includes('--all')) {
      for (const f of files) {
        for (const t of graph.get(f) ?? []) {
          if (files.includes(t) && moduleOf(tree, f) !== moduleOf(tree, t)) {
            console.log(`    ${relative(root, f)} → ${relative(root, t)}`);
          }
        }
      }
    }
  }
}
process.exit(failed ? 1 : 0);
