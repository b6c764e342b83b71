import { ErrorEnvelopeSchema, formatIssues } from '@llama-orch/contracts';
import { request, type Dispatcher } from 'undici';
import type { z } from 'zod';
import { CliError } from './errors.js';

/** Where orchestratord is and how to authenticate; from flags, else env, else defaults. */
export interface Target {
  url: string;
  token: string | undefined;
  dispatcher?: Dispatcher;
}

export function authHeaders(target: Target): Record<string, string> {
  return target.token ? { authorization: `Bearer ${target.token}` } : {};
}

/** One request; a connection failure becomes a CliError that says how to start the cluster. */
async function send(
  target: Target,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  try {
    const res = await request(new URL(path, target.url), {
      method,
      headers: { ...authHeaders(target), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: target.dispatcher,
    });
    return { status: res.statusCode, text: await res.body.text() };
  } catch (err) {
    throw new CliError(
      `cannot reach orchestratord at ${target.url}: ${(err as Error).message} (is the cluster up? \`llorch up\`)`,
    );
  }
}

/** Non-2xx → CliError with the envelope's code and message (or the status and the body's start). */
function failure(method: string, path: string, status: number, text: string): CliError {
  const env = ErrorEnvelopeSchema.safeParse(safeJson(text));
  return new CliError(
    env.success
      ? `${env.data.code}: ${env.data.message}`
      : `${method} ${path} answered HTTP ${status}: ${text.slice(0, 200).replace(/\s+/g, ' ')}`,
  );
}

/** JSON request against orchestratord; the answer is validated against `schema`. */
export async function callJson<T>(
  target: Target,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  schema: z.ZodType<T>,
  body?: unknown,
): Promise<T> {
  const res = await send(target, method, path, body);
  if (res.status >= 300) throw failure(method, path, res.status, res.text);
  const parsed = schema.safeParse(safeJson(res.text));
  if (!parsed.success)
    throw new CliError(`${method} ${path}: unexpected answer (${formatIssues(parsed.error).split('\n').join('; ')})`);
  return parsed.data;
}

/** A request whose success has no body (204), e.g. a task cancel. */
export async function callNoContent(
  target: Target,
  method: 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<void> {
  const res = await send(target, method, path, body);
  if (res.status >= 300) throw failure(method, path, res.status, res.text);
}

/** Plain-text GET (Prometheus metrics). */
export async function callText(target: Target, path: string): Promise<string> {
  const res = await send(target, 'GET', path);
  if (res.status !== 200) throw failure('GET', path, res.status, res.text);
  return res.text;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
