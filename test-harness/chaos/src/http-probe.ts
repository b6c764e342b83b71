import { connect } from 'node:net';
import { request, type Dispatcher } from 'undici';
import {
  anthropicErrorProblems,
  envelopeProblems,
  isAnthropicDoorPath,
  isOpenAiDoorPath,
  openAiErrorProblems,
} from './envelope.js';

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
export async function probe(
  baseUrl: string,
  req: ProbeRequest,
  dispatcher?: Dispatcher,
  maxBytes = 256 * 1024,
): Promise<ProbeResponse> {
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
 * 503s that are typed availability answers of the code table (a model whose pools are down, a full
 * or unready pool, no node with room for a catalog model), not failures.
 */
const AVAILABILITY_CODES =
  /"code":"(MODEL_NOT_AVAILABLE|POOL_UNREADY|POOL_UNAVAILABLE|REPLICA_EXHAUSTED|INSUFFICIENT_MEMORY)"/;

/**
 * The fuzz oracle for one response: never a 5xx (save the typed 503 availability answers above);
 * every 4xx/5xx is an ErrorEnvelope whose code maps to the status, or on orchestratord's doors
 * (`path` given) the door's own shape: Anthropic's on `/v1/messages…`, OpenAI's on the rest of `/v1` (HEAD answers carry no body and are checked by status only).
 */
export function responseProblems(method: string, res: ProbeResponse, path?: string): string[] {
  const problems: string[] = [];
  if (res.status >= 500 && !(res.status === 503 && AVAILABILITY_CODES.test(res.text)))
    problems.push(`status ${res.status}`);
  const shape =
    path === undefined
      ? envelopeProblems
      : isAnthropicDoorPath(path)
        ? anthropicErrorProblems
        : isOpenAiDoorPath(path)
          ? openAiErrorProblems
          : envelopeProblems;
  if (res.status >= 400 && method !== 'HEAD') problems.push(...shape(res.status, res.headers, res.text));
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

/**
 * Uploads a body over a raw socket while reading: waits briefly after the headers, then stops
 * writing as soon as the server answers.
 * A server that refuses an oversized body answers before reading it and then closes; an HTTP
 * client that insists on sending everything first sees EPIPE instead of the 413.
 */
export async function uploadProbe(
  baseUrl: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  timeoutMs = 15_000,
): Promise<ProbeResponse> {
  const url = new URL(baseUrl);
  const head = [
    `POST ${path} HTTP/1.1`,
    `Host: ${url.host}`,
    `Content-Length: ${body.length}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const sock = connect({ host: url.hostname, port: Number(url.port) });
    const chunks: Buffer[] = [];
    let answered = false;
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = (): void => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    };
    sock.on('data', (d: Buffer) => {
      answered = true;
      chunks.push(d);
    });
    sock.on('close', finish);
    // EPIPE/ECONNRESET after the server answered and closed: the answer is what counts
    sock.on('error', () => sock.destroy());
    sock.on('connect', async () => {
      sock.write(head);
      // Like a client sending `Expect: 100-continue`: give the server a moment to refuse on the
      // headers alone. A refusal followed by close would otherwise race our unread upload (RST).
      for (let waited = 0; waited < 500 && !answered; waited += 10) await new Promise((r) => setTimeout(r, 10));
      for (let off = 0; off < body.length && !answered && !sock.destroyed; off += 64 * 1024) {
        if (!sock.write(body.subarray(off, off + 64 * 1024))) {
          await new Promise<void>((r) => {
            const t = setInterval(() => {
              if (answered || sock.destroyed) {
                clearInterval(t);
                r();
              }
            }, 10);
            sock.once('drain', () => {
              clearInterval(t);
              r();
            });
          });
        }
      }
    });
  });
  const text = raw.toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...headerLines] = text.slice(0, split < 0 ? text.length : split).split('\r\n');
  const resHeaders: Record<string, string> = {};
  for (const l of headerLines) {
    const i = l.indexOf(':');
    if (i > 0) resHeaders[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let resBody = split < 0 ? '' : text.slice(split + 4);
  if (/chunked/i.test(resHeaders['transfer-encoding'] ?? '')) resBody = dechunk(resBody);
  return { status: Number(statusLine.split(' ')[1] ?? 0), headers: resHeaders, text: resBody, truncated: false };
}

function dechunk(s: string): string {
  let out = '';
  let rest = s;
  for (;;) {
    const nl = rest.indexOf('\r\n');
    if (nl < 0) return out;
    const size = Number.parseInt(rest.slice(0, nl), 16);
    if (!Number.isFinite(size) || size === 0) return out;
    out += rest.slice(nl + 2, nl + 2 + size);
    rest = rest.slice(nl + 2 + size + 2);
  }
}
