import { describe, expect, it } from 'vitest';
import { InvalidTaskTransitionError, TaskLifecycle, type TaskState } from './task-lifecycle.js';

/** A lifecycle brought to `state` by legal moves. */
function at(state: TaskState): TaskLifecycle {
  const life = new TaskLifecycle('t1');
  if (state === 'running') life.run();
  if (state === 'ended') life.end('frame');
  return life;
}

describe('a task’s lifecycle', () => {
  it('queued → running → queued (requeued) → running → ended, with the phases each state allows', () => {
    const life = new TaskLifecycle('t1', 'preparing');
    expect([life.state, life.phase]).toEqual(['queued', 'preparing']);
    life.setPhase('queued');
    life.run();
    expect([life.state, life.phase]).toEqual(['running', 'dispatching']);
    life.setPhase('streaming');
    life.requeue();
    expect([life.state, life.phase]).toEqual(['queued', 'queued']);
    life.run();
    expect(life.end('frame')).toBe(true);
    expect([life.state, life.ending]).toEqual(['ended', 'frame']);
  });

  it('the transition table: every move it does not list is a typed error, and leaves the state as it was', () => {
    const moves = { run: (l: TaskLifecycle) => l.run(), requeue: (l: TaskLifecycle) => l.requeue() };
    const allowed: Record<TaskState, Array<keyof typeof moves>> = { queued: ['run'], running: ['requeue'], ended: [] };
    for (const state of ['queued', 'running', 'ended'] as const) {
      for (const [name, move] of Object.entries(moves) as Array<[keyof typeof moves, (l: TaskLifecycle) => void]>) {
        const life = at(state);
        if (allowed[state].includes(name)) {
          expect(() => move(life), `${state} ${name}`).not.toThrow();
        } else {
          expect(() => move(life), `${state} ${name}`).toThrow(InvalidTaskTransitionError);
          expect(life.state).toBe(state);
        }
      }
    }
    const err = (() => {
      try {
        at('ended').run();
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toMatchObject({ code: 'INVALID_TASK_TRANSITION', taskId: 't1', from: 'ended', to: 'running' });
  });

  it('a phase must belong to the state: streaming only while running, preparing only while queued', () => {
    expect(() => at('queued').setPhase('streaming')).toThrow(InvalidTaskTransitionError);
    expect(() => at('queued').setPhase('dispatching')).toThrow(InvalidTaskTransitionError);
    expect(() => at('running').setPhase('preparing')).toThrow(InvalidTaskTransitionError);
    expect(() => at('running').setPhase('streaming')).not.toThrow();
  });

  it('ends once: a second ending (a cancel racing an end, a handoff after a failure) is refused and changes nothing', () => {
    const life = at('running');
    expect(life.end('moved')).toBe(true);
    expect(life.end('frame')).toBe(false);
    expect([life.state, life.ending]).toEqual(['ended', 'moved']);
    expect(at('queued').end('frame')).toBe(true);
  });
});
