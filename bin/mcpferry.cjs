#!/usr/bin/env node
'use strict';
// The `mcpferry` command (see `mcpferry --help` and the README's CLI section): lib/cli.ts, compiled to dist/.

const { main } = require('../dist/cli.js');

main(process.argv.slice(2)).then(
  (code) => {
    // Set, not exit(): stdout is flushed first (a pipe to another program may still be draining).
    process.exitCode = code;
  },
  (error) => {
    process.stderr.write(`mcpferry: ${error && error.stack ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  },
);
