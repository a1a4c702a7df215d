// Resources, prompts, completions and skills of a toolset (and of connectMcpServer's client): the engine's
// session entry points (src/napi/session.rs) converted and forwarded. The engine checks the server's
// capabilities, puts reads, subscribes, prompt gets and completions to `policy.decide`, waits for a
// reconnecting server, bounds every listing and result, and decodes blobs; this file only wires.

import { binding, type NativeToolset } from './binding';
import { createMcpError, fromEngine } from './errors';
import type { CallRecording, ClientTelemetry } from './telemetry';
import type {
  McpClientSessionRequests,
  McpCompleteResult,
  McpCompletionRef,
  McpGetPromptResult,
  McpPrompt,
  McpReadResourceResult,
  McpResource,
  McpResourceContents,
  McpResourceTemplate,
  McpResourceUpdated,
  McpSessionRequests,
  McpLoadedSkill,
  McpSkill,
} from './types';

/** The engine's session entry points (src/napi/session.rs). */
const native = binding;

let requestIds = 0;
/** Ids for listings and reads a signal may stop (never 0, which means none); unique per process. */
export function nextAbortId(): number {
  requestIds = requestIds >= 0xffff_fff0 ? 1 : requestIds + 1;
  return requestIds;
}

const aborted = () => createMcpError('mcp_aborted', 'MCP request aborted by the caller');

/** The subscribers of a toolset's resource updates, by server and URI. */
export class ResourceSubscribers {
  private readonly byKey = new Map<string, Set<(update: McpResourceUpdated) => void>>();

  private static key(server: string, uri: string): string {
    return `${server}\u0000${uri}`;
  }

  add(server: string, uri: string, listener: (update: McpResourceUpdated) => void): () => void {
    const key = ResourceSubscribers.key(server, uri);
    let listeners = this.byKey.get(key);
    if (!listeners) this.byKey.set(key, (listeners = new Set()));
    // One wrapper per subscription: the same function subscribed twice is called twice, and one stop()
    // removes only its own.
    const entry = (update: McpResourceUpdated) => listener(update);
    listeners.add(entry);
    return () => {
      listeners.delete(entry);
      if (listeners.size === 0 && this.byKey.get(key) === listeners) this.byKey.delete(key);
    };
  }

  /** A `resource-updated` event from the engine, taken: the engine holds further updates of that URI
   * until this (coalescing a flood), so it is told first — an update during the listeners' run comes again. */
  deliver(toolset: NativeToolset, update: McpResourceUpdated): void {
    try {
      native.sessionUpdateDelivered(toolset, update.server, update.uri);
    } catch {
      // A closed toolset: nothing more will come.
    }
    for (const listener of [...(this.byKey.get(ResourceSubscribers.key(update.server, update.uri)) ?? [])]) {
      try {
        const returned: unknown = listener({ server: update.server, uri: update.uri });
        // An async callback that rejects must not become an unhandled rejection (which ends the process).
        if (returned !== null && typeof returned === 'object' && typeof (returned as PromiseLike<unknown>).then === 'function') {
          Promise.resolve(returned as PromiseLike<unknown>).then(undefined, () => {});
        }
      } catch {
        // One subscriber's failure must not keep the others from hearing of the update.
      }
    }
  }

  clear(): void {
    this.byKey.clear();
  }
}

function invalid(message: string): Error {
  return createMcpError('mcp_invalid_arguments', message);
}

function stringRecord(value: unknown, what: string): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(`${what} must be an object of strings`);
  return value as Record<string, string>;
}

/** `request()`, its recording (a span, a measurement) ended when it settles: with its error's code if it fails. */
async function recorded<T>(recording: CallRecording | undefined, request: () => Promise<T>): Promise<T> {
  if (!recording) return request();
  try {
    const value = await request();
    recording.end('');
    return value;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    recording.end(typeof code === 'string' && code.startsWith('mcp_') ? code : '_OTHER');
    throw error;
  }
}

/** The session requests of the toolset `engine()` (`closed()`: after close, every one rejects); `telemetry`
 * records reads and prompt gets (their end is when the engine's promise settles). */
