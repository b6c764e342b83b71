import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { ModelProvisionError, cacheError } from './errors.js';
import { hashFileInto, sleep, writeFileAtomic } from './fs-util.js';
import type { ProgressReporter } from './progress.js';

/** Retry policy for transient download failures. */
export interface RetryPolicy {
  /** Tries in total, the first included. @default 4 */
  attempts: number;
  /** First backoff; doubles each retry, ±20 % jitter. @default 500 */
  baseMs: number;
  /** Backoff cap. @default 10000 */
  maxMs: number;
}

export interface DownloadOptions {
  url: string;
  /** Where bytes accumulate; kept across transient failures so the next try resumes with Range. */
  partialPath: string;
  headers: Record<string, string>;
  dispatcher: Dispatcher;
  retry: RetryPolicy;
  /** Longest silence while waiting for headers or body bytes before the try counts as failed. */
  stallTimeoutMs: number;
  logger: Logger;
  progress: ProgressReporter;
  signal: AbortSignal;
}

export interface DownloadResult {
  sha256: string;
  size_bytes: number;
}

const WRITE_BATCH = 1 << 20;

/** The buffers left after the first `n` bytes were written (writev may write less than asked). */
function skipBytes(bufs: Buffer[], n: number): Buffer[] {
  const out: Buffer[] = [];
  let skip = n;
  for (const b of bufs) {
    if (skip >= b.length) {
      skip -= b.length;
      continue;
    }
    out.push(skip > 0 ? b.subarray(skip) : b);
    skip = 0;
  }
  return out;
}

/** Thrown inside a try: the loop retries it. */
class Transient extends Error {}

function safeUrl(url: string): string {
  const u = new URL(url);
  u.search = '';
  return u.href;
}

async function fileSize(path: string): Promise<number> {
  return stat(path).then(
    (s) => s.size,
    () => 0,
  );
}

function parseContentRange(v: string | string[] | undefined): { start?: number; total?: number } {
  const s = Array.isArray(v) ? v[0] : v;
  const m = /^bytes (?:(\d+)-\d+|\*)\/(\d+|\*)$/.exec(s?.trim() ?? '');
  if (!m) return {};
  return {
    ...(m[1] === undefined ? {} : { start: Number(m[1]) }),
    ...(m[2] === undefined || m[2] === '*' ? {} : { total: Number(m[2]) }),
  };
}

const PartialMetaSchema = z.strictObject({ url: z.string(), validator: z.string().optional() });
type PartialMeta = z.infer<typeof PartialMetaSchema>;

const metaPath = (partialPath: string): string => `${partialPath}.json`;

async function readPartialMeta(partialPath: string): Promise<PartialMeta | undefined> {
  try {
    return PartialMetaSchema.parse(JSON.parse(await readFile(metaPath(partialPath), 'utf8')));
  } catch {
    return undefined;
  }
}

async function writePartialMeta(partialPath: string, meta: PartialMeta): Promise<void> {
  await writeFileAtomic(metaPath(partialPath), JSON.stringify(meta));
}

/** Deletes a partial download and its sidecar. */
export async function removePartial(partialPath: string): Promise<void> {
  await rm(partialPath, { force: true });
  await rm(metaPath(partialPath), { force: true });
}

/** Strong ETag, else Last-Modified: what If-Range may carry (weak ETags are not allowed there). */
function validatorOf(h: Record<string, string | string[] | undefined>): string | undefined {
  const first = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);
  const etag = first(h.etag);
  if (etag && !etag.startsWith('W/')) return etag;
  return first(h['last-modified']);
}

/**
 * One GET; appends to the partial file and feeds the running hash.
 * @returns the final size when the body is complete.
 */
