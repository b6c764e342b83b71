import { request, type Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';

export interface JsonReply<T = unknown> {
  status: number;
  body: T;
  headers: Record<string, string | string[] | undefined>;
}

/** One JSON request (Bearer when a token is given); never throws on a status, only on transport errors. */
export async function httpJson<T = unknown>(
  method: 'GET' | 'POST' | 'DELETE',
  url: string,
  opts: { token?: string | undefined; body?: unknown; dispatcher?: Dispatcher; signal?: AbortSignal } = {},
): Promise<JsonReply<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(url, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    ...(opts.dispatcher !== undefined ? { dispatcher: opts.dispatcher } : {}),
    ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
  });
  const text = await res.body.text();
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.statusCode, body: body as T, headers: res.headers };
}

/** Like {@link httpJson} but throws unless the status is the expected one. */
export async function expectJson<T = unknown>(
  method: 'GET' | 'POST' | 'DELETE',
  url: string,
  status: number,
  opts: { token?: string | undefined; body?: unknown; dispatcher?: Dispatcher } = {},
): Promise<T> {
  const reply = await httpJson<T>(method, url, opts);
  if (reply.status !== status) {
    throw new UnexpectedResponseError(
      `${method} ${url} answered ${reply.status} (expected ${status}): ${JSON.stringify(reply.body).slice(0, 500)}`,
    );
  }
  return reply.body;
}
