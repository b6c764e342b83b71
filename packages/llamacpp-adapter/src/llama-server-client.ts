import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici';
import type { z } from 'zod';
import { toChatBody, toCompletionBody, type ChatInput, type CompletionInput } from './completion-body.js';
import { EngineErrorBodySchema, PropsReplySchema, SlotsReplySchema } from './engine-schemas.js';
import {
  AdapterError,
  ClientClosedError,
  CompletionAbortedError,
  EngineLoadingError,
  EngineProtocolError,
  EngineRejectedError,
  EngineUnreachableError,
  WorkerResetError,
} from './errors.js';
import { postForText, requestAnswer, type AnswerInput, type AnswerTransport, type EngineAnswer } from './answer.js';
import { callRequestOf, readCallAnswer } from './engine-call.js';
import type { EngineCall } from '@llama-orch/contracts';
import { pushEngineStream, type EventSink, type StreamErrors } from './push-stream.js';
import { ChatDecoder, CompletionDecoder } from './stream-events.js';

export type { EventSink } from './push-stream.js';

export type { CompletionEvent } from './stream-events.js';

/** A body `/infill` refuses (400) after its FIM check (reference: tools/server `post_infill`). */
const INFILL_PROBE = '{"input_prefix":"","input_suffix":"","input_extra":0}';

/**
 * Headers a caller adds to one engine request: a W3C `traceparent` (and `tracestate`), so the
 * request is part of the caller's trace. They never replace the client's own (content type, auth).
 */
export type RequestHeaders = Readonly<Record<string, string>>;

/** What `GET /health` says: `ready` (200), `loading` (503), `down` (no HTTP answer). */
export type EngineHealth = 'ready' | 'loading' | 'down';

/** Normalised `GET /props`. */
export interface EngineProps {
  /** Slots (`--parallel`). */
  total_slots: number;
  /** Context per slot, tokens (`default_generation_settings.n_ctx`). */
  n_ctx: number;
  /** Build identity, `b<build>-<commit>` (e.g. `b1-de3ff81`). */
  build_info: string;
  /** Loaded model file, when reported. */
  model_path?: string;
}

/** One entry of `GET /slots`. */
export interface EngineSlot {
  id: number;
  n_ctx: number;
  is_processing: boolean;
}

export interface LlamaServerClientOptions {
  /** Base URL of the engine, e.g. `http://127.0.0.1:39302`. */
  baseUrl: string;
  /**
   * undici dispatcher for every request. @default a private `Agent` owned (and closed) by the client.
   * Completion requests always ask for the socket to be closed after the response (`reset: true`):
   * llama-server closes it after a stream anyway, and a pooled dead socket would fail the next request.
   */
  dispatcher?: Dispatcher;
  /**
   * undici dispatcher for non-streamed answers (`answer()`), whose sockets are kept between
   * requests: llama-server keeps a connection open after a non-streamed response (it closes it only
   * after a stream), and a new connection per answer costs both processes a connect and a close.
   * Its idle sockets must close well before the engine's own 5 s keep-alive timeout.
   * @default a private `Agent` keeping idle sockets 2 s, owned (and closed) by the client.
   */
  answerDispatcher?: Dispatcher;
  /** Timeout of the small GET probes (health, props, slots, metrics), ms. @default 5000 */
  probeTimeoutMs?: number;
  /**
   * Longest wait for the completion response headers, ms. llama-server sends them only when a slot
   * starts the prompt, so this bounds queueing inside the engine. @default 300000
   */
  headersTimeoutMs?: number;
  /** Longest silence inside a completion body, ms. @default 300000 */
  bodyTimeoutMs?: number;
  /** Engine API key (`--api-key`), sent as Bearer; `/health` never needs it. */
  apiKey?: string;
}

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

function isConnectionError(err: unknown): boolean {
  const code = errorCode(err);
  if (code !== undefined && CONNECTION_ERROR_CODES.has(code)) return true;
  const cause = typeof err === 'object' && err !== null && 'cause' in err ? err.cause : undefined;
  return cause !== undefined && cause !== err && isConnectionError(cause);
}

function isAbort(err: unknown, signal: AbortSignal | undefined): boolean {
  return (
    signal?.aborted === true ||
    err instanceof undiciErrors.RequestAbortedError ||
    (err instanceof Error && err.name === 'AbortError')
  );
}

/** Idle sockets kept for answers: 2 s, under llama-server's 5 s keep-alive (undici also honours its `Keep-Alive` hint). */
export const ANSWER_KEEP_ALIVE_MS = 2000;

