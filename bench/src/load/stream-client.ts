import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { SseParser } from '../lib/sse.js';

/**
 * Load-generating client for the concurrent-streams benchmark, run as a child process (IPC).
 * Opens many tasks, each with its own SSE connection, and measures for every token frame the
 * delay from the FIXTURE node's send time (embedded in the token text as `process.hrtime.bigint()`
 * nanoseconds, a machine-wide monotonic clock) to the frame's arrival here. Streams are held open
 * (the streams benchmark) or replaced by a new task as each ends (`repeat`: a closed loop, the
 * replicas benchmark).
 */

export interface OpenCommand {
  type: 'open';
  orchUrl: string;
  token: string;
  model: string;
  count: number;
  maxTokens: number;
  /** Tasks admitted/opened at once. */
  concurrency: number;
  /**
   * Read the task's events from the admission response itself (`POST /v2/tasks` with `Accept:
   * text/event-stream`): one request, so a load balancer cannot send the events to another replica.
   */
  inline?: boolean;
  /** Closed loop: each stream that ends with its `end` frame is followed by a new task, until close. */
  repeat?: boolean;
}

export type ClientCommand = OpenCommand | { type: 'measure'; on: boolean } | { type: 'status' } | { type: 'close' };

export type ClientReply =
  | { type: 'opened'; opened: number; failed: number; errors: string[]; ms: number }
  | { type: 'status'; alive: number; withTokens: number; ended: number; errored: number; tokens: number }
  | {
      type: 'measured';
      delaysUs: number[];
      tokens: number;
      alive: number;
      ended: number;
      errored: number;
      terminal: Record<string, number>;
    }
  | { type: 'closed' };

interface Stream {
  req: ClientRequest;
  res: IncomingMessage | undefined;
  tokens: number;
  ended: boolean;
  terminal: string | undefined;
}

export class StreamClient {
  readonly #streams: Stream[] = [];
  #measuring = false;
  #delays: number[] = [];
  #tokensInWindow = 0;
  #pool: Pool | undefined;
  /** Streams that ended with `end` and were replaced (repeat), no longer in #streams. */
  #completed = 0;
  /** Tokens of the streams that left the table (repeat). */
  #tokensDone = 0;
  #replaceErrors = 0;
  #lastReplaceError: string | undefined;
  #closing = false;

