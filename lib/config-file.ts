// loadMcpConfig: the configuration files other MCP clients use (Claude Desktop, Claude Code, Cursor,
// VS Code, Codex) as mcpTools server entries. This file reads the file; the engine parses and checks it
// (src/config_file.rs), so an error names the file, the entry and the field.

import { homedir } from 'node:os';
import { extname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { binding } from './binding';
import { readConfigFile } from './config-read';
import { createMcpError, fromEngine } from './errors';
import type { McpServer } from './types';

/** A configuration file, loaded: `servers` plugs straight into `mcpTools(config.servers, opts)`. */
export interface McpConfig {
  /**
   * Every entry of the file, in order. Disabled ones (`disabled: true` in JSON, `enabled = false` in TOML)
   * are here with `enabled: false`: mcpTools starts and contacts nothing for them.
   */
  servers: McpServer[];
  /** The names of the disabled entries. */
  disabled: string[];
  /** The file read, or null for an object. */
  source: string | null;
  /**
   * What was read but not applied, each naming the file, the entry and the key: a key no tool documents
   * (with the nearest known one, "did you mean"), or one with no equivalent here (a Codex timeout or
   * approval mode, VS Code's `sandbox`). Also printed to stderr unless `warnings: false`.
   */
  warnings: string[];
}

/** How `loadMcpConfig` reads a file. */
export interface McpConfigOptions {
  /** Refuse a key no tool documents (`comand`) with `McpConfigError`, instead of a warning. Default false. */
  strict?: boolean;
  /** Print each warning to stderr as `mcpferry: warning: …` (default true); they are in `warnings` either way. */
  warnings?: boolean;
}

/** `loadMcpConfig`, the public API's (documented where lib/index.ts exports it, which loads this module on first use). */
export async function loadMcpConfig(pathOrObject: string | URL | Record<string, unknown>, options: McpConfigOptions = {}): Promise<McpConfig> {
  if (options === null || typeof options !== 'object') throw createMcpError('mcp_config_invalid', 'loadMcpConfig options must be an object ({ strict, warnings })');
  if (typeof pathOrObject === 'string' || pathOrObject instanceof URL) {
    const path = pathOrObject instanceof URL ? fileURLToPath(pathOrObject) : pathOrObject;
    return loadConfigText((await readConfigFile(path)).toString('utf8'), path, options);
  }
  if (pathOrObject === null || typeof pathOrObject !== 'object' || Array.isArray(pathOrObject)) {
    throw createMcpError('mcp_config_invalid', 'loadMcpConfig takes a file path or a configuration object ({ mcpServers: { ... } })');
  }
  let text: string;
  try {
    text = JSON.stringify(pathOrObject);
  } catch (error) {
    throw createMcpError('mcp_config_invalid', `the configuration object is not plain data: ${(error as Error).message}`);
  }
  return parse(text, 'the configuration object', 'json', null, options);
}

/** What an unresolved load found each entry would read: its `envFile` paths as written, its `env_vars` names. */
export type Unresolved = Record<string, { envFile: unknown[]; envVars: string[] }>;

/**
 * Internal (the CLI): load a configuration file's `text`, read from `path`, so a caller that hashed the
 * bytes loads those same bytes. `resolve: false` reads nothing from the environment or the disk (no
 * `${…}`, `envFile` or `env_vars`): the entries come back as written, unvalidated, with what they would
 * read in `unresolved` — what deciding whether to trust a file needs.
 */
export function loadConfigText(text: string, path: string, options: McpConfigOptions & { resolve?: boolean }): McpConfig & { unresolved?: Unresolved } {
  return parse(text, path, extname(path).toLowerCase() === '.toml' ? 'toml' : 'json', path, options);
}

function parse(text: string, source: string, format: 'json' | 'toml', path: string | null, options: McpConfigOptions & { resolve?: boolean }): McpConfig & { unresolved?: Unresolved } {
  let loaded: { servers: McpServer[]; disabled: string[]; warnings: string[]; unresolved?: Unresolved };
  // The file's place and the home and current directories: what ${workspaceFolder}, ${userHome},
  // ${cwd} and a relative envFile resolve against.
  const context = JSON.stringify({
    path: path === null ? undefined : resolve(path),
    home: homedir(),
    cwd: process.cwd(),
    strict: options.strict === true,
    resolve: options.resolve !== false,
  });
  try {
    loaded = JSON.parse(binding.loadMcpConfig(text, source, format, context));
  } catch (error) {
    throw fromEngine(error);
  }
  if (options.warnings !== false) {
    for (const warning of loaded.warnings) {
      try {
        // The engine quotes every key from the file escaped; a name from the file is filtered here too.
        process.stderr.write(`mcpferry: warning: ${warning.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')}\n`);
      } catch {
        // A closed stderr must not fail the load.
      }
    }
  }
  const config = { servers: loaded.servers, disabled: loaded.disabled, warnings: loaded.warnings, source: path };
  return loaded.unresolved === undefined ? config : { ...config, unresolved: loaded.unresolved };
}
