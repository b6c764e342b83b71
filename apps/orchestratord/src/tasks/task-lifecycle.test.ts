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

  it('ownership (replicas): none → held → lost → held (granted back) → none (released), each release says which fence the end is written under', () => {
    const life = new TaskLifecycle('t1');
    expect(life.ownership).toEqual({ kind: 'none' });
    expect(life.fence).toBe(0);
    life.hold(7);
    expect([life.fence, life.lost]).toEqual([7, false]);
    life.letGo(1234);
    expect(life.ownership).toEqual({ kind: 'lost', fence: 7, at: 1234 });
    expect([life.fence, life.lost]).toEqual([0, true]);
    // a let-go task's end takes it back first, under the fence it had
    const lost = new TaskLifecycle('t2');
    lost.hold(3);
    lost.letGo(0);
    expect(lost.release()).toEqual({ fence: undefined, formerFence: 3 });
    life.hold(9);
    expect(life.release()).toEqual({ fence: 9, formerFence: undefined });
    expect(life.ownership.kind).toBe('none');
    // never held here: fence 0, which every shared record refuses
    expect(new TaskLifecycle('t3').release()).toEqual({ fence: 0, formerFence: undefined });
  });

  it('the ownership table: a move it does not list is a typed error, and leaves the ownership as it was', () => {
    const at = (kind: 'none' | 'held' | 'lost'): TaskLifecycle => {
      const life = new TaskLifecycle('t1');
      if (kind !== 'none') life.hold(1);
      if (kind === 'lost') life.letGo(0);
      return life;
    };
    const moves = { hold: (l: TaskLifecycle) => l.hold(2), letGo: (l: TaskLifecycle) => l.letGo(5) };
    const allowed = { none: ['hold'], held: ['letGo'], lost: ['hold'] } as const;
    for (const kind of ['none', 'held', 'lost'] as const) {
      for (const [name, move] of Object.entries(moves)) {
        const life = at(kind);
        if ((allowed[kind] as readonly string[]).includes(name))
          expect(() => move(life), `${kind} ${name}`).not.toThrow();
        else {
          expect(() => move(life), `${kind} ${name}`).toThrow(InvalidTaskTransitionError);
          expect(life.ownership.kind).toBe(kind);
        }
      }
    }
  });

  it('a claim: only of a queued task, one at a time; over however it went', () => {
    const life = at('queued');
    life.claim();
    expect(life.claiming).toBe(true);
    expect(() => life.claim()).toThrow(InvalidTaskTransitionError);
    life.end('frame');
    life.claimed();
    expect(life.claiming).toBe(false);
    expect(() => at('running').claim()).toThrow(InvalidTaskTransitionError);
  });

  it('the end record: unwritten (kept for a retry) → written, which stays written', () => {
    const life = at('ended');
    expect(life.endRecord).toBe('none');
    life.recordEnd('unwritten');
    life.recordEnd('written');
    expect(life.endRecord).toBe('written');
    expect(() => life.recordEnd('unwritten')).toThrow(InvalidTaskTransitionError);
  });
});
