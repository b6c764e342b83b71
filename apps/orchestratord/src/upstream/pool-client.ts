import {
  CORRELATION_ID_HEADER,
  ErrorEnvelopeSchema,
  type DispatchRequest,
  type ErrorEnvelope,
  type PoolLoadRequest,
} from '@llama-orch/contracts';
import type { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import type { Dispatcher } from 'undici';
import type { AttemptAbort } from './attempt-abort.js';
import { streamRequest, type StreamResponse } from './stream-request.js';
import {
  DispatchGoneError,
  DispatchInvalidError,
  PoolRefusedError,
  PoolSaturatedError,
  UpstreamConnectError,
  UpstreamStreamError,
  type DispatchFailure,
} from './upstream-errors.js';

/**
 * HTTP client for pool-managerd (the only way orchestratord reaches engines). Takes injected
 * undici dispatchers. Every reply is parsed with the contracts schemas.
 *
 * Dispatch contract: `POST <node>/v2/pools/{id}/completions` (Bearer, `X-Correlation-Id`) with a
 * DispatchRequest; 200 `application/x-ndjson`, one DispatchEvent per line, ending with exactly one
 * `end` or `error` (a body that ends without one means the worker was lost); 503 POOL_UNREADY or
 * REPLICA_EXHAUSTED before streaming when the pool has no free slot. Aborting the dispatch's
 * {@link AttemptAbort} closes the request (its HTTP/2 stream or HTTP/1.1 socket), which cancels the
 * engine request and frees its slot on the node — unless the dispatch carries `reattach_ms`: then
 * the node keeps it generating for that long, and another replica can take it over with
 * {@link PoolClient.reattach} (`GET …/dispatches/{task_id}?after=<i>`) or cancel it with
 * {@link PoolClient.cancelDispatch} (`DELETE …/dispatches/{task_id}`).
 */

/** W3C trace-context headers (`traceparent`, `tracestate`) sent with a dispatch, with tracing on. */
export type TraceHeaders = Readonly<Record<string, string>>;
export interface PoolOperationReply {
  readonly status: number;
  readonly body: unknown;
}

/**
 * Where a node takes dispatches: `url` over HTTP/1.1 (a kept connection per task in flight), and,
 * when the node offers one, `h2c`, which multiplexes any number of tasks over one HTTP/2 connection.
 */
export interface DispatchTarget {
  readonly url: string;
  readonly h2c?: string | undefined;
}

export interface PoolClientOptions {
  /** HTTP/1.1 dispatcher: drain/reload, loads and unloads, and dispatches that do not go over h2c. */
  dispatcher: Dispatcher;
  /** Dispatcher for h2c URLs (undici `H2CClient`s); without it every dispatch uses HTTP/1.1. */
  h2cDispatcher?: Dispatcher | undefined;
  /**
   * Dispatches in flight to one node over HTTP/1.1 before further ones go over its h2c URL (see
   * {@link ProtocolChoice}). 0 = h2c whenever offered. @default 8
   */
  http1PerNode?: number;
  /** Bearer token sent to nodes; absent = no Authorization header. */
  token?: string | undefined;
  /** Timeout for drain/reload, load and unload replies, ms. @default 10000 */
  operationTimeoutMs?: number;
  /**
   * How long a node may take to send a dispatch's response headers, ms. pool-managerd answers before
   * it contacts the engine, so only a frozen or unreachable node is this slow. @default 5000
   */
  acceptTimeoutMs?: number;
}

function join(address: string, path: string): { origin: string; path: string } {
  const url = new URL(address);
  const base = url.pathname.replace(/\/+$/, '');
  return { origin: url.origin, path: `${base}${path}` };
}

/** A node's 503 that only says it has no free slot (no envelope counts as one). */
function isSaturated(status: number, envelope: ErrorEnvelope | undefined): boolean {
  const code = envelope?.code;
  return status === 503 && (code === undefined || code === 'POOL_UNREADY' || code === 'REPLICA_EXHAUSTED');
}

/** The one place a node's non-200 answer to a dispatch is read: its status becomes a failure class. */
function rejection(status: number, envelope: ErrorEnvelope | undefined): DispatchFailure {
  const message = envelope?.message ?? `node answered ${status}`;
  if (isSaturated(status, envelope)) return new PoolSaturatedError(message);
  if (status === 400 || status === 413) return new DispatchInvalidError(envelope?.code ?? 'INVALID_PARAMS', message);
  return new PoolRefusedError(status === 503 ? (envelope?.code ?? 'POOL_UNAVAILABLE') : 'POOL_UNAVAILABLE', message);
}

/**
 * HTTP/1.1 first, h2c past a share. A dispatch reaches pool-managerd ~0.5 ms sooner over a kept
 * HTTP/1.1 connection (Node's HTTP/2 costs more per request at both ends), but each holds a
 * socket; past `perNode` in flight to one node, its further dispatches share one HTTP/2
 * connection. Counts a dispatch from its request until its response body closes.
 */
class ProtocolChoice {
  readonly #perNode: number;
  readonly #inFlight = new Map<string, number>();

  constructor(perNode: number) {
    this.#perNode = perNode;
  }

  /** HTTP/1.1 dispatches in flight to the node at `url`. */
  count(url: string): number {
    return this.#inFlight.get(url) ?? 0;
  }

  /** Whether the next dispatch to `node` goes over h2c (only when it offers h2c and we can speak it). */
  useH2c(node: DispatchTarget, h2cAvailable: boolean): boolean {
    return node.h2c !== undefined && h2cAvailable && this.count(node.url) >= this.#perNode;
  }

  started(url: string): void {
    this.#inFlight.set(url, this.count(url) + 1);
  }

  done(url: string): void {
    const n = (this.#inFlight.get(url) ?? 1) - 1;
    if (n > 0) this.#inFlight.set(url, n);
    else this.#inFlight.delete(url);
  }
}

export class PoolClient {
  readonly #dispatcher: Dispatcher;
  readonly #h2cDispatcher: Dispatcher | undefined;
  /** `Bearer <token>`, made once: undici keeps each request's header values for the whole stream. */
  readonly #authorization: string | undefined;
  readonly #operationTimeoutMs: number;
  readonly #acceptTimeoutMs: number;
  readonly #protocol: ProtocolChoice;

  constructor({
    dispatcher,
    h2cDispatcher,
    http1PerNode = 8,
    token,
    operationTimeoutMs = 10_000,
    acceptTimeoutMs = 5000,
  }: PoolClientOptions) {
    this.#dispatcher = dispatcher;
    this.#h2cDispatcher = h2cDispatcher;
    this.#authorization = token === undefined ? undefined : `Bearer ${token}`;
    this.#operationTimeoutMs = operationTimeoutMs;
    this.#acceptTimeoutMs = acceptTimeoutMs;
    this.#protocol = new ProtocolChoice(http1PerNode);
  }

  /** HTTP/1.1 dispatches in flight to the node at `url` (for tests and the protocol choice). */
  http1InFlight(url: string): number {
    return this.#protocol.count(url);
  }

  /** `json`: the request has a JSON body (a DELETE must not say so: Fastify refuses an empty JSON body). */
  #headers(correlationId?: string, json = true, trace?: TraceHeaders): Record<string, string> {
    const h: Record<string, string> = json
      ? { 'content-type': 'application/json', accept: 'application/x-ndjson, application/json' }
      : { accept: 'application/x-ndjson, application/json' };
    if (this.#authorization !== undefined) h.authorization = this.#authorization;
    if (correlationId !== undefined) h[CORRELATION_ID_HEADER] = correlationId;
    if (trace !== undefined) Object.assign(h, trace);
    return h;
  }

  /**
   * Starts a completion on a node and resolves with its event stream (read it with
   * `readDispatchEvents`). `controller` is the dispatch's own abort switch: aborting it closes the
   * request (and so cancels the engine's work). Rejects with a {@link DispatchFailure}: {@link UpstreamConnectError}
   * when the node is unreachable or sends no response headers within the accept timeout (then
   * `controller` is aborted with that error as its reason, which is what stops the request),
   * {@link PoolSaturatedError}, {@link DispatchInvalidError} or {@link PoolRefusedError} for a non-200
   * answer; with the caller's abort reason when the caller aborted `controller`.
   * `correlationId` goes out as `X-Correlation-Id`, so the node's lines about the dispatch carry it;
   * `trace` (with tracing on: the attempt span's `traceparent`) makes the node's spans its children.
   */
  async dispatch(
    node: DispatchTarget,
    poolId: string,
    body: DispatchRequest,
    controller: AttemptAbort,
    correlationId?: string,
    trace?: TraceHeaders,
  ): Promise<Readable> {
    return this.#stream(
      node,
      `/v2/pools/${encodeURIComponent(poolId)}/completions`,
      dispatchBody(body),
      controller,
      correlationId,
      rejection,
      trace,
    );
  }

  /**
   * Re-attaches to a re-attachable dispatch (one sent with `reattach_ms`) of `taskId` on the node:
   * resolves with its event stream (read it with `readDispatchEvents`): the token events with
   * `i > after` (-1: all of them) the node holds, then the live ones, then one `end` or `error`.
   * A connection still attached to it (a replica that is gone, or not) is ended by the node, without
   * cancelling the generation. The same protocol choice, accept timeout, abort and rejections as
   * {@link dispatch}, but a 404 rejects with {@link DispatchGoneError}: the node holds no such
   * dispatch (unknown, already delivered, cancelled, or its window passed).
   */
  async reattach(
    node: DispatchTarget,
    poolId: string,
    taskId: string,
    after: number,
    controller: AttemptAbort,
    correlationId?: string,
    trace?: TraceHeaders,
  ): Promise<Readable> {
    const path = `/v2/pools/${encodeURIComponent(poolId)}/dispatches/${encodeURIComponent(taskId)}?after=${after < 0 ? -1 : Math.floor(after)}`;
    return this.#stream(
      node,
      path,
      undefined,
      controller,
      correlationId,
      (status, envelope) =>
        status === 404
          ? new DispatchGoneError(poolId, taskId, envelope?.message ?? `node holds no dispatch of task ${taskId}`)
          : rejection(status, envelope),
      trace,
    );
  }

  /**
   * Cancels a re-attachable dispatch of `taskId` on the node (`DELETE`): the engine request is
   * aborted and an attached connection gets `end` with `stop_type: cancel`. Bounded by the
   * operation timeout. Resolves true on 204, false on 404 (not held: unknown, delivered, already
   * cancelled or its window passed); rejects with {@link UpstreamConnectError} when the node cannot
   * be reached or does not answer in time, and with the dispatch's rejection classes for another
   * status (a refused token, a malformed id). Callers may ignore a rejection: the node's window
   * bounds the generation anyway.
   */
  async cancelDispatch(node: DispatchTarget, poolId: string, taskId: string, correlationId?: string): Promise<boolean> {
    const res = await this.#bounded(
      node.url,
      `/v2/pools/${encodeURIComponent(poolId)}/dispatches/${encodeURIComponent(taskId)}`,
      'DELETE',
      this.#headers(correlationId, false),
    );
    if (res.statusCode === 204 || res.statusCode === 404) {
      await res.body.dump();
      return res.statusCode === 204;
    }
    throw rejection(res.statusCode, await envelopeOf(res.body));
  }

  /**
   * One NDJSON stream from a node: a dispatch (POST with `body`) or a re-attach (GET). Resolves
   * with the body once the node answered 200; see {@link dispatch} for the accept timeout, the
   * abort and the rejections (`reject` maps a non-200 answer).
   */
  async #stream(
    node: DispatchTarget,
    path: string,
    body: Buffer | undefined,
    controller: AttemptAbort,
    correlationId: string | undefined,
    reject: (status: number, envelope: ErrorEnvelope | undefined) => DispatchFailure,
    trace?: TraceHeaders,
  ): Promise<Readable> {
    const h2c = this.#protocol.useH2c(node, this.#h2cDispatcher !== undefined);
    const address = h2c ? (node.h2c as string) : node.url;
    const target = join(address, path);
    const dispatcher = h2c ? (this.#h2cDispatcher as Dispatcher) : this.#dispatcher;
    if (!h2c) this.#protocol.started(node.url);
    // Performance notes: one abort switch per dispatch (the deadline aborts the caller's).
    const accept = setTimeout(abortUnaccepted, this.#acceptTimeoutMs, controller, address, this.#acceptTimeoutMs);
    let res: StreamResponse;
    try {
      res = await streamRequest(
        dispatcher,
        {
          origin: target.origin,
          path: target.path,
          method: body === undefined ? 'GET' : 'POST',
          // undici holds a non-idempotent request back until the connection's other requests are
          // done, which would serialise every HTTP/2 stream to a node. A dispatch is never retried
          // by undici (no retry interceptor), so marking it idempotent changes only that.
          idempotent: h2c || body === undefined,
          headers: this.#headers(correlationId, body !== undefined, trace),
          body: body ?? null,
          // The node answers headers at once (the accept deadline bounds that); prompt processing
          // comes after them, so the task deadline alone bounds the body.
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        controller,
      );
    } catch (err) {
      if (!h2c) this.#protocol.done(node.url);
      if (controller.aborted) throw controller.reason instanceof UpstreamConnectError ? controller.reason : err;
      throw new UpstreamConnectError(`node ${address} unreachable: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(accept);
    }
    // Only HTTP/1.1 dispatches are counted (an h2c stream needs no listener of ours).
    if (!h2c) res.body.once('close', () => this.#protocol.done(node.url));
    if (res.statusCode !== 200) throw reject(res.statusCode, await envelopeOf(res.body));
    return res.body;
  }

  /** A short request to a node over HTTP/1.1, bounded by the operation timeout; an unreachable node is an {@link UpstreamConnectError}. */
  async #bounded(
    address: string,
    path: string,
    method: 'POST' | 'DELETE',
    headers: Record<string, string>,
    body?: string,
  ): Promise<Dispatcher.ResponseData> {
    const target = join(address, path);
    const timeout = this.#operationTimeoutMs;
    try {
      return await this.#dispatcher.request({
        origin: target.origin,
        path: target.path,
        method,
        headers,
        ...(body === undefined ? {} : { body }),
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal: AbortSignal.timeout(timeout),
      });
    } catch (err) {
      throw new UpstreamConnectError(`node ${address} unreachable: ${(err as Error).message}`, { cause: err });
    }
  }

  /** Forwards drain/reload to the owning node; relays its status and JSON body. */
  async operation(address: string, poolId: string, op: 'drain' | 'reload', body: unknown): Promise<PoolOperationReply> {
    const res = await this.#bounded(
      address,
      `/v2/pools/${encodeURIComponent(poolId)}/${op}`,
      'POST',
      this.#headers(),
      JSON.stringify(body),
    );
    return reply(res, op);
  }

  /** `POST <node>/v2/pools`: asks the node to start a pool for a catalog model; its status and JSON body (202 PoolStatus, or an envelope). */
  async loadPool(address: string, body: PoolLoadRequest): Promise<PoolOperationReply> {
    const res = await this.#bounded(address, '/v2/pools', 'POST', this.#headers(), JSON.stringify(body));
    return reply(res, 'load');
  }

  /** `DELETE <node>/v2/pools/{id}?deadline_ms=`: asks the node to drain and remove a pool it loaded for the catalog. */
  async unloadPool(address: string, poolId: string, deadlineMs: number): Promise<PoolOperationReply> {
    const path = `/v2/pools/${encodeURIComponent(poolId)}?deadline_ms=${Math.max(0, Math.round(deadlineMs))}`;
    const res = await this.#bounded(address, path, 'DELETE', this.#headers(undefined, false));
    return reply(res, 'unload');
  }
}

/** A node's answer to an operation: its status and JSON body (none when empty). */
async function reply(res: Dispatcher.ResponseData, op: string): Promise<PoolOperationReply> {
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch (err) {
    throw new UpstreamStreamError(`node answered ${op} with a non-JSON body (status ${res.statusCode})`, {
      cause: err,
    });
  }
  return { status: res.statusCode, body: json };
}

/** A non-200 answer's ErrorEnvelope, when it is one (otherwise the status alone decides). */
async function envelopeOf(body: Readable): Promise<ErrorEnvelope | undefined> {
  const answer = await text(body).catch(() => '');
  try {
    const parsed = ErrorEnvelopeSchema.safeParse(JSON.parse(answer));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // not JSON
  }
}

/**
 * The dispatch's accept timeout, on a timer of ours: undici's `headersTimeout` runs on its coarse
 * timers over HTTP/1.1 (500 ms ticks), so it fires up to half a tick late. This one fires within a
 * few ms of `timeoutMs` (pool-client.test.ts holds it to [1000, 1300) ms for 1 s). It aborts the
 * dispatch's own switch rather than a second one that forwards the caller's abort, which would be
 * kept (with its listener) for as long as the stream lasts. A plain function with `setTimeout`
 * arguments: nothing is allocated for it beyond the timer.
 */
function abortUnaccepted(controller: AttemptAbort, address: string, timeoutMs: number): void {
  if (controller.aborted) return;
  controller.abort(
    new UpstreamConnectError(
      `node ${address} did not accept the dispatch within ${timeoutMs} ms (frozen or overloaded)`,
    ),
  );
}

/**
 * The request body as a Buffer of its own. undici keeps a request's body for the request's whole
 * life, which for a dispatch is the whole token stream; a string body becomes a slice of Buffer's
 * shared 8 KB pool, and one live slice keeps its whole slab. Performance notes: dispatch body
 * unpooled.
 */
export function dispatchBody(body: DispatchRequest): Buffer {
  const text = JSON.stringify(body);
  const buf = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  buf.write(text);
  return buf;
}
