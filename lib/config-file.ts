// loadMcpConfig: the configuration files other MCP clients use (Claude Desktop, Claude Code, Cursor,
// VS Code, Codex) as mcpTools server entries. This file reads the file; the engine parses and checks it
// (src/config_file.rs), so an error names the file, the entry and the field.

import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { binding } from './binding';
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
}

/**
 * Read an MCP configuration: a path (or file URL) to a JSON file in the `mcpServers` shape (Claude
 * Desktop, Claude Code's `.mcp.json`, Cursor; VS Code's `servers` too) or a TOML file with
 * `[mcp_servers.<name>]` tables (`.toml`, Codex-style), or such an object. `${env:VAR}` in a JSON file is
 * read from the environment now; TOML `header_env` / `bearer_token_env_var` headers only when a server is
 * connected, and never appear in the returned object. Rejects with `McpConfigError` (`mcp_config_invalid`).
 */
export async function loadMcpConfig(pathOrObject: string | URL | Record<string, unknown>): Promise<McpConfig> {
  if (typeof pathOrObject === 'string' || pathOrObject instanceof URL) {
    const path = pathOrObject instanceof URL ? fileURLToPath(pathOrObject) : pathOrObject;
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw createMcpError('mcp_config_invalid', `${path}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    return parse(text, path, extname(path).toLowerCase() === '.toml' ? 'toml' : 'json', path);
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
  return parse(text, 'the configuration object', 'json', null);
}

function parse(text: string, source: string, format: 'json' | 'toml', path: string | null): McpConfig {
  let loaded: { servers: McpServer[]; disabled: string[] };
  try {
    loaded = JSON.parse(binding.loadMcpConfig(text, source, format));
  } catch (error) {
    throw fromEngine(error);
  }
  return { ...loaded, source: path };
}
