import {
  DispatchEventSchema, ErrorEnvelopeSchema, type DispatchEvent, type DispatchRequest, type ErrorEnvelope,
} from '@llama-orch/contracts';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';

/**
 * HTTP client for pool-managerd (the only way orchestratord reaches engines). Takes an injected
 * undici dispatcher. Every reply is parsed with the contracts schemas.
 *
 * Dispatch contract: `POST <node>/v2/pools/{id}/completions` (Bearer) with a DispatchRequest;
 * 200 `application/x-ndjson`, one DispatchEvent per line, ending with exactly one `end` or `error`
 * (a body that ends without one means the worker was lost); 503 POOL_UNREADY before streaming
 * when the pool has no free slot. Aborting the signal closes the socket, which cancels the engine
 * request and frees its slot on the node.
 */

/** The node could not be reached or the connection broke before a status line. */
export class UpstreamConnectError extends Error {
  override readonly name = 'UpstreamConnectError';
  readonly code = 'UPSTREAM_CONNECT';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The event stream broke or carried something that is not a DispatchEvent. */
export class UpstreamStreamError extends Error {
  override readonly name = 'UpstreamStreamError';
  readonly code = 'UPSTREAM_STREAM';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export type DispatchStart =
  | { readonly kind: 'stream'; readonly body: Readable }
  | { readonly kind: 'rejected'; readonly status: number; readonly envelope: ErrorEnvelope | undefined };

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
  /** HTTP/1.1 dispatcher: drain/reload, and dispatches that do not go over h2c. */
  dispatcher: Dispatcher;
  /** Dispatcher for h2c URLs (undici `H2CClient`s); without it every dispatch uses HTTP/1.1. */
  h2cDispatcher?: Dispatcher | undefined;
  /**
   * Dispatches in flight to one node over HTTP/1.1 before further ones go over its h2c URL.
   * HTTP/1.1 reaches the node ~0.5 ms sooner per dispatch here (Node's HTTP/2 costs more per
   * request on both sides), but holds a socket per task; past this many, the node's tasks share
   * one HTTP/2 connection. 0 = h2c whenever offered. @default 8
   */
  http1PerNode?: number;
  /** Bearer token sent to nodes; absent = no Authorization header. */
  token?: string | undefined;
  /** Timeout for drain/reload replies, ms. @default 10000 */
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

/**
 * Reads a node's NDJSON event stream with push callbacks: `onEvent` gets every parsed event in
 * order and returns false to stop reading (the body is destroyed, which closes the upstream
 * request). Resolves when the body ended or reading stopped; rejects with
 * {@link UpstreamStreamError} when the stream breaks or carries something that is not a
 * DispatchEvent. Push rather than an async iterator: per token, that chain of promises and
 * generator results was most of the relay's allocations with thousands of streams open.
 */
export function readDispatchEvents(body: Readable, onEvent: (ev: DispatchEvent) => boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const decoder = new TextDecoder();
    let buffered = '';
    let settled = false;
    const settle = (err?: UpstreamStreamError): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      body.off('close', onClose);
      if (err === undefined) resolve();
      else reject(err);
    };
    const stop = (err?: UpstreamStreamError): void => {
      settle(err);
      body.on('error', () => undefined); // destroy() may still report the abort
      body.destroy();
    };
    const line = (text: string): boolean => {
      const trimmed = text.trim();
      if (trimmed === '') return true;
      let json: unknown;
      try {
        json = JSON.parse(trimmed);
      } catch (err) {
        stop(new UpstreamStreamError('node sent a line that is not JSON', { cause: err }));
        return false;
      }
      const parsed = DispatchEventSchema.safeParse(json);
      if (!parsed.success) {
        stop(new UpstreamStreamError(`node sent an invalid dispatch event: ${parsed.error.issues[0]?.message ?? 'invalid'}`));
        return false;
      }
      if (!onEvent(parsed.data)) {
        stop();
        return false;
      }
      return true;
    };
    const onData = (chunk: Buffer | string): void => {
      buffered += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
      let start = 0;
      let nl = buffered.indexOf('\n');
      while (nl >= 0) {
        if (!line(buffered.slice(start, nl))) return;
        start = nl + 1;
        nl = buffered.indexOf('\n', start);
      }
      buffered = start === 0 ? buffered : buffered.slice(start);
    };
    const onEnd = (): void => {
      const rest = buffered + decoder.decode();
      if (rest.trim() !== '' && !line(rest)) return;
      settle();
    };
    const onError = (err: Error): void => settle(new UpstreamStreamError('event stream from node broke', { cause: err }));
    // Destroyed without an error (and without its end): broken all the same.
    const onClose = (): void => settle(new UpstreamStreamError('event stream from node closed before its end'));
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('error', onError);
    body.on('close', onClose);
  });
}

