// mcpferry as built in another checkout (BENCH_BASE_DIR: that checkout's root, with its engine and dist/ built),
// measured in the same run as this one: an A/B of two commits whose rounds are interleaved, so the machine's
// noise falls on both alike. Asked for by name (BENCH_CLIENTS=mcpferry,mcpferry-base).
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runMcpferry } from './mcpferry.mjs';

const dir = process.env.BENCH_BASE_DIR;
if (!dir) throw new Error('the mcpferry-base client needs BENCH_BASE_DIR: the root of a checkout with its engine and dist/ built');
await runMcpferry('mcpferry-base', pathToFileURL(join(resolve(dir), 'dist', 'index.js')).href);
