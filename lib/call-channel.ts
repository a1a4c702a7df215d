// The JavaScript half of a toolset's call path: tool calls batched into the engine, outcomes and progress
// updates drained back. Protocol work (framing, ids, timeouts, cancellation) is the engine's.

import { type NativeToolset } from './binding';
import { createMcpError, engineFailure, type McpError, type McpErrorCode } from './errors';
import type { CallRecording, ClientTelemetry, EngineReport } from './telemetry';
import type { McpProgress, McpToolResult } from './types';

const CLOSED_MESSAGE = 'MCP connection closed';

/**
 * The JavaScript half of the call path. Calls made in one synchronous run are handed to the engine
 * together on the next microtask (one crossing, one pipe write for a burst); outcomes come back the
 * same way, one wake-up and one JSON.parse for everything that finished meanwhile.
 */
export class CallChannel {
  private nextCallId = 1;
  private readonly settle = new Map<number, { resolve(r: McpToolResult): void; reject(e: unknown): void }>();
  /** The `onProgress` of the calls that have one, removed when they settle: a late update finds none. */
  private readonly progress = new Map<number, (progress: McpProgress) => void | Promise<void>>();
  /** The calls being recorded (lib/telemetry.ts), ended when they settle. Empty with no tracer or meter. */
  private readonly recordings = new Map<number, CallRecording>();
  /** Calls made since the last flush, by id: `callId \t abortId[p] \t name \t contextJson \t argumentsJson`. */
  private readonly unflushed = new Map<number, string>();
  // Calls in flight keep the process alive (the engine's wake-up callback is weak on purpose).
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  /** A drain failed: outcomes may sit in the engine, which wakes us only when its batch was empty. */
  private undrained = false;

  constructor(
    private readonly native: () => NativeToolset,
    /** Starts a call's span and metric when a tracer or meter provider is registered. */
    readonly telemetry?: ClientTelemetry,
  ) {}

  call(
    name: string,
    argumentsJson: string,
    signal: AbortSignal | undefined,
    contextJson = '',
    onProgress?: (progress: McpProgress) => void | Promise<void>,
    recording?: CallRecording,
  ): Promise<McpToolResult> {
    if (this.closed) {
      recording?.end('mcp_connection_closed');
      return Promise.reject(createMcpError('mcp_connection_closed', CLOSED_MESSAGE));
    }
    const callId = this.nextCallId;
    this.nextCallId = this.nextCallId >= 0xffff_fff0 ? 1 : this.nextCallId + 1;
    return new Promise<McpToolResult>((resolve, reject) => {
      if (this.settle.size === 0) this.hold();
      if (signal) {
        const onAbort = () => this.abort(callId);
        signal.addEventListener('abort', onAbort, { once: true });
        // One listener per call, removed when it settles: a shared signal never accumulates them.
        const done = () => signal.removeEventListener('abort', onAbort);
        this.settle.set(callId, { resolve: (r) => (done(), resolve(r)), reject: (e) => (done(), reject(e)) });
      } else {
        this.settle.set(callId, { resolve, reject });
      }
      if (onProgress) this.progress.set(callId, onProgress);
      if (recording) {
        this.recordings.set(callId, recording);
        // The trace context and "report this call's time" go to the engine with the call's context.
        contextJson = contextJson === '' ? `{${recording.members}}` : `${contextJson.slice(0, -1)},${recording.members}}`;
      }
      if (this.unflushed.size === 0) queueMicrotask(() => this.flush());
      // `p` after the abort id: the engine delivers this call's progress (src/napi/wire.rs).
      const abortId = `${signal ? callId : 0}${onProgress ? 'p' : ''}`;
      this.unflushed.set(callId, `${callId}\t${abortId}\t${name}\t${contextJson}\t${argumentsJson}\n`);
    });
  }

  /** An abort before the flush never reaches the engine; after it, the engine cancels the request. */
  private abort(callId: number): void {
    // The caller gave up: no progress after this, even one the engine delivers ahead of the aborted outcome.
    if (this.progress.size) this.progress.delete(callId);
    if (this.unflushed.delete(callId)) {
      this.complete(callId, 'mcp_aborted', 'MCP request aborted by the caller');
      return;
    }
    try {
      this.native().abort(callId);
    } catch (error) {
      this.fail(callId, engineFailure(error));
    }
  }

