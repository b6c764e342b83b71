import { z } from 'zod';
import type { QueuedEntry } from '../admission-queue-store.js';
import type {
  AcquireOutcome,
  StoredTask,
  StoredTaskState,
  TaskRefusal,
  TransitionOutcome,
} from '../task-ownership-store.js';

/*
 * Checked decoders of script replies (Redis is another process: a reply is `unknown` until checked).
 * A Lua table comes back as an array, a Lua string as a string, a Lua number as an integer
 * (truncated), nil or false as null. Each decoder throws a ReplyShapeError on anything else; the
 * facade (redis-scripts.ts) turns it into a StoreUnavailableError naming the script.
 */

/** A reply not of the shape its script's header states. */
export class ReplyShapeError extends Error {
  override readonly name = 'ReplyShapeError';
}

function shown(r: unknown): string {
  const s = JSON.stringify(r) ?? String(r);
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
}

export function unexpected(what: string, r: unknown): never {
  throw new ReplyShapeError(`expected ${what}, got ${shown(r)}`);
}

export function list(r: unknown): readonly unknown[] {
  return Array.isArray(r) ? r : unexpected('an array', r);
}

export function text(r: unknown): string {
  return typeof r === 'string' ? r : unexpected('a string', r);
}

export function int(r: unknown): number {
  return typeof r === 'number' && Number.isSafeInteger(r) ? r : unexpected('an integer', r);
}

/** An integer reply, or a number Redis keeps as a string (a hash field, a sorted-set score). */
export function numeric(r: unknown): number {
  const n = typeof r === 'string' && r.trim() !== '' ? Number(r) : typeof r === 'number' ? r : Number.NaN;
  return Number.isFinite(n) ? n : unexpected('a number', r);
}

/** 0 or 1. */
export function bit(r: unknown): boolean {
  return r === 1 ? true : r === 0 ? false : unexpected('0 or 1', r);
}

/** The reply 1 (a script that only writes). */
export function one(r: unknown): void {
  if (r !== 1) unexpected('1', r);
}

/** A hash as ioredis answers HGETALL: an object of strings. */
export function stringRecord(r: unknown): Record<string, string> {
  if (typeof r !== 'object' || r === null || Array.isArray(r)) unexpected('a hash', r);
  const out: Record<string, string> = {};
  for (const [field, value] of Object.entries(r)) out[field] = text(value);
  return out;
}

export function texts(r: unknown): string[] {
  return list(r).map(text);
}

/** A flat list of records of `width` fields each ({a, b, a, b, …}). */
export function records(r: unknown, width: number): unknown[][] {
  const flat = list(r);
  if (flat.length % width !== 0) unexpected(`a list of ${width}-tuples`, r);
  const out: unknown[][] = [];
  for (let i = 0; i < flat.length; i += width) out.push(flat.slice(i, i + width));
  return out;
}

export function member<const T extends string>(r: unknown, allowed: readonly T[]): T {
  const found = allowed.find((a) => a === r);
  return found ?? unexpected(allowed.map((a) => `'${a}'`).join(' | '), r);
}

const STATES = ['queued', 'running', 'ended'] as const satisfies readonly StoredTaskState[];

/** A record refusal as the task scripts answer it: 'unknown' | 'fenced', owner, fence | 'state', state. */
export function refusal(kind: unknown, a: unknown, b: unknown): TaskRefusal {
  switch (member(kind, ['unknown', 'fenced', 'state'])) {
    case 'unknown':
      return { ok: false, reason: 'unknown' };
    case 'fenced':
      return { ok: false, reason: 'fenced', owner: text(a), fence: int(b) };
    case 'state':
      return { ok: false, reason: 'state', state: member(a, STATES) };
  }
}

const EntrySchema = z.object({
  lane: z.enum(['interactive', 'batch']),
  group: z.string(),
  payload: z.string(),
  deadline_at: z.string(),
});

/** A queue entry as lua/includes/queue.lua stores it in q:entries (JSON). */
export function parseEntry(id: string, json: string): QueuedEntry {
  const e = EntrySchema.parse(JSON.parse(json));
  return {
    id,
    lane: e.lane,
    group: e.group,
    payload: e.payload,
    deadlineAt: e.deadline_at === 'inf' ? Number.POSITIVE_INFINITY : Number(e.deadline_at),
  };
}

const TaskHashSchema = z.object({
  state: z.enum(STATES),
  owner: z.string(),
  owner_until: z.coerce.number(),
  fence: z.coerce.number().int(),
  attempt: z.coerce.number().int(),
  record: z.string(),
  placement: z.string().optional(),
  outcome: z.string().optional(),
});

/** A task record hash (lua/includes/task-record.lua), as HGETALL returns it. */
export function parseTask(id: string, h: Record<string, string>): StoredTask {
  const t = TaskHashSchema.parse(h);
  return {
    id,
    state: t.state,
    owner: t.owner,
    ownerUntil: t.owner_until,
    fence: t.fence,
    attempt: t.attempt,
    record: t.record,
    placement: t.placement,
    outcome: t.outcome,
  };
}

/** A task record hash as a script answers it: a flat field/value list. */
export function taskHash(id: string, r: unknown): StoredTask {
  const h: Record<string, string> = {};
  for (const [field, value] of records(r, 2)) h[text(field)] = text(value);
  return parseTask(id, h);
}

/** `granted` with the entry a drop-lru admission evicted, when the reply names one (id and json, or '' and ''). */
export function withEvicted<T extends object>(
  granted: T,
  victim: unknown,
  victimJson: unknown,
): T | (T & { evicted: QueuedEntry }) {
  const id = text(victim);
  const json = text(victimJson);
  return id === '' ? granted : { ...granted, evicted: parseEntry(id, json) };
}

/** The reply of task-acquire or task-seize. */
export function acquireOutcome(r: unknown): AcquireOutcome {
  const [kind, a, b] = list(r);
  switch (member(kind, ['ok', 'held', 'fenced', 'unknown', 'state'])) {
    case 'ok':
      return { ok: true, fence: int(a), ownerUntil: int(b) };
    case 'held':
      return { ok: false, reason: 'held', owner: text(a), ownerUntil: int(b) };
    default:
      return refusal(kind, a, b);
  }
}

/** The reply of a record transition: {'ok', record hash} or a refusal. */
export function transitionOutcome(id: string, r: unknown): TransitionOutcome {
  const [kind, a, b] = list(r);
  return kind === 'ok' ? { ok: true, task: taskHash(id, a) } : refusal(kind, a, b);
}
