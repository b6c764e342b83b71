import { mkdtempSync, rmSync, writeFileSync, unlinkSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { HandoffFile } from '@llama-orch/contracts';
import { HandoffError } from '../errors.js';
import { writeHandoffFile } from './handoff-file.js';
import { HandoffWatcher, type HandoffRejectReason } from './handoff-watcher.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function handoff(over: Partial<HandoffFile> = {}): HandoffFile {
  return {
    pool_id: 'ext',
    replica_id: 'r0',
    engine: 'llamacpp',
    engine_version: 'b1-x',
    url: 'http://127.0.0.1:1',
    pid: 4242,
    model: { id: 'm', path: '/m.gguf' },
    slots_total: 1,
    flags: [],
    provisioning_mode: 'external',
    written_at: new Date().toISOString(),
    ...over,
  };
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function setup(onHandoff: (path: string, h: HandoffFile) => Promise<void> = async () => undefined) {
  const dir = mkdtempSync(join(tmpdir(), 'handoff-'));
  const seen: Array<{ path: string; h: HandoffFile }> = [];
  const removed: string[] = [];
  const rejected: Array<{ path: string; reason: HandoffRejectReason; message: string }> = [];
  const w = new HandoffWatcher({
    dir,
    logger: pino({ level: 'silent' }),
    stabilityMs: 20,
    onHandoff: async (path, h) => {
      await onHandoff(path, h);
      seen.push({ path, h });
    },
    onRemoved: async (path) => {
      removed.push(path);
    },
    onRejected: (path, reason, message) => rejected.push({ path, reason, message }),
  });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => w.close());
  return { dir, w, seen, removed, rejected };
}

describe('HandoffWatcher', () => {
  it('ingests existing and new valid files, and reports removals', async () => {
    const pre = mkdtempSync(join(tmpdir(), 'handoff-pre-'));
    cleanups.push(() => rmSync(pre, { recursive: true, force: true }));
    const { dir, w, seen, removed } = setup();
    await writeHandoffFile(dir, handoff({ pool_id: 'a' }));
    await w.start();
    await until(() => seen.length === 1);
    const path = await writeHandoffFile(dir, handoff({ pool_id: 'b' }));
    await until(() => seen.length === 2);
    expect(seen.map((s) => s.h.pool_id).sort()).toEqual(['a', 'b']);
    unlinkSync(path);
    await until(() => removed.length === 1);
    expect(removed[0]).toBe(path);
  });

  it('rejects garbage, partial and misnamed files with a reason, once per version', async () => {
    const { dir, w, seen, rejected } = setup();
    await w.start();
    writeFileSync(join(dir, 'junk.json'), '{"pool_id": "x", "url": ');
    writeFileSync(join(dir, 'shape.json'), JSON.stringify({ pool_id: 'x' }));
    writeFileSync(join(dir, 'wrong-name.json'), JSON.stringify(handoff({ pool_id: 'other' })));
    writeFileSync(join(dir, 'ignored.txt'), 'not a handoff');
    await until(() => rejected.length === 3);
    const byFile = Object.fromEntries(rejected.map((r) => [r.path.split('/').pop(), r.reason]));
    expect(byFile).toEqual({ 'junk.json': 'not_json', 'shape.json': 'schema', 'wrong-name.json': 'file_name' });
    expect(rejected.find((r) => r.reason === 'schema')?.message).toMatch(/replica_id/);
    // Touching without changing mtime/size does not retry; completing the file does.
    await new Promise((r) => setTimeout(r, 200));
    expect(rejected.length).toBe(3);
    writeFileSync(join(dir, 'junk.json'), JSON.stringify(handoff({ pool_id: 'junk', replica_id: 'r0' })));
    await new Promise((r) => setTimeout(r, 300));
    // Still misnamed for its content (junk-r0.json expected).
    expect(rejected.filter((r) => r.path.endsWith('junk.json')).map((r) => r.reason)).toEqual([
      'not_json',
      'file_name',
    ]);
    expect(seen).toEqual([]);
  });

  it('remembers a file the consumer rejected until it changes', async () => {
    let calls = 0;
    const { dir, w, rejected, seen } = setup(async () => {
      calls += 1;
      if (calls === 1) throw new HandoffError('engine unreachable');
    });
    await w.start();
    const path = await writeHandoffFile(dir, handoff());
    await until(() => rejected.length === 1);
    expect(rejected[0]).toMatchObject({ reason: 'rejected', message: 'engine unreachable' });
    const later = new Date(Date.now() + 5000);
    utimesSync(path, later, later);
    await until(() => seen.length === 1);
    expect(calls).toBe(2);
  });
});
