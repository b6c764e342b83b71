import { z } from 'zod';
import { InvalidParamsError } from '../errors.js';
import type { TaskRecordEntry, TaskRecordQuery } from './task-record-store.js';

/*
 * What both task record stores share about a list: the order, the filters, the cursor and the
 * scan bound. One definition, so a page from one store and the next from the other (a replica
 * restarted onto Redis) read the same way, and the contract tests hold both to it.
 */

/**
 * Most entries one `list` call examines (matching or not) before it answers with `next`: a filter
 * that matches little costs the client more calls, never one long call on the store.
 */
export const TASK_RECORD_SCAN_LIMIT = 2000;

/** A position in the list order: newest admitted first, ties by id descending. */
export interface ListPosition {
  readonly admittedAt: number;
  readonly id: string;
}

/**
 * Negative when `a` comes first in the list (newer admitted, or the same ms and a greater id). Ids
 * compare as UTF-8 bytes, the order Redis gives members of equal score, so both stores agree.
 */
export function listOrder(a: ListPosition, b: ListPosition): number {
  if (a.admittedAt !== b.admittedAt) return b.admittedAt - a.admittedAt;
  return a.id === b.id ? 0 : -Buffer.compare(Buffer.from(a.id), Buffer.from(b.id));
}

/** Whether `p` comes after `cursor` in the list order (undefined cursor: everything does). */
export function isAfter(p: ListPosition, cursor: ListPosition | undefined): boolean {
  return cursor === undefined || listOrder(p, cursor) > 0;
}

const CursorSchema = z.tuple([z.number(), z.string().min(1)]);

/**
 * The cursor names the last position a page examined (not an offset), so entries admitted while a
 * client pages (newer, so before it) neither shift nor repeat the pages after it.
 */
export function encodeCursor(p: ListPosition): string {
  return Buffer.from(JSON.stringify([p.admittedAt, p.id])).toString('base64url');
}

/** The position a cursor names; InvalidParamsError for anything no store wrote. */
export function decodeCursor(cursor: string | undefined): ListPosition | undefined {
  if (cursor === undefined) return undefined;
  try {
    const [admittedAt, id] = CursorSchema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
    return { admittedAt, id };
  } catch (err) {
    throw new InvalidParamsError('cursor: not a cursor this list returned', { param: 'cursor', cause: err });
  }
}

/** Whether the entry passes the query's filters (the cursor and `since` bound the scan instead). */
export function matchesQuery(e: TaskRecordEntry, q: TaskRecordQuery): boolean {
  return (
    (q.state === undefined || e.state === q.state) &&
    (q.model === undefined || e.model === q.model || e.modelRef === q.model) &&
    (q.priority === undefined || e.priority === q.priority) &&
    (q.since === undefined || e.admittedAt >= q.since) &&
    (q.clientKey === undefined || e.clientKey === q.clientKey)
  );
}
