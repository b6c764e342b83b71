import { describe, expect, it } from 'vitest';
import { TaskStream } from './task-stream.js';

const started = { event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } } as const;
const metrics = { event: 'metrics', data: { queue_depth: 1, on_time_probability: 1 } } as const;
const token = (i: number) => ({ event: 'token', data: { t: `t${i}`, i } }) as const;
const end = { event: 'end', data: { tokens_out: 1, decode_ms: 1, decode_time_ms: 1 } } as const;

describe('TaskStream', () => {
  it('numbers frames from 0 and notifies subscribers', () => {
    const s = new TaskStream();
    let calls = 0;
    const off = s.subscribe(() => (calls += 1));
    expect(s.append(started)).toBe(0);
    expect(s.append(metrics)).toBe(1);
    expect(s.append(token(0))).toBe(2);
    off();
    expect(s.append(end)).toBe(3);
    expect(calls).toBe(3);
    expect(s.state).toBe('ended');
    expect(s.terminal).toEqual(end);
  });

  it('one subscriber, then several: each called once per append, counted, removable (also from inside its own call)', () => {
    const s = new TaskStream();
    const calls: string[] = [];
    const a = (): number => calls.push('a');
    const offA = s.subscribe(a);
    expect(s.subscriberCount).toBe(1);
    s.append(started);
    const offB = s.subscribe(() => {
      calls.push('b');
      offB(); // leaves during the append that calls it
    });
    const offC = s.subscribe(() => calls.push('c'));
    expect(s.subscriberCount).toBe(3);
    s.append(metrics);
    expect(s.subscriberCount).toBe(2);
    offA();
    s.append(token(0));
    offC();
    s.unsubscribe(a); // already gone: nothing happens
    expect(s.subscriberCount).toBe(0);
    s.append(end);
    expect(calls).toEqual(['a', 'a', 'b', 'c', 'c']);
    const only = new TaskStream();
    only.subscribe(a);
    only.unsubscribe(a);
    expect(only.subscriberCount).toBe(0);
  });

  it('reads frames back: parsed from their wire text, the one being appended as appended (to its listeners)', () => {
    const s = new TaskStream();
    const frames = [started, metrics, token(0), { event: 'token', data: { t: 'é "q"\n', i: 1 } } as const];
    const seen: unknown[] = [];
    const off = s.subscribe(() => seen.push(s.frame(s.length - 1)));
    for (const f of frames) s.append(f);
    frames.forEach((f, id) => expect(seen[id]).toBe(f));
    off();
    // After its append the object is not kept: the frame is parsed back, equal.
    frames.forEach((f, id) => expect(s.frame(id)).toEqual(f));
    expect(s.frame(3)).not.toBe(frames[3]);
    expect(s.append(started)).toBeUndefined();
    expect(s.frame(4)).toBeUndefined();
    s.append(end);
    expect(s.frame(3)).toEqual(frames[3]);
    expect(s.frame(4)).toEqual(end);
  });

  it('enforces started → metrics* → token* → one terminal', () => {
    const s = new TaskStream();
    expect(s.append(token(0))).toBeUndefined();
    s.append(started);
    expect(s.append(started)).toBeUndefined();
    s.append(token(0));
    expect(s.append(metrics)).toBeUndefined();
    s.append({ event: 'error', data: { code: 'WORKER_RESET', message: 'x', retriable: true } });
    expect(s.append(token(1))).toBeUndefined();
    expect(s.append(end)).toBeUndefined();
    expect(s.length).toBe(3);
  });

  it('reserveEnd(): only the terminal frame is appended after it, with the id it returned; the log stays open until then', () => {
    const s = new TaskStream();
    s.append(started);
    s.append(token(0));
    expect(s.reserveEnd()).toBe(2);
    expect(s.reserveEnd()).toBe(2);
    expect(s.append(token(1))).toBeUndefined();
    expect(s.state).toBe('open');
    expect(s.append(end)).toBe(2);
    expect(s.state).toBe('ended');
  });

  it('keeps the verbose variant of metrics frames only', () => {
    const s = new TaskStream();
    s.append(started, { event: 'metrics', data: { queue_depth: 9, on_time_probability: 0 } });
    s.append(metrics, {
      event: 'metrics',
      data: { queue_depth: 1, on_time_probability: 1, human: 'hi', phase: 'queued' },
    });
    expect(s.text(0, true)).toBe(s.text(0));
    expect(s.text(1)).toBe('id: 1\nevent: metrics\ndata: {"queue_depth":1,"on_time_probability":1}\n\n');
    expect(s.text(1, true)).toMatch(/^id: 1\nevent: metrics\ndata: .*"human":"hi"/);
    expect(s.text(2)).toBeUndefined();
  });
});

describe('TaskStream records', () => {
  it('keeps a token as its payload (no wire text, no frame around it) and other frames as appended', () => {
    const s = new TaskStream();
    s.append(started);
    const data = { t: 'a', i: 0 };
    expect(s.appendToken(data)).toBe(1);
    expect(s.frame(1)?.data).toBe(data);
    expect(s.frame(0)).toBe(started);
    s.append(end);
    expect(s.frame(2)).toBe(end);
    expect(s.text(1)).toBe('id: 1\nevent: token\ndata: {"t":"a","i":0}\n\n');
  });

  it('leave(): unsubscribes and says whether the task is abandoned (open, nobody left)', () => {
    const s = new TaskStream();
    s.append(started);
    const a = (): void => undefined;
    const b = (): void => undefined;
    s.subscribe(a);
    s.subscribe(b);
    expect(s.leave(a)).toBe(false);
    expect(s.leave(b)).toBe(true);
    s.subscribe(a);
    s.append(end);
    expect(s.leave(a)).toBe(false);
  });
  it('moved(): another replica serves the rest, so nothing more is appended, subscribers are told, and nobody leaving abandons it', () => {
    const s = new TaskStream();
    s.append(started);
    s.append({ event: 'token', data: { t: 'a', i: 0 } });
    let calls = 0;
    const a = (): void => void (calls += 1);
    s.subscribe(a);
    s.moved();
    expect(s.state).toBe('moved');
    expect(calls).toBe(1);
    expect(s.append({ event: 'token', data: { t: 'b', i: 1 } })).toBeUndefined();
    expect(s.append(end)).toBeUndefined();
    expect(s.terminal).toBeUndefined();
    expect(s.leave(a)).toBe(false);
    // an ended log does not move
    const e = new TaskStream();
    e.append(started);
    e.append(end);
    e.moved();
    expect(e.state).toBe('ended');
  });
});
