// Node reads stdio servers' stdout on the event loop and hands the bytes to the engine, which parses
// them synchronously: a response then settles its call with no thread wake-up.

import { closeSync } from 'node:fs';
import type { Socket } from 'node:net';
import { type NativeToolset } from './binding';
import type { CallChannel } from './call-channel';

/**
 * Read one stdio server's stdout on the event loop. Returns the function that ends the reading (destroys
 * the socket, closing the descriptor, and tells the engine); `readers` holds it until the stream ends,
 * so close() can end streams a server's stray descendants keep open.
 */
export function readStdout(native: NativeToolset, calls: CallChannel, readerId: number, fd: number, readers: Set<() => void>): void {
  let ended = false;
  let socket: Socket | undefined;
  const end = (error: string | null) => {
    if (ended) return;
    ended = true;
    readers.delete(stop);
    socket?.destroy();
    try {
      native.stdoutEnded(readerId, error);
    } catch {
      // The engine failed to take the end (a contained bug); the server's calls time out as usual.
    }
  };
  const stop = () => end(null);
  readers.add(stop);
  try {
    // node:net (and the streams under it) loads with the first stdio server, not at import.
    const { Socket: NetSocket } = require('node:net') as typeof import('node:net');
    socket = new NetSocket({ fd, readable: true, writable: false });
  } catch (error) {
    // The descriptor is ours to close: no socket took it.
    try {
      closeSync(fd);
    } catch {
      // Already closed: nothing to release.
    }
    end(String(error));
    return;
  }
  // A server's pipe must not keep the process alive; calls in flight do that (see CallChannel).
  socket.unref();
  socket.on('data', (chunk: Buffer) => {
    let outcomes: string;
    try {
      outcomes = native.feedStdout(readerId, chunk);
    } catch (error) {
      // The engine could not take these bytes: this server's stream is lost, not the process.
      end(`the engine failed reading this server: ${(error as Error).message}`);
      calls.drain();
      return;
    }
    calls.accept(outcomes);
  });
  socket.on('end', () => end(null));
  socket.on('error', (error) => end(error.message));
  socket.on('close', () => end(null));
}
