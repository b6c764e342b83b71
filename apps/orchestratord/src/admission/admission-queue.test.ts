import { describe, expect, it } from 'vitest';
import { AdmissionQueue } from './admission-queue.js';

const ids = (q: AdmissionQueue<string>): string[] => [...q].map((e) => e.id);

describe('AdmissionQueue', () => {
  it('dequeues interactive before batch, FIFO within a lane', () => {
    const q = new AdmissionQueue<string>({ capacity: 10, policy: 'reject' });
    q.enqueue('b1', 'batch', 'b1');
    q.enqueue('i1', 'interactive', 'i1');
    q.enqueue('b2', 'batch', 'b2');
    q.enqueue('i2', 'interactive', 'i2');
    expect(ids(q)).toEqual(['i1', 'i2', 'b1', 'b2']);
    expect([q.dequeue()?.id, q.dequeue()?.id, q.dequeue()?.id, q.dequeue()?.id, q.dequeue()]).toEqual([
      'i1',
      'i2',
      'b1',
      'b2',
      undefined,
    ]);
  });

  it('reports 0-based positions in dispatch order at enqueue', () => {
    const q = new AdmissionQueue<string>({ capacity: 10, policy: 'reject' });
    expect(q.enqueue('b1', 'batch', 'x')).toEqual({ kind: 'queued', position: 0 });
    expect(q.enqueue('i1', 'interactive', 'x')).toEqual({ kind: 'queued', position: 0 });
    expect(q.enqueue('b2', 'batch', 'x')).toEqual({ kind: 'queued', position: 2 });
    expect(q.enqueue('i2', 'interactive', 'x')).toEqual({ kind: 'queued', position: 1 });
    expect(q.positionOf('b2')).toBe(3);
    expect(q.positionOf('nope')).toBeUndefined();
  });

  it('removes by id from the middle, head and tail of a lane', () => {
    const q = new AdmissionQueue<string>({ capacity: 10, policy: 'reject' });
    for (const id of ['a', 'b', 'c', 'd']) q.enqueue(id, 'batch', id);
    expect(q.remove('b')?.id).toBe('b');
    expect(q.remove('a')?.id).toBe('a');
    expect(q.remove('d')?.id).toBe('d');
    expect(q.remove('zz')).toBeUndefined();
    expect(ids(q)).toEqual(['c']);
    expect(q.size).toBe(1);
    q.enqueue('e', 'batch', 'e');
    expect(ids(q)).toEqual(['c', 'e']);
  });

  it('reject policy refuses when full and keeps every queued entry', () => {
    const q = new AdmissionQueue<string>({ capacity: 2, policy: 'reject' });
    q.enqueue('a', 'batch', 'a');
    q.enqueue('b', 'interactive', 'b');
    expect(q.enqueue('c', 'interactive', 'c')).toEqual({ kind: 'full', policy: 'reject' });
    expect(ids(q)).toEqual(['b', 'a']);
  });

  it('drop-lru evicts the oldest batch entry and returns it for notification', () => {
    const q = new AdmissionQueue<string>({ capacity: 3, policy: 'drop-lru' });
    q.enqueue('b1', 'batch', 'b1');
    q.enqueue('i1', 'interactive', 'i1');
    q.enqueue('b2', 'batch', 'b2');
    const r = q.enqueue('i2', 'interactive', 'i2');
    expect(r.kind).toBe('queued');
    expect(r.kind === 'queued' ? r.evicted?.id : undefined).toBe('b1');
    expect(ids(q)).toEqual(['i1', 'i2', 'b2']);
    const r2 = q.enqueue('b3', 'batch', 'b3');
    expect(r2.kind === 'queued' ? r2.evicted?.id : undefined).toBe('b2');
    expect(ids(q)).toEqual(['i1', 'i2', 'b3']);
  });

  it('drop-lru refuses when no batch entry can be evicted', () => {
    const q = new AdmissionQueue<string>({ capacity: 2, policy: 'drop-lru' });
    q.enqueue('i1', 'interactive', 'i1');
    q.enqueue('i2', 'interactive', 'i2');
    expect(q.enqueue('b1', 'batch', 'b1')).toEqual({ kind: 'full', policy: 'drop-lru' });
    expect(ids(q)).toEqual(['i1', 'i2']);
  });

  it('takes expired entries by deadline and leaves the rest in order', () => {
    const q = new AdmissionQueue<string>({ capacity: 10, policy: 'reject' });
    q.enqueue('a', 'batch', 'a', 100);
    q.enqueue('b', 'interactive', 'b', 300);
    q.enqueue('c', 'batch', 'c', 50);
    q.enqueue('d', 'batch', 'd');
    expect(q.takeExpired(100).map((e) => e.id)).toEqual(['a', 'c']);
    expect(ids(q)).toEqual(['b', 'd']);
    expect(q.takeExpired(1e12).map((e) => e.id)).toEqual(['b']);
  });

  it('finds the first eligible entry in dispatch order without removing it (no head-of-line blocking)', () => {
    const q = new AdmissionQueue<{ model: string }>({ capacity: 10, policy: 'reject' });
    q.enqueue('i-a', 'interactive', { model: 'a' });
    q.enqueue('i-b', 'interactive', { model: 'b' });
    q.enqueue('b-b', 'batch', { model: 'b' });
    expect(q.find((e) => e.item.model === 'b')?.id).toBe('i-b');
    expect(q.size).toBe(3);
    expect(q.find((e) => e.item.model === 'c')).toBeUndefined();
  });

  it('requeueFront puts a re-placed entry at the head of its lane, even beyond capacity', () => {
    const q = new AdmissionQueue<string>({ capacity: 2, policy: 'reject' });
    q.enqueue('i1', 'interactive', 'i1');
    q.enqueue('b1', 'batch', 'b1');
    q.requeueFront('b0', 'batch', 'b0');
    q.requeueFront('i0', 'interactive', 'i0');
    expect(ids(q)).toEqual(['i0', 'i1', 'b0', 'b1']);
    expect(q.size).toBe(4);
  });

  it('rejects duplicate ids and an invalid capacity', () => {
    const q = new AdmissionQueue<string>({ capacity: 2, policy: 'reject' });
    q.enqueue('a', 'batch', 'a');
    expect(() => q.enqueue('a', 'batch', 'a')).toThrow(/duplicate/);
    expect(() => new AdmissionQueue<string>({ capacity: 0, policy: 'reject' })).toThrow(RangeError);
  });

  it('iteration tolerates removal of the current entry', () => {
    const q = new AdmissionQueue<string>({ capacity: 10, policy: 'reject' });
    for (const id of ['a', 'b', 'c']) q.enqueue(id, 'batch', id);
    const seen: string[] = [];
    for (const e of q) {
      seen.push(e.id);
      q.remove(e.id);
    }
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(q.size).toBe(0);
  });

  it('counts entries of a group ahead of a new entry, per lane, through every way in and out', () => {
    const q = new AdmissionQueue<{ model: string }>({ capacity: 3, policy: 'drop-lru', groupOf: (t) => t.model });
    q.enqueue('b1', 'batch', { model: 'm' });
    q.enqueue('i1', 'interactive', { model: 'm' });
    q.enqueue('i2', 'interactive', { model: 'other' });
    expect(q.countAhead('m', 'interactive')).toBe(1);
    expect(q.countAhead('m', 'batch')).toBe(2);
    expect(q.countAhead('nobody', 'batch')).toBe(0);
    // Full: drop-lru evicts b1, the only batch entry.
    const r = q.enqueue('i3', 'interactive', { model: 'm' });
    expect(r).toMatchObject({ kind: 'queued', evicted: { id: 'b1' } });
    expect(q.countAhead('m', 'batch')).toBe(2);
    q.remove('i1');
    expect(q.countAhead('m', 'interactive')).toBe(1);
    q.requeueFront('i1', 'interactive', { model: 'm' });
    expect(q.countAhead('m', 'interactive')).toBe(2);
    q.dequeue();
    q.takeExpired(Number.POSITIVE_INFINITY);
    expect(q.countAhead('m', 'batch')).toBe(0);
    expect(q.countAhead('other', 'interactive')).toBe(0);
  });
});