export class PoolClient {
  readonly #opts: PoolClientOptions;
  readonly #acceptTimeoutMs: number;
  readonly #http1PerNode: number;
  /** HTTP/1.1 dispatches in flight per node URL (headers sent, body not yet ended). */
  readonly #http1InFlight = new Map<string, number>();

  constructor(options: PoolClientOptions) {
    this.#opts = options;
    this.#acceptTimeoutMs = options.acceptTimeoutMs ?? 5000;
    this.#http1PerNode = options.http1PerNode ?? 8;
  }

  /** HTTP/1.1 dispatches in flight to the node at `url` (for tests and the protocol choice). */
  http1InFlight(url: string): number {
    return this.#http1InFlight.get(url) ?? 0;
  }

  #http1Done(url: string): void {
    const n = (this.#http1InFlight.get(url) ?? 1) - 1;
    if (n > 0) this.#http1InFlight.set(url, n);
    else this.#http1InFlight.delete(url);
  }

  #headers(): Record<string, string> {
    const h: Record<string, string> = { 'content-type': 'application/json', accept: 'application/x-ndjson, application/json' };
    if (this.#opts.token !== undefined) h.authorization = `Bearer ${this.#opts.token}`;
    return h;
  }

  /** Starts a completion on a node. Throws {@link UpstreamConnectError} when no response arrives. */
  async dispatch(node: DispatchTarget, poolId: string, body: DispatchRequest, signal: AbortSignal): Promise<DispatchStart> {
    const h2c = node.h2c !== undefined && this.#opts.h2cDispatcher !== undefined && this.http1InFlight(node.url) >= this.#http1PerNode;
    const address = h2c ? node.h2c as string : node.url;
    const target = join(address, `/v2/pools/${encodeURIComponent(poolId)}/completions`);
    const dispatcher = h2c ? this.#opts.h2cDispatcher as Dispatcher : this.#opts.dispatcher;
    if (!h2c) this.#http1InFlight.set(node.url, this.http1InFlight(node.url) + 1);
    // The accept timeout is a timer of ours: undici's headersTimeout runs on its coarse timers over
    // HTTP/1.1 (500 ms ticks: a 1 s timeout fired after ~1.5 s, half an interval of failover).
    const request = new AbortController();
    let notAccepted = false;
    const timer = setTimeout(() => {
      notAccepted = true;
      request.abort(new Error(`no response headers within ${this.#acceptTimeoutMs} ms`));
    }, this.#acceptTimeoutMs);
    const forward = (): void => request.abort(signal.reason);
    if (signal.aborted) forward();
    else signal.addEventListener('abort', forward, { once: true });
    const settle = (): void => {
      signal.removeEventListener('abort', forward);
      if (!h2c) this.#http1Done(node.url);
    };
    let res: Dispatcher.ResponseData;
    try {
      res = await dispatcher.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        // undici holds a non-idempotent request back until the connection's other requests are
        // done, which would serialise every HTTP/2 stream to a node. A dispatch is never retried
        // by undici (no retry interceptor), so marking it idempotent changes only that.
        idempotent: h2c,
        headers: this.#headers(),
        body: JSON.stringify(body),
        signal: request.signal,
        // The node answers headers at once (the timer above bounds that); prompt processing comes
        // after them, so the task deadline alone bounds the body.
        headersTimeout: 0,
        bodyTimeout: 0,
      });
    } catch (err) {
      settle();
      if (signal.aborted) throw err;
      const why = notAccepted
        ? `did not accept the dispatch within ${this.#acceptTimeoutMs} ms (frozen or overloaded)`
        : `unreachable: ${(err as Error).message}`;
      throw new UpstreamConnectError(`node ${address} ${why}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    res.body.once('close', settle);
    if (res.statusCode !== 200) {
      const text = await res.body.text().catch(() => '');
      let envelope: ErrorEnvelope | undefined;
      try {
        const parsed = ErrorEnvelopeSchema.safeParse(JSON.parse(text));
        if (parsed.success) envelope = parsed.data;
      } catch {
        envelope = undefined; // not JSON: the status alone decides
      }
      return { kind: 'rejected', status: res.statusCode, envelope };
    }
    return { kind: 'stream', body: res.body };
  }

  /** Forwards drain/reload to the owning node; relays its status and JSON body. */
  async operation(address: string, poolId: string, op: 'drain' | 'reload', body: unknown): Promise<PoolOperationReply> {
    const target = join(address, `/v2/pools/${encodeURIComponent(poolId)}/${op}`);
    const timeout = this.#opts.operationTimeoutMs ?? 10_000;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.#opts.dispatcher.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: this.#headers(),
        body: JSON.stringify(body),
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal: AbortSignal.timeout(timeout),
      });
    } catch (err) {
      throw new UpstreamConnectError(`node ${address} unreachable: ${(err as Error).message}`, { cause: err });
    }
    const text = await res.body.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch (err) {
      throw new UpstreamStreamError(`node answered ${op} with a non-JSON body (status ${res.statusCode})`, { cause: err });
    }
    return { status: res.statusCode, body: json };
  }
}