/** The keep-alive options of a dispatcher for non-streamed answers. */
export const ANSWER_KEEP_ALIVE = Object.freeze({
  keepAliveTimeout: ANSWER_KEEP_ALIVE_MS,
  keepAliveMaxTimeout: ANSWER_KEEP_ALIVE_MS,
});

function keptAliveAgent(): Agent {
  return new Agent({ connections: 64, ...ANSWER_KEEP_ALIVE });
}

/**
 * HTTP client of one llama-server (reference §4). Stateless apart from its dispatcher; one instance
 * per engine URL. `close()` is idempotent and closes only the dispatchers the client created.
 */
export class LlamaServerClient {
  readonly baseUrl: string;
  #state: 'open' | 'closed' = 'open';
  #closing: Promise<void> | undefined;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #answerDispatcher: Dispatcher;
  readonly #ownsAnswerDispatcher: boolean;
  readonly #probeTimeoutMs: number;
  readonly #headersTimeoutMs: number;
  readonly #bodyTimeoutMs: number;
  readonly #authHeader: Record<string, string>;

  constructor(options: LlamaServerClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? new Agent({ pipelining: 0, connections: 64 });
    this.#ownsAnswerDispatcher = options.answerDispatcher === undefined;
    this.#answerDispatcher = options.answerDispatcher ?? keptAliveAgent();
    this.#probeTimeoutMs = options.probeTimeoutMs ?? 5000;
    this.#headersTimeoutMs = options.headersTimeoutMs ?? 300_000;
    this.#bodyTimeoutMs = options.bodyTimeoutMs ?? 300_000;
    this.#authHeader = options.apiKey !== undefined ? { authorization: `Bearer ${options.apiKey}` } : {};
  }

  get state(): 'open' | 'closed' {
    return this.#state;
  }

  /** `GET /health`: 200 → `ready`, 503 → `loading`, no answer → `down`. Any other status throws. */
  async health(signal?: AbortSignal): Promise<EngineHealth> {
    let res: Dispatcher.ResponseData;
    try {
      res = await this.#get('/health', signal, false);
    } catch (err) {
      if (err instanceof EngineUnreachableError) return 'down';
      throw err;
    }
    const text = await res.body.text();
    if (res.statusCode === 200) return 'ready';
    if (res.statusCode === 503) return 'loading';
    throw new EngineProtocolError(`GET /health answered ${res.statusCode}`, {
      url: this.baseUrl,
      body: text.slice(0, 200),
    });
  }

  /** `GET /props`, normalised. 503 → {@link EngineLoadingError}. */
  async props(signal?: AbortSignal): Promise<EngineProps> {
    const reply = await this.#getJson('/props', PropsReplySchema, signal);
    return {
      total_slots: reply.total_slots,
      n_ctx: reply.default_generation_settings.n_ctx,
      build_info: reply.build_info,
      ...(reply.model_path !== undefined ? { model_path: reply.model_path } : {}),
    };
  }

  /** `GET /slots`: per-slot occupancy. */
  async slots(signal?: AbortSignal): Promise<EngineSlot[]> {
    const reply = await this.#getJson('/slots', SlotsReplySchema, signal);
    return reply.map((s) => ({ id: s.id, n_ctx: s.n_ctx, is_processing: s.is_processing }));
  }

  /**
   * `GET /metrics` (needs `--metrics`) as the engine's Prometheus text, or `undefined` when it runs
   * without `--metrics` (501). Each scrape resets the engine's windowed gauges (reference §4.7).
   */
  async metricsText(signal?: AbortSignal): Promise<string | undefined> {
    const res = await this.#get('/metrics', signal);
    const text = await res.body.text();
    if (res.statusCode === 501) return undefined;
    this.#throwForStatus(res.statusCode, text, '/metrics');
    return text;
  }

