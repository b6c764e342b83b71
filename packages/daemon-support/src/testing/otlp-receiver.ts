// An OTLP/HTTP trace receiver on loopback: what a collector is to the daemons' exporters, for tests.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { decodeTraceRequest } from './otlp-trace-proto.js';
import { spansOfExport, type ReceivedSpan } from './otlp-spans.js';

export { OtlpDecodeError } from './otlp-spans.js';
export type {
  OtlpAttributes,
  OtlpValue,
  ReceivedEvent,
  ReceivedLink,
  ReceivedSpan,
  ReceivedSpanKind,
} from './otlp-spans.js';

/** One `POST /v1/traces` the receiver answered. */
export interface ReceivedExport {
  readonly encoding: 'json' | 'protobuf';
  /** `gzip` when the exporter compressed the body (`OTEL_EXPORTER_OTLP_COMPRESSION=gzip`). */
  readonly content_encoding: string | undefined;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly span_count: number;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  /** `<url>/v1/traces`: the value of `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. */
  readonly tracesUrl: string;
  /** Every span received so far, in arrival order. */
  spans(): ReceivedSpan[];
  /** Every export request accepted so far, in arrival order. */
  exports(): ReceivedExport[];
  /** Requests refused (wrong path, method, content type, undecodable body), as `<status> <reason>`. */
  errors(): string[];
  /**
   * Resolves with all spans received once `predicate` holds for them (checked now and after every
   * export); rejects after `timeoutMs` naming the spans received, so a failing test says what came.
   */
  waitFor(predicate: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  /** Forgets what was received (spans, exports, errors). */
  clear(): void;
  /** Stops listening and drops the exporters' kept-alive connections; idempotent. */
  close(): Promise<void>;
}

/** Largest body accepted (a batch of 512 spans is far below it), bytes. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

export interface OtlpReceiverOptions {
  /** @default '127.0.0.1' */
  host?: string;
  /** A fixed port (4318: where an exporter with no endpoint configured would send); rejects when taken. @default a free one */
  port?: number;
}

/**
 * Starts an OTLP/HTTP receiver on a free loopback port: `POST /v1/traces` with
 * `application/x-protobuf` (decoded with protobufjs and a hand-written descriptor of the OTLP trace
 * messages) or `application/json` (OTLP/JSON), optionally gzip-compressed, answered 200 with an
 * empty ExportTraceServiceResponse in the request's encoding. Both encodings are normalised to the
 * same {@link ReceivedSpan} objects (hex ids, bigint nanoseconds, attributes as plain values).
 * Anything else is answered 4xx and listed by `errors()`.
 */
export async function startOtlpReceiver(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  const host = options.host ?? '127.0.0.1';
  let spans: ReceivedSpan[] = [];
  let exports: ReceivedExport[] = [];
  let errors: string[] = [];
  const waiters = new Set<() => void>();

  const refuse = (res: ServerResponse, status: number, reason: string): void => {
    errors.push(`${status} ${reason}`);
    res.writeHead(status, { 'content-type': 'text/plain' }).end(reason);
  };

  const server = createServer((req, res) => {
    if (req.url?.split('?')[0] !== '/v1/traces') return refuse(res, 404, `no route ${req.method} ${req.url}`);
    if (req.method !== 'POST') return refuse(res, 405, `${req.method} /v1/traces`);
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    const encoding = type === 'application/x-protobuf' ? 'protobuf' : type === 'application/json' ? 'json' : undefined;
    if (encoding === undefined) return refuse(res, 415, `content-type '${type}'`);
    readBody(req).then(
      (raw) => {
        const contentEncoding = req.headers['content-encoding'];
        let received: ReceivedSpan[];
        try {
          const body = contentEncoding === 'gzip' ? gunzipSync(raw) : raw;
          received = spansOfExport(
            encoding === 'protobuf' ? decodeTraceRequest(body) : JSON.parse(body.toString('utf8')),
            encoding,
          );
        } catch (err) {
          return refuse(res, 400, `undecodable ${encoding} body: ${(err as Error).message}`);
        }
        spans.push(...received);
        exports.push({
          encoding,
          content_encoding: contentEncoding,
          headers: { ...req.headers },
          span_count: received.length,
        });
        // An empty ExportTraceServiceResponse: full success.
        if (encoding === 'protobuf') res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        for (const wake of [...waiters]) wake();
      },
      (err: unknown) => refuse(res, 400, (err as Error).message),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let closing: Promise<void> | undefined;

  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    spans: () => [...spans],
    exports: () => [...exports],
    errors: () => [...errors],
    waitFor: (predicate, timeoutMs = 10_000) =>
      new Promise<ReceivedSpan[]>((resolve, reject) => {
        const check = (): void => {
          if (!predicate(spans)) return;
          finish();
          resolve([...spans]);
        };
        const timer = setTimeout(() => {
          finish();
          const seen = spans.map((s) => `${s.name} (${s.span_id} ← ${s.parent_span_id ?? 'root'})`);
          reject(
            new Error(`OTLP receiver: not satisfied within ${timeoutMs} ms; ${spans.length} spans: ${seen.join(', ')}`),
          );
        }, timeoutMs);
        const finish = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
    clear: () => {
      spans = [];
      exports = [];
      errors = [];
    },
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) req.destroy(new Error(`body over ${MAX_BODY_BYTES} bytes`));
      else chunks.push(c);
    });
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}
