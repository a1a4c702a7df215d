// Whether the application registered OpenTelemetry providers, read without loading @opentelemetry/api or
// lib/telemetry.ts: a toolset asks this at creation, and the rest of telemetry loads only when it is needed.

/**
 * Where every copy of `@opentelemetry/api` 1.x keeps what the application registered (its global
 * registry). Nothing there: no provider, so the API is not even loaded (requiring it takes tens of
 * milliseconds, and many applications have it installed without using it).
 */
const OTEL_GLOBALS = Symbol.for('opentelemetry.js.api.1');

/** Whether a tracer or meter provider is registered with @opentelemetry/api, read without loading it. */
export function otelRegistered(): boolean {
  const registered = (globalThis as { [OTEL_GLOBALS]?: { trace?: unknown; metrics?: unknown } })[OTEL_GLOBALS];
  return registered !== undefined && (registered.trace !== undefined || registered.metrics !== undefined);
}
