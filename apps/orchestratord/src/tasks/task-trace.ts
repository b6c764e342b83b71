import {
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { SseFrame, TaskRequest } from '@llama-orch/contracts';
import { extractContext, injectTraceparent } from '@llama-orch/daemon-support/tracing';

/** What a task's spans are named and tagged with, from its request. */
export interface TracedTask {
  readonly id: string;
  readonly request: TaskRequest;
  /** The model as the client named it. */
  readonly modelName: string;
  readonly door: string;
}

/** The GenAI operation a task is (OpenTelemetry's `gen_ai.operation.name` values). */
function operationOf(r: TaskRequest): string {
  if (r.call !== undefined) return r.call.kind === 'infill' ? 'text_completion' : r.call.kind;
  return r.workload === 'chat' ? 'chat' : 'text_completion';
}

/**
 * A task's spans (only made when tracing is on; a task without tracing has none of this). The task
 * span — named `{operation} {model}` and carrying the GenAI attributes, as OpenTelemetry's GenAI
 * conventions name an inference request — is the child of the admitting request's server span and
 * the parent of the rest:
 * - `admission` (checks, prediction, the store's admission step), ended when the task is queued or refused;
 * - `queue wait`, from admission to the placement that sent it to a node;
 * - `placement` (pool, node, reason), one per placement;
 * - `dispatch` (client kind), one per attempt: its `traceparent` goes to pool-managerd, whose spans
 *   are its children. The first token is an event, never a span per token.
 * The task span ends with the task: usage, finish reason, queue wait and time to first token on it.
 */
export class TaskTrace {
  readonly #tracer: Tracer;
  readonly #span: Span;
  readonly #context: Context;
  /** The admitting request's span, while it is open, gets the GenAI attributes too. */
  readonly #request: Span | undefined;
  #admission: Span | undefined;
  #queue: Span | undefined;
  #attempt: Span | undefined;
  #attempts = 0;
  /** The task span ended: everything after is ignored (a span ends once). */
  #done = false;

  private constructor(tracer: Tracer, parent: Context, task: TracedTask, links: Link[], adoptedFrom?: string) {
    const r = task.request;
    const operation = operationOf(r);
    const attributes: Attributes = {
      'gen_ai.operation.name': operation,
      'gen_ai.provider.name': 'llama.cpp',
      'gen_ai.request.model': task.modelName,
      'llorch.task_id': task.id,
      'llorch.model_ref': r.model_ref,
      'llorch.priority': r.priority,
      'llorch.door': task.door,
    };
    if (r.call === undefined) attributes['gen_ai.request.max_tokens'] = r.max_tokens;
    if (r.seed !== undefined) attributes['gen_ai.request.seed'] = r.seed;
    if (adoptedFrom !== undefined) attributes['llorch.adopted_from'] = adoptedFrom;
    this.#tracer = tracer;
    this.#request = trace.getSpan(parent);
    this.#span = tracer.startSpan(
      `${operation} ${task.modelName}`,
      { kind: SpanKind.INTERNAL, attributes, links },
      parent,
    );
    this.#context = trace.setSpan(parent, this.#span);
  }

  /** A task being admitted under the admitting request's context (`parent`: its server span). */
  static admitting(tracer: Tracer, parent: Context, task: TracedTask): TaskTrace {
    const t = new TaskTrace(tracer, parent, task, []);
    t.#admission = tracer.startSpan('admission', { kind: SpanKind.INTERNAL }, t.#context);
    return t;
  }

  /**
   * A task this replica took over from `previousOwner` (it died or stalled): a child of the task
   * span the first replica made (its `traceparent` is in the shared record), linked to it too, so
   * the task stays one tree in one trace.
   */
  static adopted(tracer: Tracer, traceparent: string | undefined, task: TracedTask, previousOwner: string): TaskTrace {
    const parent = extractContext(traceparent === undefined ? {} : { traceparent });
    const original = trace.getSpanContext(parent);
    return new TaskTrace(tracer, parent, task, original === undefined ? [] : [{ context: original }], previousOwner);
  }

  /** The task span's W3C `traceparent` (kept in the shared record for a takeover); undefined when not sampled. */
  traceparent(): string | undefined {
    return injectTraceparent<Record<string, string>>({}, this.#context).traceparent;
  }

  /** The ids of the task span, for log lines. */
  get spanContext(): { traceId: string; spanId: string } {
    return this.#span.spanContext();
  }

  /** Admission refused the task: the admission and task spans end with the refusal. */
  refused(code: string, message: string): void {
    if (this.#done) return;
    const status = { code: SpanStatusCode.ERROR, message: `${code}: ${message}` };
    this.#admission?.setStatus(status);
    this.#span.setAttribute('error.type', code).setStatus(status);
    this.#close();
  }

  /**
   * Admission answered without queueing the task here (the same task was admitted before: a
   * client's retry): nothing more happens to it under these spans.
   */
  unrecorded(): void {
    if (this.#admission === undefined || this.#done) return;
    this.#admission.setAttribute('llorch.admitted_before', true);
    this.#close();
  }

  /** In the queue at `position`: admission ends, the queue wait starts. */
  queued(position: number): void {
    this.#admission?.setAttribute('llorch.queue_position', position).end();
    this.#admission = undefined;
    this.#queue ??= this.#tracer.startSpan('queue wait', { kind: SpanKind.INTERNAL }, this.#context);
  }

  /** Placed on `pool` of `node` for `reason` after `waitedMs` since admission; its dispatch starts now. */
  placed(node: string, pool: string, reason: string, waitedMs: number): void {
    this.#queue?.end();
    this.#queue = undefined;
    this.#span.setAttributes({ 'llorch.pool_id': pool, 'llorch.node_id': node, 'llorch.queue_wait_ms': waitedMs });
    const attributes = { 'llorch.pool_id': pool, 'llorch.node_id': node, 'llorch.placement.reason': reason };
    this.#tracer.startSpan('placement', { kind: SpanKind.INTERNAL, attributes }, this.#context).end();
  }

  /**
   * An attempt starts on `pool` of `node` at `address`: its `dispatch` span, and the headers that
   * make the node's spans its children (`resume`: a re-attach to a dispatch already running there).
   */
  attempt(node: string, pool: string, address: string, resume: boolean): Record<string, string> {
    this.#attempts += 1;
    this.#attempt?.end();
    const attributes: Attributes = {
      'llorch.pool_id': pool,
      'llorch.node_id': node,
      'llorch.attempt': this.#attempts,
      'server.address': address,
    };
    if (resume) attributes['llorch.resume'] = true;
    this.#attempt = this.#tracer.startSpan('dispatch', { kind: SpanKind.CLIENT, attributes }, this.#context);
    return injectTraceparent<Record<string, string>>({}, trace.setSpan(this.#context, this.#attempt));
  }

  /** The attempt ended without ending the task (it goes back in line, `code` says why). */
  attemptFailed(code: string, message: string): void {
    this.#attempt?.setStatus({ code: SpanStatusCode.ERROR, message: `${code}: ${message}` }).end();
    this.#attempt = undefined;
  }

  /** The first token, `ttftMs` after admission: an event on the task and on its attempt. */
  firstToken(ttftMs: number): void {
    this.#span.addEvent('first token').setAttribute('llorch.ttft_ms', ttftMs);
    this.#attempt?.addEvent('first token');
  }

  /** The terminal frame: the GenAI response attributes, the status, and every span still open ends. */
  ended(frame: SseFrame): void {
    if (this.#done) return;
    const attributes: Attributes = {};
    if (frame.event === 'end') {
      const end = frame.data;
      attributes['gen_ai.usage.output_tokens'] = end.tokens_out;
      if (end.prompt_tokens !== undefined) attributes['gen_ai.usage.input_tokens'] = end.prompt_tokens;
      if (end.cached_tokens !== undefined) attributes['llorch.usage.cached_tokens'] = end.cached_tokens;
      const reason = end.canceled === true ? 'cancel' : (end.finish_reason ?? end.stop_type);
      if (reason !== undefined) attributes['gen_ai.response.finish_reasons'] = [reason];
    }
    this.#span.setAttributes(attributes);
    if (this.#request?.isRecording() === true) this.#request.setAttributes(attributes);
    if (frame.event === 'error') {
      const status = { code: SpanStatusCode.ERROR, message: `${frame.data.code}: ${frame.data.message}` };
      this.#span.setAttribute('error.type', frame.data.code).setStatus(status);
      this.#attempt?.setStatus(status);
    }
    this.#close();
  }

  /** The task moved to replica `to` (it took it over while this one stalled): its spans end here. */
  movedAway(to: string): void {
    this.#span.setAttribute('llorch.moved_to', to);
    this.#close();
  }

  #close(): void {
    if (this.#done) return;
    this.#done = true;
    this.#admission?.end();
    this.#queue?.end();
    this.#attempt?.end();
    this.#admission = this.#queue = this.#attempt = undefined;
    this.#span.end();
  }
}
