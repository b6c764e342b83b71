import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { DispatchEvent } from '@llama-orch/contracts';
import { DispatchNotHeldError } from '../errors.js';
import { PoolManagerMetrics } from '../support/metrics.js';
import { DispatchAbort } from './dispatch-signal.js';
import { HELD_CHARS_MAX, HELD_EVENTS_MAX, type HeldSink } from './held-dispatch.js';
import { HeldDispatches } from './held-dispatches.js';

// The held state of a re-attachable dispatch on its own (the engine side is reattach.test.ts):
// the bounds, the replay position, the window after an end. Sinks record what they were given.
function setup(reattachMs = 10_000) {
  const logs: Array<Record<string, unknown>> = [];
  const log = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n'))
          if (l !== '') logs.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const metrics = new PoolManagerMetrics({ statuses: () => [] });
  const registry = new HeldDispatches(metrics);
  const taskId = crypto.randomUUID();
  const { held } = registry.hold('p', taskId, reattachMs, log, () => undefined);
  return { registry, held, taskId, logs, metrics };
}

interface RecordingSink extends HeldSink {
  lines: string[];
  ended: boolean;
  superseded: boolean;
}

function sink(): RecordingSink {
  const s: RecordingSink = {
    lines: [],
    ended: false,
    superseded: false,
    line: (text) => {
      s.lines.push(text);
      return undefined;
    },
    end: () => {
      s.ended = true;
    },
    supersede: () => {
      s.superseded = true;
    },
  };
  return s;
}

const token = (i: number, t = 'x'): DispatchEvent => ({ type: 'token', t, i });
const end: DispatchEvent = {
  type: 'end',
  tokens_out: 3,
  decode_ms: 1,
  stop_type: 'limit',
  engine_version: 'b1',
  pool_id: 'p',
  node_id: 'n',
};
const indexesOf = (s: RecordingSink): Array<number | string> =>
  s.lines.map((l) => JSON.parse(l) as DispatchEvent).map((e) => (e.type === 'token' ? e.i : e.type));

async function count(metrics: PoolManagerMetrics, outcome: string): Promise<number> {
  return (await metrics.reattach.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

describe('HeldDispatch', () => {
  it('replays the held tokens with i > after, then the terminal line, and ends a connection when the run is over', () => {
    const { held } = setup();
    const first = sink();
    held.attachFirst(first);
    for (let i = 0; i < 10; i++) held.emit(token(i));
    held.closed(first, false);
    for (const after of [-1, 0, 6, 9, 1000]) {
      const s = sink();
      held.attach(s, after);
      expect(indexesOf(s)).toEqual(Array.from({ length: Math.max(0, 9 - after) }, (_, k) => after + 1 + k));
      held.closed(s, false);
    }
    held.emit(end);
    held.runOver();
    const last = sink();
    held.attach(last, 7);
    expect(indexesOf(last)).toEqual([8, 9, 'end']);
    expect(last.ended).toBe(true);
  });

  it('last attacher wins: the attached connection is superseded, and its close is ignored', () => {
    const { held } = setup();
    const a = sink();
    held.attachFirst(a);
    held.emit(token(0));
    const b = sink();
    held.attach(b, 0);
    expect(a.superseded).toBe(true);
    held.closed(a, false);
    held.emit(token(1));
    expect(indexesOf(b)).toEqual([1]);
    expect(indexesOf(a)).toEqual([0]);
    expect(held.signal.aborted).toBe(false);
  });

  it(`detached past the bound (${HELD_EVENTS_MAX} token lines): cancelled as a disconnect, counted expired, no longer held`, async () => {
    const { held, registry, taskId, logs, metrics } = setup();
    const s = sink();
    held.attachFirst(s);
    held.closed(s, false);
    for (let i = 0; i < HELD_EVENTS_MAX; i++) held.emit(token(i));
    expect(held.signal.aborted).toBe(false);
    held.emit(token(HELD_EVENTS_MAX));
    expect(held.signal.aborted).toBe(true);
    expect(held.signal.reason).toBeInstanceOf(DispatchAbort);
    expect((held.signal.reason as DispatchAbort).why).toBe('client_gone');
    expect(() => registry.find('p', taskId)).toThrow(DispatchNotHeldError);
    expect(
      logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('held events passed the bound')),
    ).toHaveLength(1);
    expect(await count(metrics, 'expired')).toBe(1);
  });

  it(`attached past the bound (${HELD_CHARS_MAX} characters): holding stops, the stream goes on, a GET is 404 and a close cancels`, () => {
    const { held, registry, taskId } = setup();
    const s = sink();
    held.attachFirst(s);
    const big = 'y'.repeat(1024 * 1024);
    for (let i = 0; i < 15; i++) held.emit(token(i, big));
    expect(held.reattachable).toBe(true);
    held.emit(token(15, big));
    expect(held.reattachable).toBe(false);
    expect(held.heldEvents).toBe(0);
    expect(held.signal.aborted).toBe(false);
    expect(s.lines).toHaveLength(16);
    expect(() => registry.find('p', taskId)).toThrow(DispatchNotHeldError);
    held.closed(s, false);
    expect(held.signal.aborted).toBe(true);
  });

  it('ended while detached: held for the rest of the window, then dropped without an abort; after a finished connection it stays for half the window', async () => {
    const { held, registry, taskId, metrics } = setup(50);
    const s = sink();
    held.attachFirst(s);
    held.emit(token(0));
    held.closed(s, false);
    held.emit(end);
    held.runOver();
    expect(registry.find('p', taskId)).toBe(held);
    await new Promise((r) => setTimeout(r, 80));
    expect(() => registry.find('p', taskId)).toThrow(DispatchNotHeldError);
    expect(held.signal.aborted).toBe(false);
    expect(await count(metrics, 'expired')).toBe(1);

    // the end written out is not yet delivered (its orchestrator may have died as it was written)
    const other = setup(100);
    const t = sink();
    other.held.attachFirst(t);
    other.held.emit(end);
    other.held.runOver();
    expect(t.ended).toBe(true);
    other.held.closed(t, true);
    expect(other.registry.size).toBe(1);
    await new Promise((r) => setTimeout(r, 80));
    expect(other.registry.size).toBe(0);
    expect(await count(other.metrics, 'expired')).toBe(0);
  });

  it('DELETE: aborted with why cancelled, forgotten at once, counted; unknown or on another pool is DispatchNotHeldError', async () => {
    const { held, registry, taskId, metrics } = setup();
    expect(() => registry.cancel('other-pool', taskId)).toThrow(DispatchNotHeldError);
    registry.cancel('p', taskId);
    expect((held.signal.reason as DispatchAbort).why).toBe('cancelled');
    expect(registry.size).toBe(0);
    expect(() => registry.cancel('p', taskId)).toThrow(DispatchNotHeldError);
    expect(await count(metrics, 'cancelled')).toBe(1);
  });
});