async function attempt(opts: DownloadOptions, log: Logger): Promise<DownloadResult> {
  let offset = await fileSize(opts.partialPath);
  const meta = offset > 0 ? await readPartialMeta(opts.partialPath) : undefined;
  if (offset > 0 && meta?.url !== opts.url) {
    // bytes of another URL (or of unknown origin) are never continued
    await removePartial(opts.partialPath);
    offset = 0;
  }
  const hash = createHash('sha256');
  // resuming: the digest must cover the bytes already on disk, so hash them again first
  if (offset > 0) await hashFileInto(hash, opts.partialPath, { length: offset, signal: opts.signal });

  const headers: Record<string, string> = { ...opts.headers };
  if (offset > 0) {
    headers.range = `bytes=${offset}-`;
    // If-Range: a server whose file changed since the first bytes answers 200 with the new file
    if (meta?.validator) headers['if-range'] = meta.validator;
  }
  const u = new URL(opts.url);
  const res = await opts.dispatcher.request({
    origin: u.origin,
    path: u.pathname + u.search,
    method: 'GET',
    headers,
    signal: opts.signal,
    headersTimeout: opts.stallTimeoutMs,
    bodyTimeout: opts.stallTimeoutMs,
  });
  const status = res.statusCode;
  let total: number | undefined;
  let append = false;

  if (status === 206) {
    const cr = parseContentRange(res.headers['content-range']);
    if (cr.start !== offset) {
      await res.body.dump();
      await removePartial(opts.partialPath);
      throw new Transient(`server answered range ${String(cr.start)} for a request from ${offset}`);
    }
    append = true;
    total = cr.total;
  } else if (status === 200) {
    if (offset > 0) {
      log.info({ offset }, 'server ignored the Range request; downloading from the start');
      offset = 0;
    }
    const len = Number(res.headers['content-length']);
    total = Number.isFinite(len) && len >= 0 ? len : undefined;
  } else if (status === 416 && offset > 0) {
    await res.body.dump();
    const cr = parseContentRange(res.headers['content-range']);
    if (cr.total === offset) return { sha256: hash.digest('hex'), size_bytes: offset };
    await removePartial(opts.partialPath);
    throw new Transient(`range ${offset}- not satisfiable (size ${String(cr.total)}); starting over`);
  } else {
    await res.body.dump().catch(() => undefined);
    if (status === 404 || status === 410) {
      throw new ModelProvisionError('MODEL_NOT_FOUND', `model not found: ${safeUrl(opts.url)} answered ${status}`, {
        url: safeUrl(opts.url),
        status,
      });
    }
    if (status === 408 || status === 429 || status >= 500) throw new Transient(`server answered ${status}`);
    const hint = status === 401 || status === 403 ? ' (missing or insufficient access token?)' : '';
    throw new ModelProvisionError(
      'MODEL_FETCH_FAILED',
      `download refused: ${safeUrl(opts.url)} answered ${status}${hint}`,
      { url: safeUrl(opts.url), status },
    );
  }

  if (!append) await writePartialMeta(opts.partialPath, { url: opts.url, validator: validatorOf(res.headers) });
  const h = offset === 0 ? createHash('sha256') : hash;
  let done = offset;
  opts.progress.update({ bytes_done: done, ...(total === undefined ? {} : { bytes_total: total }) });
  // Written through a FileHandle in ~1 MiB batches, and the batch in hand is flushed even when the
  // connection drops: every byte received is on disk, so the next try resumes exactly there.
  let fh: FileHandle;
  try {
    fh = await open(opts.partialPath, append ? 'a' : 'w');
  } catch (err) {
    await res.body.dump().catch(() => undefined);
    throw cacheError(err, opts.partialPath);
  }
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const flush = async (): Promise<void> => {
    const bufs = pending;
    pending = [];
    pendingBytes = 0;
    let left = bufs;
    while (left.length > 0) {
      const { bytesWritten } = await fh.writev(left).catch((err: unknown) => {
        throw cacheError(err, opts.partialPath);
      });
      left = skipBytes(left, bytesWritten);
    }
  };
  try {
    for await (const chunk of res.body) {
      const b = chunk as Buffer;
      h.update(b);
      pending.push(b);
      pendingBytes += b.length;
      done += b.length;
      if (pendingBytes >= WRITE_BATCH) await flush();
      opts.progress.update({ bytes_done: done, ...(total === undefined ? {} : { bytes_total: total }) });
    }
  } finally {
    try {
      await flush();
    } finally {
      await fh.close().catch(() => undefined);
    }
  }
  if (total !== undefined && done !== total) throw new Transient(`body ended at ${done} of ${total} bytes`);
  return { sha256: h.digest('hex'), size_bytes: done };
}

/**
 * Downloads `url` into `partialPath`, hashing on the fly. Transient failures (connection
 * reset, timeouts, 408/429/5xx, short bodies) are retried with exponential backoff, resuming
 * from the bytes already on disk with `Range`. 404/410 → `MODEL_NOT_FOUND`; 401/403 and other
 * 4xx → `MODEL_FETCH_FAILED` without retry; abort → `DEADLINE_EXCEEDED`. The partial file is
 * left in place for the caller to verify and rename, or to delete.
 */
export async function download(opts: DownloadOptions): Promise<DownloadResult> {
  const log = opts.logger.child({ url: safeUrl(opts.url) });
  await mkdir(dirname(opts.partialPath), { recursive: true }).catch((err: unknown) => {
    throw cacheError(err, opts.partialPath);
  });
  let lastErr: unknown;
  for (let i = 1; i <= opts.retry.attempts; i++) {
    try {
      if (opts.signal.aborted) throw opts.signal.reason;
      return await attempt(opts, log);
    } catch (err) {
      if (opts.signal.aborted) {
        throw new ModelProvisionError(
          'DEADLINE_EXCEEDED',
          `download of ${safeUrl(opts.url)} aborted (deadline or cancel)`,
          { url: safeUrl(opts.url) },
          { cause: err },
        );
      }
      if (err instanceof ModelProvisionError) throw err;
      lastErr = err;
      if (i === opts.retry.attempts) break;
      const backoff = Math.min(opts.retry.maxMs, opts.retry.baseMs * 2 ** (i - 1)) * (0.8 + Math.random() * 0.4);
      log.warn(
        { attempt: i, of: opts.retry.attempts, backoff_ms: Math.round(backoff), err_message: (err as Error).message },
        'download failed; retrying',
      );
      try {
        await sleep(backoff, opts.signal);
      } catch (sleepErr) {
        throw new ModelProvisionError(
          'DEADLINE_EXCEEDED',
          `download of ${safeUrl(opts.url)} aborted (deadline or cancel)`,
          { url: safeUrl(opts.url) },
          { cause: sleepErr },
        );
      }
    }
  }
  throw new ModelProvisionError(
    'MODEL_FETCH_FAILED',
    `download of ${safeUrl(opts.url)} failed after ${opts.retry.attempts} attempts: ${(lastErr as Error | undefined)?.message ?? String(lastErr)}`,
    { url: safeUrl(opts.url), attempts: opts.retry.attempts },
    { cause: lastErr },
  );
}
