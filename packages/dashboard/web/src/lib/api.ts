import type { KeyStore } from './key-store.js';

/** A non-2xx answer from orchestratord, with what its error body said. */
export class ApiError extends Error {
  override readonly name: string = 'ApiError';
  constructor(
    readonly status: number,
    /** The ErrorEnvelope `code` (or the OpenAI error's `code`), when the body had one. */
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** 401: no key, or a key orchestratord does not know. The page asks for one. */
export class UnauthorizedError extends ApiError {
  override readonly name = 'UnauthorizedError';
}

/** 403: the key is known but its role may not do this (e.g. a client key draining a pool). */
export class ForbiddenError extends ApiError {
  override readonly name = 'ForbiddenError';
}

/**
 * Reads an error body of either door: /v2's ErrorEnvelope `{code, message}` or /v1's
 * `{error: {message, code}}`. A body that is neither (a proxy's HTML page) becomes `HTTP <status>`.
 */
export async function errorFromResponse(res: Response): Promise<ApiError> {
  let code: string | undefined;
  let message = `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  const body: unknown = await res.json().catch(() => undefined);
  const fields = (o: unknown): void => {
    if (typeof o !== 'object' || o === null) return;
    const r = o as Record<string, unknown>;
    if (typeof r.message === 'string' && r.message) message = r.message;
    if (typeof r.code === 'string') code = r.code;
  };
  if (typeof body === 'object' && body !== null && 'error' in body) fields((body as { error: unknown }).error);
  else fields(body);
  const Cls = res.status === 401 ? UnauthorizedError : res.status === 403 ? ForbiddenError : ApiError;
  return new Cls(res.status, code, message);
}

export interface ApiClientOptions {
  keys: KeyStore;
  /** @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Prefix of every path (tests point it at a loopback server). @default '' (same origin) */
  baseUrl?: string;
}

/**
 * orchestratord over fetch: adds `Authorization: Bearer <key>` when a key is set, turns non-2xx
 * answers into typed errors, and tells its listeners about every 401 so the page shows the key
 * form whichever call hit it (the event stream, an action, the playground).
 */
export class ApiClient {
  readonly keys: KeyStore;
  readonly #fetch: typeof fetch;
  readonly #baseUrl: string;
  readonly #unauthorized = new Set<(err: UnauthorizedError) => void>();

  constructor(opts: ApiClientOptions) {
    this.keys = opts.keys;
    // bound: a browser's fetch throws "Illegal invocation" when called with another `this`
    this.#fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.#baseUrl = opts.baseUrl ?? '';
  }

  /** Calls `listener` on every 401; returns the unsubscribe function. */
  onUnauthorized(listener: (err: UnauthorizedError) => void): () => void {
    this.#unauthorized.add(listener);
    return () => this.#unauthorized.delete(listener);
  }

  /** The response of a 2xx answer; an ApiError (or subclass) otherwise. */
  async request(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    const key = this.keys.get();
    if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
    const res = await this.#fetch(`${this.#baseUrl}${path}`, { ...init, headers });
    if (res.ok) return res;
    const err = await errorFromResponse(res);
    if (err instanceof UnauthorizedError) for (const l of this.#unauthorized) l(err);
    throw err;
  }

  /** POSTs a JSON body; resolves with the parsed JSON answer. */
  async postJson(path: string, body: unknown, init: RequestInit = {}): Promise<unknown> {
    const res = await this.request(path, {
      ...init,
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
    });
    return res.status === 204 ? undefined : res.json();
  }
}
