import { describe, expect, it } from 'vitest';
import type { Frame, TaskPlan, TaskTrace } from './task-client.js';
import { judgeTask } from './task-invariants.js';

// The oracle of the chaos run must be able to fail: each violation below is one it has to catch.
const plan = (over: Partial<TaskPlan> = {}): TaskPlan => ({
  index: 0,
  taskId: 't',
  sessionId: 's',
  priority: 'batch',
  maxTokens: 8,
  seed: 1,
  placement: { mode: 'auto' },
  action: 'none',
  actAfterTokens: 0,
  ...over,
});
let seq = 0;
const f = (event: string, data: Record<string, unknown> = {}): Frame => ({ id: String(seq++), event, data, at: 0 });
const trace = (frames: Frame[], over: Partial<TaskTrace> = {}): TaskTrace => ({
  plan: plan(),
  postedAt: 100,
  admission: { status: 202, code: undefined, problems: [], error: undefined },
  admitted: true,
  frames,
  streamStatus: 200,
  streamCode: undefined,
  streamError: undefined,
  closedWithoutTerminal: false,
  framesAfterTerminal: 0,
  reconnects: [],
  hung: false,
  cancel: undefined,
  disconnectedAt: undefined,
  resume: undefined,
  endedAt: 200,
  ...over,
});
const ok = () => {
  seq = 0;
  return [f('started'), f('token', { i: 0, t: 'a' }), f('token', { i: 1, t: 'b' })];
};
const end = (data: Record<string, unknown> = { stop_type: 'limit', tokens_out: 2 }) => f('end', data);

describe('judgeTask', () => {
  it('accepts a normal stream', () => {
    expect(judgeTask(trace([...ok(), end()]), [])).toMatchObject({ outcome: 'completed', problems: [] });
  });

  it('flags a token after the terminal frame, a gap in token indexes, a second terminal', () => {
    const frames = ok();
    const v1 = judgeTask(trace([...frames, end(), f('token', { i: 2, t: 'c' })], { framesAfterTerminal: 1 }), []);
    expect(v1.problems.join()).toMatch(/after the terminal/);
    seq = 0;
    const v2 = judgeTask(trace([f('started'), f('token', { i: 0 }), f('token', { i: 2 }), end()]), []);
    expect(v2.problems.join()).toMatch(/token index 2 where 1/);
    const v3 = judgeTask(trace([...ok(), end(), f('error', { code: 'INTERNAL', message: 'x', retriable: true })]), []);
    expect(v3.problems.join()).toMatch(/error frame after the terminal/);
  });

  it('flags a hang and a stream that closes without a terminal frame (no restart)', () => {
    expect(judgeTask(trace(ok(), { hung: true }), [])).toMatchObject({ outcome: 'hung' });
    const v = judgeTask(trace(ok(), { closedWithoutTerminal: true }), []);
    expect(v.outcome).toBe('no_terminal');
    expect(v.problems.length).toBeGreaterThan(0);
  });

  it('accepts a lost stream only when orchestratord restarted meanwhile, and names how it was lost', () => {
    const lost = trace([], { streamStatus: 404, streamCode: 'NOT_FOUND' });
    expect(judgeTask(lost, []).outcome).toBe('no_terminal');
    expect(judgeTask(lost, [{ begunAt: 150, listeningAt: 180 }])).toMatchObject({
      outcome: 'lost_to_restart',
      detail: 'stream_404',
      problems: [],
    });
    expect(
      judgeTask(trace([], { streamStatus: 404, streamCode: 'X' }), [
        { begunAt: 150, listeningAt: 180 },
      ]).problems.join(),
    ).toMatch(/NOT_FOUND/);
  });

  it('requires end {canceled: true} after a cancel unless the task had ended on its own', () => {
    const cancel = { status: 204, error: undefined, sentAt: 150, answeredAt: 160, tokensBefore: 1 };
    const canceled = trace([...ok(), end({ canceled: true, stop_type: 'cancel', tokens_out: 2 })], {
      plan: plan({ action: 'cancel' }),
      cancel,
    });
    expect(judgeTask(canceled, [])).toMatchObject({ outcome: 'canceled', problems: [] });
    const raced = trace([...ok(), end()], { plan: plan({ action: 'cancel' }), cancel });
    expect(judgeTask(raced, [])).toMatchObject({ outcome: 'cancel_raced', problems: [] });
    const wrong = trace([...ok(), end({ stop_type: 'cancel', tokens_out: 2 })], {
      plan: plan({ action: 'cancel' }),
      cancel,
    });
    expect(judgeTask(wrong, []).problems.join()).toMatch(/without canceled: true/);
    const spurious = trace([...ok(), end({ canceled: true, stop_type: 'cancel' })]);
    expect(judgeTask(spurious, []).problems.join()).toMatch(/nobody canceled/);
  });

  it('flags more token frames than max_tokens', () => {
    const frames = ok();
    const v = judgeTask(trace([...frames, end()], { plan: plan({ maxTokens: 1 }) }), []);
    expect(v.problems.join()).toMatch(/2 token frames for max_tokens 1/);
  });
});
