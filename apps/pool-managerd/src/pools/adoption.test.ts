import { spawn } from 'node:child_process';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HandoffFile } from '@llama-orch/contracts';
import { findFreePort } from '@llama-orch/engine-provisioner';
import { writeHandoffFile } from '../handoff/handoff-file.js';
import { startExternalEngine, type ExternalEngine } from '../testing/external-engine.js';
import {
  collect,
  dispatch,
  poolStatus,
  startHarness,
  textOf,
  until,
  waitReady,
  type Harness,
} from '../testing/harness.js';
import { canTransition } from './pool-state.js';

let h: Harness;
const engines: ExternalEngine[] = [];
const STALLING = fileURLToPath(new URL('../fixtures/stalling-engine.mjs', import.meta.url));

beforeAll(async () => {
  h = await startHarness({ pools: [{ id: 'own', model: 'synthetic:llama', ctx: 1024, threads: 1 }] });
  await waitReady(h, 'own');
}, 45 * 60_000);

afterAll(async () => {
  await h?.close();
  for (const e of engines) await e.stop();
});

function external(
  e: Pick<ExternalEngine, 'url' | 'pid' | 'modelPath' | 'args'>,
  poolId: string,
  over: Partial<HandoffFile> = {},
): HandoffFile {
  return {
    pool_id: poolId,
    replica_id: 'r0',
    engine: 'llamacpp',
    engine_version: 'set-by-operator',
    url: e.url,
    pid: e.pid,
    model: { id: 'synthetic:llama', path: e.modelPath },
    slots_total: 1,
    flags: e.args,
    provisioning_mode: 'external',
    written_at: new Date().toISOString(),
    ...over,
  };
}

function logged(pattern: RegExp): Record<string, unknown> | undefined {
  return h.logs.find((l) => typeof l.msg === 'string' && pattern.test(l.msg));
}

