import { connect } from 'node:net';
import { request, type Dispatcher } from 'undici';
import { envelopeProblems } from './envelope.js';

export interface ProbeRequest {
  method: string;
  /** Path + query, sent as is (already encoded). */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface ProbeResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body was longer than the cap and was cut. */
  truncated: boolean;
}

/** Sends one request and reads at most `maxBytes` of the answer (streams are cut there). */
export async function probe(baseUrl: string, req: ProbeRequest, dispatcher?: Dispatcher, maxBytes = 256 * 1024): Promise<ProbeResponse> {
  const url = new URL(baseUrl);
  const res = await request({
    origin: url.origin,
    path: req.path,
    method: req.method as Dispatcher.HttpMethod,
    headers: req.headers ?? {},
    body: req.body,
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
    ...(dispatcher !== undefined ? { dispatcher } : {}),
  } as Parameters<typeof request>[0]);
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of res.body) {
    const buf = chunk as Buffer;
    chunks.push(buf);
    size += buf.length;
    if (size > maxBytes) {
      truncated = true;
      res.body.destroy();
      break;
    }
  }
  return { status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), truncated };
}

/**
 * The fuzz oracle for one response: never a 5xx; every 4xx/5xx is an ErrorEnvelope whose code
 * maps to the status (HEAD answers carry no body and are checked by status only).
 */
export function responseProblems(method: string, res: ProbeResponse): string[] {
  const problems: string[] = [];
  if (res.status >= 500) problems.push(`status ${res.status}`);
  if (res.status >= 400 && method !== 'HEAD') problems.push(...envelopeProblems(res.status, res.headers, res.text));
  if (res.status >= 400 && res.headers['x-correlation-id'] === undefined) problems.push('no X-Correlation-Id');
  return [...new Set(problems)];
}

/** Writes raw bytes to a TCP port and returns whatever comes back before the socket closes (or the timeout). */
export async function rawExchange(host: string, port: number, bytes: Buffer, timeoutMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const chunks: Buffer[] = [];
    const done = (): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    const timer = setTimeout(done, timeoutMs);
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', done);
    sock.on('close', done);
    sock.on('connect', () => sock.end(bytes));
  });
}