export function sessionRequests(engine: () => NativeToolset, subscribers: ResourceSubscribers, closed: () => boolean, telemetry?: ClientTelemetry): McpSessionRequests {
  const run = async <T>(work: () => Promise<T>): Promise<T> => {
    if (closed()) throw createMcpError('mcp_connection_closed', 'the toolset was closed');
    try {
      return await work();
    } catch (error) {
      throw fromEngine(error);
    }
  };
  const server = (name: unknown): string => {
    if (typeof name !== 'string') throw invalid('the server must be named by a string');
    return name;
  };
  const text = (value: unknown, what: string): string => {
    if (typeof value !== 'string') throw invalid(`${what} must be a string`);
    return value;
  };
  const listing = (what: 'resources' | 'templates' | 'prompts' | 'skills', options: { server?: string } | undefined) =>
    run(async () => {
      const only = options?.server;
      if (only !== undefined) server(only);
      return JSON.parse(await native.sessionList(engine(), what, only));
    });
  return {
    listResources: (options) => listing('resources', options) as Promise<McpResource[]>,
    listResourceTemplates: (options) => listing('templates', options) as Promise<McpResourceTemplate[]>,
    listPrompts: (options) => listing('prompts', options) as Promise<McpPrompt[]>,
    readResource: (name, uri, options = {}) =>
      run(async () => {
        const signal = options?.signal;
        const [target, at] = [server(name), text(uri, 'the resource URI')];
        if (signal?.aborted) throw aborted();
        const abortId = signal ? nextAbortId() : 0;
        const stop = () => {
          try {
            native.clientAbortListing(engine(), abortId);
          } catch {
            // A closed toolset has no read left to stop.
          }
        };
        signal?.addEventListener('abort', stop, { once: true });
        try {
          const recording = telemetry?.start({ method: 'resources/read', server: target, uri: at });
          return fromRead(await recorded(recording, () => native.sessionReadResource(engine(), target, at, abortId, recording?.trace)));
        } finally {
          signal?.removeEventListener('abort', stop);
        }
      }),
    subscribeResource: (name, uri, onUpdated) =>
      run(async () => {
        const [target, at] = [server(name), text(uri, 'the resource URI')];
        if (typeof onUpdated !== 'function') throw invalid('subscribeResource takes a function to call on updates');
        // Listening before the server is asked: an update right after the subscription is not missed.
        const remove = subscribers.add(target, at, onUpdated);
        let id: number;
        try {
          id = await native.sessionSubscribe(engine(), target, at);
        } catch (error) {
          remove();
          throw error;
        }
        let ended = false;
        return async () => {
          if (ended) return;
          ended = true;
          remove();
          try {
            native.sessionUnsubscribe(engine(), id);
          } catch (error) {
            throw fromEngine(error);
          }
        };
      }),
    getPrompt: (name, prompt, args) =>
      run(async () => {
        const given = stringRecord(args, 'prompt arguments');
        const [target, promptName] = [server(name), text(prompt, 'the prompt name')];
        const recording = telemetry?.start({ method: 'prompts/get', server: target, target: promptName });
        const json = await recorded(recording, () => native.sessionGetPrompt(engine(), target, promptName, given === undefined ? '' : JSON.stringify(given), recording?.trace));
        return JSON.parse(json) as McpGetPromptResult;
      }),
    complete: (name, ref, argument, context) =>
      run(async () => {
        if (ref === null || typeof ref !== 'object') throw invalid("a completion's ref must be { type: 'ref/prompt', name } or { type: 'ref/resource', uri }");
        if (argument === null || typeof argument !== 'object') throw invalid("a completion's argument must be { name, value }");
        const chosen = stringRecord(context?.arguments, 'completion context arguments');
        const json = await native.sessionComplete(
          engine(),
          server(name),
          JSON.stringify(ref satisfies McpCompletionRef),
          JSON.stringify(argument),
          chosen === undefined ? '' : JSON.stringify(chosen),
        );
        return { completion: JSON.parse(json) } as McpCompleteResult;
      }),
    listSkills: (options) => listing('skills', options) as Promise<McpSkill[]>,
    loadSkill: (name, uri) => run(async () => JSON.parse(await native.sessionLoadSkill(engine(), server(name), text(uri, 'the skill URI'))) as McpLoadedSkill),
    readSkillFile: (name, uri, path) =>
      run(async () => fromRead(await native.sessionReadSkillFile(engine(), server(name), text(uri, 'the skill URI'), text(path, 'the file path')))),
  };
}

/** A read as it crossed: a blob is the engine's bytes as they are (no copy, no base64). */
function fromRead(read: { json: string; blobs: Uint8Array[] }): McpReadResourceResult {
  const { contents } = JSON.parse(read.json) as { contents: Array<{ uri: string; mimeType?: string; text?: string; blob?: number }> };
  return { contents: contents.map(({ blob, ...rest }) => (blob === undefined ? rest : { ...rest, blob: read.blobs[blob] })) as McpResourceContents[] };
}

/** The same requests for one server: a client's, without the server argument. */
export function clientSessionRequests(requests: McpSessionRequests, server: string): McpClientSessionRequests {
  return {
    listResources: () => requests.listResources({ server }),
    listResourceTemplates: () => requests.listResourceTemplates({ server }),
    readResource: (uri, options) => requests.readResource(server, uri, options),
    subscribeResource: (uri, onUpdated) => requests.subscribeResource(server, uri, onUpdated),
    listPrompts: () => requests.listPrompts({ server }),
    getPrompt: (name, args) => requests.getPrompt(server, name, args),
    complete: (ref, argument, context) => requests.complete(server, ref, argument, context),
    listSkills: () => requests.listSkills({ server }),
    loadSkill: (uri) => requests.loadSkill(server, uri),
    readSkillFile: (uri, path) => requests.readSkillFile(server, uri, path),
  };
}