describe('handoff directory: garbage is rejected, external engines are adopted', () => {
  it('a garbage or partial file is rejected with a logged reason and the daemon keeps going', async () => {
    writeFileSync(join(h.runtime.engines, 'junk.json'), '{"pool_id": "x", "url": "http://127.');
    writeFileSync(join(h.runtime.engines, 'almost-r0.json'), JSON.stringify({ pool_id: 'almost', replica_id: 'r0' }));
    const notJson = await until(() => logged(/^handoff file rejected: not JSON/), 'rejection logged', 10_000);
    expect(notJson).toMatchObject({ level: 40, reason: 'not_json' });
    expect(String(notJson.path)).toMatch(/junk\.json$/);
    const schema = await until(
      () => logged(/^handoff file rejected: not a HandoffFile/),
      'schema rejection logged',
      10_000,
    );
    expect(String(schema.msg)).toMatch(/engine/);
    const health = await request(`${h.url}/health`, { headers: { authorization: `Bearer ${h.token}` } });
    expect(health.statusCode).toBe(200);
    expect(await health.body.json()).toMatchObject({ pools: { own: 'ready' } });
    const metrics = await (await request(`${h.url}/metrics`)).body.text();
    expect(metrics).toMatch(/llorch_handoff_files_rejected_total\{reason="not_json"\} 1/);
    expect(metrics).toMatch(/llorch_handoff_files_rejected_total\{reason="schema"\} 1/);
  });

  it('an external engine dropped by hand is adopted and dispatchable; removing the file makes it not ready', async () => {
    const e = await startExternalEngine();
    engines.push(e);
    const path = await writeHandoffFile(h.runtime.engines, external(e, 'ext0'));
    const s = await waitReady(h, 'ext0', 20_000);
    expect(s).toMatchObject({
      state: 'ready',
      live: true,
      slots_total: 1,
      slots_free: 1,
      engine_url: e.url,
      models: ['synthetic:llama'],
    });
    expect(s.engine_version).toMatch(/^b\d+-[0-9a-f]+$/); // from the engine's /props, not the file
    const ev = await collect(
      (await dispatch(h, 'ext0', { prompt: 'hello', max_tokens: 8, seed: 1, greedy: true })).events,
    );
    expect(ev.at(-1)).toMatchObject({ type: 'end', tokens_out: 8, pool_id: 'ext0' });
    expect(textOf(ev).length).toBeGreaterThan(0);
    unlinkSync(path);
    const gone = await until(
      async () => {
        const st = await poolStatus(h, 'ext0');
        return st.ready ? undefined : st;
      },
      'ext0 not ready',
      10_000,
    );
    expect(gone).toMatchObject({ state: 'stopped', live: false });
    expect((await dispatch(h, 'ext0', { prompt: 'x', max_tokens: 1 })).status).toBe(503);
    expect(e.child.exitCode).toBeNull(); // not ours: released, never killed
  });

  it('an external engine that dies makes its pool not ready', async () => {
    const e = await startExternalEngine();
    engines.push(e);
    await writeHandoffFile(h.runtime.engines, external(e, 'ext1'));
    await waitReady(h, 'ext1', 20_000);
    await e.stop();
    const s = await until(
      async () => {
        const st = await poolStatus(h, 'ext1');
        return st.ready ? undefined : st;
      },
      'ext1 not ready',
      10_000,
    );
    expect(s.state).toBe('failed');
    expect(s.last_error).toMatch(/external engine/);
  });

  it('a handoff for an unreachable engine, or for a configured pool that has its own engine, is rejected', async () => {
    const port = await findFreePort();
    await writeHandoffFile(h.runtime.engines, {
      pool_id: 'ghost',
      replica_id: 'r0',
      engine: 'llamacpp',
      engine_version: 'x',
      url: `http://127.0.0.1:${port}`,
      pid: 999_999,
      model: { id: 'm', path: '/nope' },
      slots_total: 1,
      flags: [],
      provisioning_mode: 'external',
      written_at: new Date().toISOString(),
    });
    const unreachable = await until(
      () => logged(/^handoff file rejected: engine at .* is not healthy/),
      'unreachable rejection',
      15_000,
    );
    expect(unreachable).toMatchObject({ reason: 'rejected' });
    const e = await startExternalEngine();
    engines.push(e);
    // `own` is configured and running: an operator's file for it must not hijack it.
    await writeHandoffFile(h.runtime.engines, { ...external(e, 'own'), replica_id: 'r1' });
    const conflict = await until(
      () => logged(/^handoff file rejected: pool own is managed here and has its own engine/),
      'conflict rejection',
      15_000,
    );
    expect(conflict).toBeDefined();
    expect((await poolStatus(h, 'own')).engine_url).not.toBe(e.url);
    expect(h.manager.pools.has('ghost')).toBe(false);
  });

  it('a configured pool without an engine (drained) adopts an external engine', async () => {
    const res = await request(`${h.url}/v2/pools/own/drain`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ deadline_ms: 1000 }),
    });
    expect(res.statusCode).toBe(202);
    await until(async () => (await poolStatus(h, 'own')).state === 'stopped', 'own stopped', 20_000);
    const e = await startExternalEngine();
    engines.push(e);
    await writeHandoffFile(h.runtime.engines, { ...external(e, 'own'), replica_id: 'r2' });
    const s = await waitReady(h, 'own', 20_000);
    expect(s.engine_url).toBe(e.url);
    const ev = await collect((await dispatch(h, 'own', { prompt: 'adopted', max_tokens: 4, greedy: true })).events);
    expect(ev.at(-1)).toMatchObject({ type: 'end', pool_id: 'own' });
  });

  it('a dispatch over HTTP/1.1 is answered with headers before the engine sends a byte (FIXTURE engine that stalls)', async () => {
    const child = spawn(process.execPath, [STALLING], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const seen: Record<string, unknown>[] = [];
    lines.on('line', (l) => seen.push(JSON.parse(l) as Record<string, unknown>));
    try {
      const { url } = await until(
        () => seen.find((l) => typeof l.url === 'string') as { url: string } | undefined,
        'fixture listening',
        10_000,
      );
      await writeHandoffFile(
        h.runtime.engines,
        external({ url, pid: child.pid as number, modelPath: '/fixture', args: [] }, 'stall'),
      );
      await waitReady(h, 'stall', 20_000);
      // undici resolves at the response headers: with no byte from the engine, only an early flush gets here.
      const d = await dispatch(h, 'stall', { prompt: 'a very long prompt', max_tokens: 4 });
      expect(d.status).toBe(200);
      expect(d.headers['content-type']).toMatch(/application\/x-ndjson/);
      await until(() => seen.find((l) => l.completion === true), 'engine holds the completion', 10_000);
      d.destroy();
      await until(
        async () => ((await poolStatus(h, 'stall')).slots_free === 1 ? true : undefined),
        'slot back after the disconnect',
        10_000,
      );
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('the pool state machine, the one authority, refused no transition on these paths', () => {
    expect(h.illegalTransitions()).toEqual([]);
    expect(h.transitions.every((t) => canTransition(t.from, t.to))).toBe(true);
    const seen = new Set(h.transitions.map((t) => `${t.pool_id}:${t.from}>${t.to}`));
    // Adoption as a pool of its own and into a drained configured pool, engine death, file removal.
    for (const step of [
      'ext0:stopped>ready',
      'ext0:ready>stopped',
      'ext1:ready>failed',
      'own:ready>draining',
      'own:draining>stopped',
      'own:stopped>ready',
    ]) {
      expect(seen).toContain(step);
    }
  });
});
