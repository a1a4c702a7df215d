// loadMcpConfig: the configuration files other MCP clients use (Claude Desktop, Claude Code, Cursor,
// VS Code, Codex) as mcpTools server entries. This file reads the file; the engine parses and checks it
// (src/config_file.rs), so an error names the file, the entry and the field.

import { constants, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { binding, engine } from './binding';
import { createMcpError, fromEngine, McpError } from './errors';
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
    const text = (await readConfigFile(path)).toString('utf8');
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

/**
 * The bytes of the configuration file at `path`, links followed: the one place a configuration is read
 * (loadMcpConfig, and the CLI for what it trusts). Only a regular file is read, checked on the open
 * descriptor (so the file checked is the file read), and at most `maxConfigFileBytes` + 1 bytes of it:
 * `/dev/zero`, a FIFO, a directory or a file that grows while it is read is refused, never read without end.
 * Opened non-blocking, so a FIFO with no writer does not hold the open. Rejects `mcp_config_invalid`.
 */
export async function readConfigFile(path: string): Promise<Buffer> {
  const refuse = (why: string) => createMcpError('mcp_config_invalid', `${path}: ${why}`);
  let file;
  try {
    file = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    throw refuse(`cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  try {
    const stats = await file.stat();
    if (!stats.isFile()) throw refuse(`is ${fileKind(stats)}, not a regular file; a configuration is read from a file`);
    const cap = engine.maxConfigFileBytes;
    let buffer = Buffer.alloc(Math.min(stats.size, cap) + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        // One byte past the cap read: too large. Short of it, the file grew since fstat: read on.
        if (length > cap) throw refuse(`is larger than ${cap} bytes; a configuration is a few kilobytes`);
        const grown = Buffer.alloc(Math.min(length * 2, cap + 1));
        buffer.copy(grown);
        buffer = grown;
      }
      const { bytesRead } = await file.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) return buffer.subarray(0, length);
      length += bytesRead;
    }
  } catch (error) {
    if (error instanceof McpError) throw error;
    throw refuse(`cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  } finally {
    await file.close();
  }
}

function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isFIFO()) return 'a FIFO (named pipe)';
  if (stats.isSocket()) return 'a socket';
  return 'something other than a file';
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
