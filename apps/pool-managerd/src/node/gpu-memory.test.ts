// A FIXTURE nvidia-smi (a shell script printing what the real one prints for
// `--query-gpu=index,memory.free --format=csv,noheader,nounits`) stands in for GPUs this machine lacks.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { PoolSnapshot } from '@llama-orch/contracts';
import { GpuMemoryMonitor, parseFreeMemory, withVramFree } from './gpu-memory.js';

const MIB = 1024 ** 2;
const silent = pino({ level: 'silent' });

function snapshot(pool_id: string): PoolSnapshot {
  return {
    pool_id,
    state: 'ready',
    ready: true,
    draining: false,
    slots_total: 1,
    slots_free: 1,
    models: ['m'],
    engine_version: 'b1',
    ctx: 2048,
    deterministic: false,
    decode_tps: 0,
  };
}

describe('parseFreeMemory', () => {
  it('reads index, MiB free per line and skips what does not parse', () => {
    const free = parseFreeMemory('0, 80123\n1, 512\n[N/A]\n2, n/a\n');
    expect([...free]).toEqual([
      [0, 80123 * MIB],
      [1, 512 * MIB],
    ]);
  });
});

describe('GpuMemoryMonitor with a FIXTURE nvidia-smi', () => {
  let dir: string | undefined;
  let monitor: GpuMemoryMonitor | undefined;
  afterEach(async () => {
    await monitor?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** An nvidia-smi that checks its arguments and prints the contents of `readings` (or fails when it says `fail`). */
  async function fixture(readings: string): Promise<{ smi: string; set: (text: string) => Promise<void> }> {
    dir = await mkdtemp(join(tmpdir(), 'gpu-mem-'));
    const data = join(dir, 'readings');
    const smi = join(dir, 'nvidia-smi');
    await writeFile(data, readings);
    await writeFile(
      smi,
      `#!/bin/sh
[ "$1" = "--query-gpu=index,memory.free" ] && [ "$2" = "--format=csv,noheader,nounits" ] || { echo "unexpected args: $*" >&2; exit 2; }
grep -q fail "${data}" && { echo "NVIDIA-SMI has failed" >&2; exit 9; }
cat "${data}"
`,
    );
    await chmod(smi, 0o755);
    return { smi, set: (text) => writeFile(data, text) };
  }

  it('sums the devices of a mask, every GPU without one; unknown devices and failed samples give no reading', async () => {
    const f = await fixture('0, 1000\n1, 3000\n');
    monitor = new GpuMemoryMonitor({ intervalMs: 60_000, logger: silent, nvidiaSmi: f.smi });
    expect(monitor.freeBytes()).toBeUndefined();
    await monitor.sample();
    expect(monitor.freeBytes('1')).toBe(3000 * MIB);
    expect(monitor.freeBytes('0,1')).toBe(4000 * MIB);
    expect(monitor.freeBytes()).toBe(4000 * MIB);
    expect(monitor.freeBytes('0,7')).toBeUndefined();
    await f.set('0, 250\n1, 3000\n');
    await monitor.sample();
    expect(monitor.freeBytes('0')).toBe(250 * MIB);
    await f.set('fail\n');
    await monitor.sample();
    expect(monitor.freeBytes('0')).toBeUndefined();
  });

  it('start() samples at once and then every interval; close() stops it and is idempotent', async () => {
    const f = await fixture('0, 100\n');
    monitor = new GpuMemoryMonitor({ intervalMs: 50, logger: silent, nvidiaSmi: f.smi });
    monitor.start();
    await expect.poll(() => monitor?.freeBytes(), { timeout: 5000 }).toBe(100 * MIB);
    await f.set('0, 200\n');
    await expect.poll(() => monitor?.freeBytes(), { timeout: 5000 }).toBe(200 * MIB);
    await Promise.all([monitor.close(), monitor.close()]);
    expect(monitor.state).toBe('closed');
    expect(monitor.freeBytes()).toBeUndefined();
  });

  it("heartbeat snapshots: GPU pools get their devices' free memory, CPU pools none", async () => {
    const f = await fixture('0, 1000\n1, 3000\n');
    monitor = new GpuMemoryMonitor({ intervalMs: 60_000, logger: silent, nvidiaSmi: f.smi });
    await monitor.sample();
    const pools = [
      { id: 'cpu', gpu: 'off' as const },
      { id: 'gpu1', gpu: 'required' as const, device_mask: '1' },
      { id: 'any', gpu: 'optional' as const },
    ];
    const out = withVramFree([snapshot('cpu'), snapshot('gpu1'), snapshot('any')], pools, monitor);
    expect(out.map((s) => s.vram_free_bytes)).toEqual([undefined, 3000 * MIB, 4000 * MIB]);
  });
});
