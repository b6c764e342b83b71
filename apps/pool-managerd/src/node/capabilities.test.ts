import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { detectCapabilities, parseNvidiaSmi } from './capabilities.js';

describe('capabilities', () => {
  it('parses nvidia-smi csv output', () => {
    const out = '0, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n1, NVIDIA H200, 143771 MiB, 9.0\ngarbage\n';
    expect(parseNvidiaSmi(out)).toEqual([
      { device_id: 0, name: 'NVIDIA H100 80GB HBM3', vram_total_bytes: 81559 * 1024 ** 2, compute_capability: '9.0' },
      { device_id: 1, name: 'NVIDIA H200', vram_total_bytes: 143771 * 1024 ** 2, compute_capability: '9.0' },
    ]);
  });

  it('reports no GPUs when nvidia-smi is missing, and real CPU/RAM', async () => {
    const caps = await detectCapabilities(pino({ level: 'silent' }), '/nonexistent/nvidia-smi');
    expect(caps.gpus).toEqual([]);
    expect(caps.cpu_cores).toBeGreaterThan(0);
    expect(caps.ram_total_bytes).toBeGreaterThan(0);
  });
});