  private flush(): void {
    if (this.unflushed.size === 0) return;
    const ids = [...this.unflushed.keys()];
    const batch = [...this.unflushed.values()].join('');
    this.unflushed.clear();
    try {
      this.native().callTools(batch);
    } catch (error) {
      const failure = engineFailure(error);
      for (const id of ids) this.fail(id, failure);
    }
    if (this.undrained) this.drain();
  }

  /** The engine says outcomes are waiting. */
  drain = (): void => {
    let outcomes: string;
    try {
      outcomes = this.native().drainCompletions();
    } catch (error) {
      // Outcomes that cannot be collected would leave their calls pending forever. Whatever the
      // engine still holds is collected (and ignored) on the next flush, so wake-ups resume.
      this.undrained = true;
      const failure = engineFailure(error);
      for (const id of [...this.settle.keys()]) this.fail(id, failure);
      return;
    }
    this.undrained = false;
    this.accept(outcomes);
  };

  /** Outcomes in the engine's `[[callId, errorCode, payload, properties?, report?], ...]` form. */
  accept(outcomesJson: string): void {
    if (outcomesJson === '[]') return;
    const outcomes: [number, string, unknown, (Record<string, unknown> | null)?, EngineReport?][] = JSON.parse(outcomesJson);
    for (const [callId, code, payload, properties, report] of outcomes) {
      if (code === 'progress') this.progressed(callId, payload as McpProgress);
      else this.complete(callId, code, payload, properties ?? undefined, report);
    }
  }

  /** A progress update of a call still waiting (validated and bounded by the engine: src/progress.rs). */
  private progressed(callId: number, update: McpProgress): void {
    const onProgress = this.progress.get(callId);
    if (!onProgress) return;
    try {
      const returned = onProgress(update);
      // A rejecting onProgress is ignored like a throwing one, not left an unhandled rejection.
      if (returned && typeof (returned as Promise<void>).then === 'function') (returned as Promise<void>).then(undefined, () => {});
    } catch {
      // The caller's callback failed: the call and the other calls' updates go on.
    }
  }

  private complete(callId: number, code: string, payload: unknown, properties?: Record<string, unknown>, report?: EngineReport): void {
    if (this.recordings.size) this.endRecording(callId, code, report, code === '' && (payload as { isError?: unknown })?.isError === true);
    if (code === '') this.settleCall(callId, (waiting) => waiting.resolve(payload as McpToolResult));
    else this.fail(callId, Object.assign(createMcpError(code as McpErrorCode, String(payload)), properties));
  }

  private fail(callId: number, error: McpError): void {
    if (this.recordings.size) this.endRecording(callId, error.code);
    this.settleCall(callId, (waiting) => waiting.reject(error));
  }

  private endRecording(callId: number, code: string, report?: EngineReport, isError?: boolean): void {
    const recording = this.recordings.get(callId);
    if (!recording) return;
    this.recordings.delete(callId);
    try {
      recording.end(code, report, isError);
    } catch {
      // A failing exporter or SDK must not change the call's outcome.
    }
  }

  private settleCall(callId: number, how: (waiting: { resolve(r: McpToolResult): void; reject(e: unknown): void }) => void): void {
    const waiting = this.settle.get(callId);
    if (!waiting) return;
    this.settle.delete(callId);
    if (this.progress.size) this.progress.delete(callId);
    if (this.settle.size === 0) this.release();
    how(waiting);
  }

  /**
   * After the engine closed: collect what it completed, then settle whatever it did not with
   * mcp_connection_closed, and drop the keep-alive timer. Later calls reject at once.
   */
  shutdown(): void {
    this.closed = true;
    this.drain();
    this.unflushed.clear();
    const closed = createMcpError('mcp_connection_closed', CLOSED_MESSAGE);
    for (const id of [...this.settle.keys()]) this.fail(id, closed);
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  private hold(): void {
    if (!this.keepAlive) this.keepAlive = setInterval(() => {}, 0x7fff_ffff);
    else this.keepAlive.ref?.();
  }

  private release(): void {
    this.keepAlive?.unref?.();
  }
}
