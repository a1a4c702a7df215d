// Reading a configuration file safely: the one place a configuration's bytes are read. Kept apart from
// config-file.ts so the public declarations don't name Node's Buffer.

import { constants, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';
import { engine } from './binding';
import { createMcpError, McpError } from './errors';

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
    // A failed close must not replace the result (or the typed error) with a raw one.
    await file.close().catch(() => {});
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
