import { SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import type { DispatchEvent } from '@llama-orch/contracts';
import {
  extractContext,
  injectTraceparent,
  traceFields,
  type IncomingHeaders,
  type TraceFields,
  type Tracing,
} from '@llama-orch/daemon-support/tracing';
import type { RequestHeaders } from '@llama-orch/llamacpp-adapter';

/** How a dispatch ended (the `outcome` of its `dispatch ended` line and of the metrics). */
export type DispatchOutcome = 'end' | 'canceled' | 'error';

/** A dispatch's event sink (dispatch.ts's `DispatchEmit`, restated here: dispatch.ts imports this file). */
type Emit = (ev: DispatchEvent) => Promise<void> | void;

/** What the spans record of a dispatch that ended normally (its `end` event, or an answer's figures). */
interface EndFigures {
  tokens_out: number;
  prompt_tokens?: number | undefined;
  stop_type: string;
}

/** Where the dispatch arrived. */
export interface DispatchTraceStart {
  taskId: string;
  poolId: string;
  nodeId: string;
  /** The route (`/v2/pools/:id/completions`). */
  route: string;
  /** `completion`, `chat`, or the engine call's kind (`infill`, `embeddings`, `rerank`). */
  workload: string;
  stream: boolean;
}

/** The pool's engine that got the dispatch. */
export interface DispatchTraceLease {
  model: string | undefined;
  replicaId: string;
  engineVersion: string;
}

/**
 * The spans of one traced dispatch: `dispatch` (server span, a child of the orchestrator's
 * `traceparent`, or a new trace without one) from the request's arrival to its last event, and
 * `engine request` (client span, its child) around the llama-server call, whose request carries
 * `traceparent`. The first token is an event of the engine request, never a span per token. Both end
 * with the dispatch's outcome as their status: `end` OK, `error` ERROR (the error event's code and
 * message), `canceled` unset (a cancel is not a failure), `llorch.outcome` saying which.
 *
 * Made only when tracing is on (`DispatchTrace.start` gives undefined otherwise): a dispatch without
 * one allocates no span, context or log binding, and its token path is untouched (no {@link watch}).
 */
export class DispatchTrace {
  /** `{ trace_id, span_id }` of the dispatch span: bound in the dispatch's logger. */
  readonly fields: TraceFields;
  readonly #tracing: Tracing;
  readonly #span: Span;
  readonly #context: Context;
  readonly #attributes: Attributes;
  #engine: Span | undefined;
  #firstToken = false;
  #end: EndFigures | undefined;
  #error: { code: string; message: string } | undefined;
  #ended = false;

  private constructor(tracing: Tracing, headers: IncomingHeaders, start: DispatchTraceStart) {
    this.#tracing = tracing;
    this.#attributes = {
      'llorch.task_id': start.taskId,
      'llorch.pool_id': start.poolId,
      'llorch.node_id': start.nodeId,
      'llorch.workload': start.workload,
      'llorch.stream': start.stream,
    };
    const parent = extractContext(headers);
    this.#span = tracing.tracer.startSpan(
      'dispatch',
      {
        kind: SpanKind.SERVER,
        attributes: { ...this.#attributes, 'http.request.method': 'POST', 'http.route': start.route },
      },
      parent,
    );
    this.#context = trace.setSpan(parent, this.#span);
    this.fields = traceFields(this.#span);
  }

  /** The trace of a dispatch that arrived with `headers`; undefined when tracing is off. */
  static start(tracing: Tracing, headers: IncomingHeaders, start: DispatchTraceStart): DispatchTrace | undefined {
    return tracing.enabled ? new DispatchTrace(tracing, headers, start) : undefined;
  }

  /** The pool took the dispatch: which model and engine serve it. */
  leased(lease: DispatchTraceLease): void {
    if (lease.model !== undefined) this.#attributes['llorch.model'] = lease.model;
    this.#attributes['llorch.replica_id'] = lease.replicaId;
    this.#attributes['llorch.engine_version'] = lease.engineVersion;
    this.#span.setAttributes(this.#attributes);
  }

  /**
   * Starts the engine request span for a request to `engineUrl` and returns the headers it carries
   * (`traceparent` of that span).
   */
  engineRequest(engineUrl: string): RequestHeaders {
    const url = new URL(engineUrl);
    this.#engine = this.#tracing.tracer.startSpan(
      'engine request',
      {
        kind: SpanKind.CLIENT,
        attributes: {
          ...this.#attributes,
          'server.address': url.hostname,
          ...(url.port !== '' ? { 'server.port': Number(url.port) } : {}),
          ...(this.#attributes['llorch.model'] !== undefined
            ? { 'gen_ai.request.model': this.#attributes['llorch.model'] }
            : {}),
        },
      },
      this.#context,
    );
    return injectTraceparent({}, trace.setSpan(this.#context, this.#engine));
  }

  /**
   * `emit` watched for what the spans record: the first token (an event), the `end` or `error`
   * event. One call and one comparison per token on top of `emit`.
   */
  watch(emit: Emit): Emit {
    return (ev) => {
      if (ev.type === 'token') {
        if (!this.#firstToken) {
          this.#firstToken = true;
          this.#engine?.addEvent('first token');
        }
      } else if (ev.type === 'end') this.#end = ev;
      else if (ev.type === 'error') this.failed(ev);
      return emit(ev);
    };
  }

  /** The figures of a non-streamed answer (its `result` line). */
  answered(figures: EndFigures): void {
    this.#end = figures;
  }

  /** The dispatch failed with this error (its `error` event, or the typed error that refused it). */
  failed(ev: { code: string; message: string }): void {
    this.#error = { code: ev.code, message: ev.message };
  }

  /** Ends both spans with `outcome` (idempotent: the first call wins). */
  end(outcome: DispatchOutcome): void {
    if (this.#ended) return;
    this.#ended = true;
    const facts: Attributes = { 'llorch.outcome': outcome };
    const end = this.#end;
    if (end !== undefined) {
      facts['llorch.tokens_out'] = end.tokens_out;
      facts['llorch.stop_type'] = end.stop_type;
      if (end.prompt_tokens !== undefined) facts['gen_ai.usage.input_tokens'] = end.prompt_tokens;
      facts['gen_ai.usage.output_tokens'] = end.tokens_out;
    }
    if (outcome === 'error' && this.#error !== undefined) facts['llorch.error_code'] = this.#error.code;
    for (const span of this.#engine !== undefined ? [this.#engine, this.#span] : [this.#span]) {
      span.setAttributes(facts);
      if (outcome === 'end') span.setStatus({ code: SpanStatusCode.OK });
      else if (outcome === 'error')
        span.setStatus({ code: SpanStatusCode.ERROR, message: this.#error?.message ?? 'dispatch failed' });
      span.end();
    }
  }
}
