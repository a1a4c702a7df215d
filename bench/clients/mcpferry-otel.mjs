// mcpferry with OpenTelemetry on: a tracer provider (batching to an exporter that drops what it gets, so
// export I/O is not what is measured) and a meter provider (its histograms aggregate; nothing collects
// them), both registered globally before the toolset is made, as an application with the Node SDK has
// them. Against the `mcpferry` client it gives what recording a call costs (bench/results.md).
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { runMcpferry } from './mcpferry.mjs';

const dropping = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
class Uncollected extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] }));
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new Uncollected()] }));

await runMcpferry('mcpferry-otel');