  /**
   * Streams `POST /completion` with the body of {@link toCompletionBody}: `token` events for every
   * frame with non-empty `content` (i from 0) and exactly one `end` from the `stop:true` frame (see
   * `CompletionDecoder`). Each event goes to `onEvent` as the body's chunks arrive, with no promise
   * or iterator between the socket and the callback. A promise returned by `onEvent` pauses the body
   * until it settles (back-pressure); its rejection ends the stream like an abort. Resolves once the
   * `end` event was handed over.
   *
   * Rejects with {@link EngineUnreachableError} (no connection), {@link EngineLoadingError} /
   * {@link EngineRejectedError} (JSON error before the stream, or an error frame),
   * {@link WorkerResetError} (body ended or broke without `stop:true`), {@link EngineProtocolError}
   * (unparseable frame), {@link CompletionAbortedError} (signal). An abort destroys the socket: that
   * is llama-server's cancel and frees the slot (reference §5). `headers` go with the request
   * ({@link RequestHeaders}). Performance notes: push engine stream.
   */
  completeInto(
    req: CompletionInput,
    onEvent: EventSink,
    signal?: AbortSignal,
    headers?: RequestHeaders,
  ): Promise<void> {
    return this.#streamInto(
      '/completion',
      toCompletionBody(req),
      new CompletionDecoder(this.baseUrl),
      onEvent,
      signal,
      headers,
    );
  }

  /**
   * Streams `POST /v1/chat/completions` with the body of {@link toChatBody}: the engine renders the
   * messages with the model's chat template. Events as `ChatDecoder` describes (content deltas as
   * tokens, one `end` built from the finish_reason and usage chunks at `[DONE]`); delivery, errors,
   * abort and cancel as {@link completeInto}, with a body ending before `[DONE]` as WorkerResetError.
   */
  chatInto(req: ChatInput, onEvent: EventSink, signal?: AbortSignal, headers?: RequestHeaders): Promise<void> {
    return this.#streamInto(
      '/v1/chat/completions',
      toChatBody(req),
      new ChatDecoder(this.baseUrl),
      onEvent,
      signal,
      headers,
    );
  }

  /**
   * One non-streamed answer from the engine's OpenAI route for the workload (`/v1/chat/completions`
   * or `/v1/completions`, `stream: false`): no event per token. See `requestAnswer` (answer.ts) for
   * its errors; aborting closes the socket (llama-server's cancel).
   */
  answer(input: AnswerInput, signal?: AbortSignal, headers?: RequestHeaders): Promise<EngineAnswer> {
    if (this.#state === 'closed') return Promise.reject(new ClientClosedError());
    return requestAnswer(this.#answerTransport(headers), input, signal);
  }

  /**
   * One answer from an engine route besides generation (`/v1/embeddings`, `/v1/rerank`, `/infill`
   * unstreamed): the call's body as it is, the engine's body back with its figures (engine-call.ts).
   * The errors of {@link answer}.
   */
  async call(call: EngineCall, signal?: AbortSignal, headers?: RequestHeaders): Promise<EngineAnswer> {
    if (this.#state === 'closed') throw new ClientClosedError();
    const { path, body } = callRequestOf(call);
    return readCallAnswer(
      call.kind,
      await postForText(this.#answerTransport(headers), path, body, signal),
      this.baseUrl,
    );
  }

  /** Streams `/infill` (`stream: true`): the same SSE and events as a `/completion` stream. */
  infillInto(
    body: Record<string, unknown>,
    onEvent: EventSink,
    signal?: AbortSignal,
    headers?: RequestHeaders,
  ): Promise<void> {
    return this.#streamInto(
      '/infill',
      { ...body, stream: true },
      new CompletionDecoder(this.baseUrl),
      onEvent,
      signal,
      headers,
    );
  }

  /**
   * Whether the loaded model can fill in the middle. `/props` does not say; `/infill` checks the
   * model's FIM tokens before it reads the body and answers 501 `not_supported_error` without them.
   * The probe's `input_extra` is not an array, so a model with them answers 400 for that field: no
   * task is created and the engine logs no server error.
   */
  async supportsInfill(signal?: AbortSignal): Promise<boolean> {
    if (this.#state === 'closed') throw new ClientClosedError();
    const timeout = AbortSignal.timeout(this.#probeTimeoutMs);
    const res = await request(`${this.baseUrl}/infill`, {
      method: 'POST',
      dispatcher: this.#dispatcher,
      headers: { 'content-type': 'application/json', ...this.#authHeader },
      body: INFILL_PROBE,
      signal: signal !== undefined ? AbortSignal.any([signal, timeout]) : timeout,
    }).catch((err: unknown) => {
      throw new EngineUnreachableError(
        `POST /infill on ${this.baseUrl} got no answer: ${(err as Error).message}`,
        { url: this.baseUrl },
        { cause: err },
      );
    });
    await res.body.dump();
    return res.statusCode !== 501 && res.statusCode !== 404;
  }

  #answerTransport(extra: RequestHeaders | undefined): AnswerTransport {
    return {
      // Answers keep their sockets (llama-server keeps a connection open after a non-streamed response).
      dispatcher: this.#answerDispatcher,
      baseUrl: this.baseUrl,
      headers: { ...extra, 'content-type': 'application/json', ...this.#authHeader },
      headersTimeoutMs: this.#headersTimeoutMs,
      bodyTimeoutMs: this.#bodyTimeoutMs,
      statusError: (status, text, path) => this.#statusError(status, text, path),
    };
  }

  /** The error for a non-200 answer to a POST (the engine's JSON error when it sent one). */
  #statusError(status: number, text: string, path: string): Error {
    try {
      this.#throwForStatus(status, text, path);
    } catch (err) {
      return err as Error;
    }
    return new EngineProtocolError(`POST ${path} answered ${status}`, { url: this.baseUrl });
  }

  /** What a broken or aborted body becomes. */
  #bodyError(err: unknown, signal: AbortSignal | undefined): Error {
    if (err instanceof AdapterError) return err;
    if (isAbort(err, signal)) return new CompletionAbortedError({ url: this.baseUrl }, { cause: err });
    return new WorkerResetError(
      `llama-server stream broke: ${(err as Error).message}`,
      { url: this.baseUrl },
      { cause: err },
    );
  }

  #streamInto(
    path: string,
    payload: object,
    decoder: CompletionDecoder | ChatDecoder,
    onEvent: EventSink,
    signal: AbortSignal | undefined,
    extra: RequestHeaders | undefined,
  ): Promise<void> {
    if (this.#state === 'closed') return Promise.reject(new ClientClosedError());
    const url = new URL(`${this.baseUrl}${path}`);
    const errors: StreamErrors = {
      status: (status, text) => this.#statusError(status, text, path),
      beforeHeaders: (err) => {
        if (isAbort(err, signal)) return new CompletionAbortedError({ url: this.baseUrl }, { cause: err });
        if (isConnectionError(err))
          return new EngineUnreachableError(
            `llama-server at ${this.baseUrl} unreachable: ${err.message}`,
            { url: this.baseUrl },
            { cause: err },
          );
        return err;
      },
      body: (err) => this.#bodyError(err, signal),
      aborted: (reason) => new CompletionAbortedError({ url: this.baseUrl }, { cause: reason }),
    };
    return pushEngineStream({
      dispatcher: this.#dispatcher,
      options: {
        origin: url.origin,
        path: url.pathname,
        method: 'POST',
        headers: { ...extra, 'content-type': 'application/json', accept: 'text/event-stream', ...this.#authHeader },
        body: JSON.stringify(payload),
        // Never reuse this socket: the engine closes it after a stream (pitfall 9).
        reset: true,
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: this.#bodyTimeoutMs,
      },
      decoder,
      onEvent,
      signal,
      errors,
    });
  }

  /** Idempotent; closes the dispatcher only when this client created it. */
  close(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    this.#state = 'closed';
    const owned = [
      ...(this.#ownsDispatcher ? [this.#dispatcher] : []),
      ...(this.#ownsAnswerDispatcher ? [this.#answerDispatcher] : []),
    ];
    this.#closing = Promise.all(owned.map((d) => d.destroy())).then(() => undefined);
    return this.#closing;
  }

  async #get(path: string, signal: AbortSignal | undefined, auth = true): Promise<Dispatcher.ResponseData> {
    if (this.#state === 'closed') throw new ClientClosedError();
    const timeout = AbortSignal.timeout(this.#probeTimeoutMs);
    const combined = signal !== undefined ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      return await request(`${this.baseUrl}${path}`, {
        method: 'GET',
        dispatcher: this.#dispatcher,
        headers: auth ? { ...this.#authHeader } : {},
        signal: combined,
      });
    } catch (err) {
      if (signal?.aborted === true) throw err;
      if (timeout.aborted || isConnectionError(err)) {
        throw new EngineUnreachableError(
          `GET ${path} on ${this.baseUrl} got no answer: ${(err as Error).message}`,
          { url: this.baseUrl },
          { cause: err },
        );
      }
      throw err;
    }
  }

  async #getJson<S extends z.ZodType>(path: string, schema: S, signal: AbortSignal | undefined): Promise<z.infer<S>> {
    const res = await this.#get(path, signal);
    const text = await res.body.text();
    this.#throwForStatus(res.statusCode, text, path);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new EngineProtocolError(`GET ${path} did not return JSON`, { url: this.baseUrl }, { cause: err });
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success)
      throw new EngineProtocolError(
        `GET ${path} returned an unexpected shape`,
        { url: this.baseUrl },
        { cause: parsed.error },
      );
    return parsed.data;
  }

  #throwForStatus(status: number, text: string, path: string): void {
    if (status >= 200 && status < 300) return;
    let message = `${path} answered ${status}`;
    let type: string | undefined;
    try {
      const parsed = EngineErrorBodySchema.safeParse(JSON.parse(text));
      if (parsed.success) {
        message = parsed.data.error.message;
        type = parsed.data.error.type;
      }
    } catch {
      // Not JSON: keep the status line as the message; the raw text goes into the context.
    }
    if (status === 503) throw new EngineLoadingError(message, { url: this.baseUrl, path });
    throw new EngineRejectedError(status, type, message, { url: this.baseUrl, path, body: text.slice(0, 500) });
  }
}
