import { ErrorEnvelopeSchema } from '@llama-orch/contracts';
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

/** JSON request against orchestratord; non-2xx answers become a CliError with the envelope's code. */
export async function callJson<T>(target: Target, method: 'GET' | 'POST' | 'DELETE', path: string, schema: z.ZodType<T>, body?: unknown): Promise<T> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(new URL(path, target.url), {
      method,
      headers: { ...authHeaders(target), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: target.dispatcher,
    });
  } catch (err) {
    throw new CliError(`cannot reach orchestratord at ${target.url}: ${(err as Error).message} (is the cluster up? \`llorch up\`)`);
  }
  const text = await res.body.text();
  if (res.statusCode >= 300) {
    const env = ErrorEnvelopeSchema.safeParse(safeJson(text));
    throw new CliError(env.success ? `${env.data.code}: ${env.data.message}` : `HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
  }
  return schema.parse(safeJson(text));
}

/** Plain-text GET (Prometheus metrics). */
export async function callText(target: Target, path: string): Promise<string> {
  const res = await request(new URL(path, target.url), { method: 'GET', dispatcher: target.dispatcher });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new CliError(`GET ${path} answered ${res.statusCode}`);
  return text;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