  async open(cmd: OpenCommand): Promise<ClientReply> {
    const t0 = performance.now();
    const errors: string[] = [];
    let opened = 0;
    let failed = 0;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < cmd.count) {
        next += 1;
        try {
          await this.#openOne(cmd);
          opened += 1;
        } catch (err) {
          failed += 1;
          if (errors.length < 10) errors.push(String((err as Error).message ?? err));
        }
      }
    };
    await Promise.all(Array.from({ length: cmd.concurrency }, () => worker()));
    return { type: 'opened', opened, failed, errors, ms: performance.now() - t0 };
  }

  async #openOne(cmd: OpenCommand): Promise<void> {
    const body = JSON.stringify({
      task_id: randomUUID(),
      session_id: randomUUID(),
      workload: 'completion',
      model_ref: cmd.model,
      engine: 'llamacpp',
      ctx: 0,
      priority: 'interactive',
      prompt: 'stream',
      max_tokens: cmd.maxTokens,
      deadline_ms: 3_600_000,
    });
    const auth = `Bearer ${cmd.token}`;
    if (cmd.inline === true) {
      const url = new URL('/v2/tasks', cmd.orchUrl);
      const req = httpRequest({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          authorization: auth,
          'content-length': Buffer.byteLength(body),
        },
      });
      const attached = this.#attach(cmd, req, 'admission');
      req.end(body);
      await attached;
      return;
    }
    const pool = (this.#pool ??= new Pool(cmd.orchUrl, { connections: 8, pipelining: 1, keepAliveTimeout: 60_000 }));
    const res = await pool.request({
      method: 'POST',
      path: '/v2/tasks',
      body,
      headers: { 'content-type': 'application/json', authorization: auth },
    });
    const text = await res.body.text();
    if (res.statusCode !== 202) throw new Error(`admission ${res.statusCode}: ${text.slice(0, 200)}`);
    const sse = new URL((JSON.parse(text) as { streams: { sse: string } }).streams.sse);
    const req = httpRequest({
      host: sse.hostname,
      port: sse.port,
      path: `${sse.pathname}${sse.search}`,
      method: 'GET',
      agent: false,
      headers: { accept: 'text/event-stream', authorization: auth },
    });
    const attached = this.#attach(cmd, req, 'events');
    req.end();
    await attached;
  }

  /** Resolves once `req` answered 200 and its SSE body is being read (token delays, terminal frame). */
  #attach(cmd: OpenCommand, req: ClientRequest, what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const stream: Stream = { req, res: undefined, tokens: 0, ended: false, terminal: undefined };
      req.once('error', (err) => {
        if (stream.res === undefined) reject(err);
        stream.ended = true;
        stream.terminal ??= 'socket-error';
      });
      req.once('response', (r) => {
        if (r.statusCode !== 200) {
          r.resume();
          reject(new Error(`${what} ${r.statusCode}`));
          return;
        }
        stream.res = r;
        this.#streams.push(stream);
        r.setEncoding('utf8');
        const parser = new SseParser();
        r.on('data', (chunk: string) => {
          const now = process.hrtime.bigint();
          for (const f of parser.feed(chunk)) {
            if (f.event === 'token') {
              stream.tokens += 1;
              if (this.#measuring) {
                const sent = BigInt((JSON.parse(f.data) as { t: string }).t);
                this.#delays.push(Number(now - sent) / 1000);
                this.#tokensInWindow += 1;
              }
            } else if (f.event === 'end' || f.event === 'error') {
              stream.ended = true;
              stream.terminal =
                f.event === 'error' ? `error ${(JSON.parse(f.data) as { code?: string }).code ?? ''}` : 'end';
            }
          }
        });
        r.once('close', () => {
          stream.ended = true;
          stream.terminal ??= 'closed';
          if (cmd.repeat === true && stream.terminal === 'end' && !this.#closing) this.#replace(cmd, stream);
        });
        resolve();
      });
    });
  }

  /** Closed loop: the finished stream leaves the table and a new task takes its place. */
  #replace(cmd: OpenCommand, done: Stream): void {
    const at = this.#streams.indexOf(done);
    if (at >= 0) this.#streams.splice(at, 1);
    this.#completed += 1;
    this.#tokensDone += done.tokens;
    this.#openOne(cmd).catch((err: unknown) => {
      this.#replaceErrors += 1;
      if (this.#lastReplaceError === undefined) this.#lastReplaceError = String((err as Error).message ?? err);
    });
  }

  measure(on: boolean): ClientReply | undefined {
    if (on) {
      this.#delays = [];
      this.#tokensInWindow = 0;
      this.#measuring = true;
      return undefined;
    }
    this.#measuring = false;
    const terminal: Record<string, number> = {};
    for (const s of this.#streams) if (s.terminal !== undefined) terminal[s.terminal] = (terminal[s.terminal] ?? 0) + 1;
    if (this.#completed > 0) terminal.end = (terminal.end ?? 0) + this.#completed;
    if (this.#replaceErrors > 0) terminal[`reopen failed: ${this.#lastReplaceError ?? ''}`] = this.#replaceErrors;
    return {
      type: 'measured',
      delaysUs: this.#delays,
      tokens: this.#tokensInWindow,
      alive: this.#streams.filter((s) => !s.ended).length,
      ended: this.#completed + this.#streams.filter((s) => s.terminal === 'end').length,
      errored: this.#replaceErrors + this.#streams.filter((s) => s.ended && s.terminal !== 'end').length,
      terminal,
    };
  }

  status(): ClientReply {
    let tokens = this.#tokensDone;
    for (const s of this.#streams) tokens += s.tokens;
    return {
      type: 'status',
      alive: this.#streams.filter((s) => !s.ended).length,
      withTokens: this.#streams.filter((s) => !s.ended && s.tokens > 0).length,
      ended: this.#completed + this.#streams.filter((s) => s.terminal === 'end').length,
      errored: this.#replaceErrors + this.#streams.filter((s) => s.ended && s.terminal !== 'end').length,
      tokens,
    };
  }

  /** Drops every connection (client disconnect = cancel on orchestratord's side). Idempotent. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const s of this.#streams) s.req.destroy();
    this.#streams.length = 0;
    await this.#pool?.close();
    this.#pool = undefined;
  }
}
