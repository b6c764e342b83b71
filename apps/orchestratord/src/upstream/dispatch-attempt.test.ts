import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AttemptAbort } from './attempt-abort.js';
import { failurePolicy, runAttempt, type AttemptInput, type TokenSink } from './dispatch-attempt.js';
import type { PoolClient } from './pool-client.js';
import {
  DispatchInvalidError,
  EngineError,
  NodeLostError,
  PoolRefusedError,
  PoolSaturatedError,
  UpstreamConnectError,
  UpstreamStreamError,
} from './upstream-errors.js';

const first = { failedAttempts: 0, maxRetries: 1 };
const last = { failedAttempts: 1, maxRetries: 1 };

describe('failurePolicy', () => {
  it('no free slot: retry, not counted (penalty saturated)', () => {
    expect(failurePolicy(new PoolSaturatedError('busy'), 0, last)).toEqual({
      kind: 'retry',
      code: 'POOL_UNREADY',
      message: 'busy',
      penalty: 'saturated',
    });
  });

  it('a request the node refused as invalid, or a non-retriable engine error: terminal with its code', () => {
    expect(failurePolicy(new DispatchInvalidError('INVALID_PARAMS', 'bad'), 0, first)).toEqual({
      kind: 'fail',
      code: 'INVALID_PARAMS',
      message: 'bad',
      retriable: false,
    });
    expect(failurePolicy(new EngineError('DECODE_TIMEOUT', 'slow', false), 0, first)).toEqual({
      kind: 'fail',
      code: 'DECODE_TIMEOUT',
      message: 'slow',
      retriable: false,
    });
  });

  it('before the first token: retry elsewhere, the pool or the whole node suspect', () => {
    expect(failurePolicy(new UpstreamConnectError('refused'), 0, first)).toMatchObject({
      kind: 'retry',
      code: 'WORKER_RESET',
      penalty: 'node',
    });
    expect(failurePolicy(new NodeLostError('offline'), 0, first)).toMatchObject({
      kind: 'retry',
      code: 'WORKER_RESET',
      penalty: 'node',
    });
    expect(failurePolicy(new UpstreamStreamError('cut'), 0, first)).toMatchObject({
      kind: 'retry',
      code: 'WORKER_RESET',
      penalty: 'pool',
    });
    expect(failurePolicy(new PoolRefusedError('POOL_UNAVAILABLE', 'no'), 0, first)).toMatchObject({
      kind: 'retry',
      code: 'POOL_UNAVAILABLE',
      penalty: 'pool',
    });
    expect(failurePolicy(new EngineError('WORKER_RESET', 'lost', true), 0, first)).toMatchObject({
      kind: 'retry',
      code: 'WORKER_RESET',
      penalty: 'pool',
    });
  });

  it('past the last retry: WORKER_RESET (retriable), the penalty still applies, the cause kept', () => {
    expect(failurePolicy(new PoolRefusedError('POOL_UNAVAILABLE', 'no'), 0, last)).toEqual({
      kind: 'fail',
      code: 'WORKER_RESET',
      message: 'node failed before the first token (2 attempts): no',
      retriable: true,
      penalty: 'pool',
      attempts: 2,
      cause: 'POOL_UNAVAILABLE',
    });
  });

  it('after a token: terminal and retriable, no penalty', () => {
    expect(failurePolicy(new UpstreamStreamError('cut'), 3, first)).toEqual({
      kind: 'fail',
      code: 'WORKER_RESET',
      message: 'cut',
      retriable: true,
    });
    expect(failurePolicy(new NodeLostError('gone'), 1, first)).toEqual({
      kind: 'fail',
      code: 'WORKER_RESET',
      message: 'gone',
      retriable: true,
    });
    expect(failurePolicy(new EngineError('WORKER_RESET', 'lost', true), 1, first)).toEqual({
      kind: 'fail',
      code: 'WORKER_RESET',
      message: 'lost',
      retriable: true,
    });
  });

  it('anything that is not a dispatch failure is a bug and is thrown', () => {
    expect(() => failurePolicy(new TypeError('oops'), 0, first)).toThrow(TypeError);
  });
});

function input(
  lines: string[] | Error,
  over: Partial<AttemptInput> = {},
): { input: AttemptInput; tokens: string[]; accepted: () => boolean } {
  const tokens: string[] = [];
  let accepted = false;
  const sink: TokenSink = {
    accepted: () => {
      accepted = true;
    },
    token: (ev) => {
      tokens.push(ev.t);
      return true;
    },
  };
  const client = {
    dispatch: async () => {
      if (lines instanceof Error) throw lines;
      return Readable.from(
        lines.map((l) => `${l}\n`),
        { objectMode: false },
      );
    },
  } as unknown as PoolClient;
  return {
    input: {
      client,
      target: { url: 'http://n' },
      poolId: 'p',
      body: { task_id: 't', workload: 'completion', prompt: 'x', max_tokens: 2, greedy: false, cache_prompt: false },
      controller: new AttemptAbort(),
      correlationId: 'c',
      sink,
      ...first,
      ...over,
    },
    tokens,
    accepted: () => accepted,
  };
}

const tok = (i: number): string => JSON.stringify({ type: 'token', t: `t${i}`, i });
const END = JSON.stringify({
  type: 'end',
  tokens_out: 2,
  decode_ms: 1,
  stop_type: 'limit',
  engine_version: 'v',
  pool_id: 'p',
  node_id: 'n',
});

describe('runAttempt', () => {
  it("relays tokens to the sink and ends with the node's end event", async () => {
    const a = input([tok(0), tok(1), END]);
    expect(await runAttempt(a.input)).toMatchObject({ kind: 'end', event: { tokens_out: 2 } });
    expect(a.tokens).toEqual(['t0', 't1']);
    expect(a.accepted()).toBe(true);
  });

  it('a stream that ends without its terminal event: re-placed before a token, terminal after one', async () => {
    expect(await runAttempt(input([]).input)).toMatchObject({ kind: 'retry', code: 'WORKER_RESET', penalty: 'pool' });
    expect(await runAttempt(input([tok(0)]).input)).toMatchObject({
      kind: 'fail',
      code: 'WORKER_RESET',
      retriable: true,
    });
  });

  it('a refused dispatch goes through the same policy; the sink never hears of it', async () => {
    const a = input(new PoolSaturatedError('busy'));
    expect(await runAttempt(a.input)).toMatchObject({ kind: 'retry', penalty: 'saturated' });
    expect(a.accepted()).toBe(false);
  });

  it("our own abort ends the attempt quietly, unless the reason is a failure (the node's loss, the dispatch not accepted)", async () => {
    const canceled = new AttemptAbort();
    canceled.abort();
    expect(await runAttempt(input(new Error('aborted'), { controller: canceled }).input)).toEqual({ kind: 'aborted' });
    const lost = new AttemptAbort();
    lost.abort(new NodeLostError('node n went offline'));
    expect(await runAttempt(input(new Error('aborted'), { controller: lost }).input)).toMatchObject({
      kind: 'retry',
      penalty: 'node',
      message: 'node n went offline',
    });
    // The pool client's accept deadline aborts the attempt's controller with the failure itself.
    const unaccepted = new AttemptAbort();
    unaccepted.abort(new UpstreamConnectError('node n did not accept the dispatch within 5 ms'));
    expect(await runAttempt(input(new Error('aborted'), { controller: unaccepted }).input)).toMatchObject({
      kind: 'retry',
      code: 'WORKER_RESET',
      penalty: 'node',
    });
  });
});
