import { readFileSync } from 'node:fs';
import { availableParallelism, hostname, totalmem } from 'node:os';
import { execa } from 'execa';
import type { Logger } from 'pino';
import { z } from 'zod';
import { NodeCapabilitiesSchema } from '@llama-orch/contracts';

export type NodeCapabilities = z.infer<typeof NodeCapabilitiesSchema>;
type GpuInfo = NodeCapabilities['gpus'][number];

const MEMORY_UNITS: Readonly<Record<string, number>> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/**
 * Parses `nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv,noheader`, e.g.
 * `0, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0`. Lines that do not parse are skipped.
 */
export function parseNvidiaSmi(output: string): GpuInfo[] {
  const gpus: GpuInfo[] = [];
  for (const line of output.split('\n')) {
    const cols = line.split(',').map((c) => c.trim());
    if (cols.length < 4) continue;
    const [index, name, memory, cc] = [
      cols[0] ?? '',
      cols.slice(1, -2).join(','),
      cols[cols.length - 2] ?? '',
      cols[cols.length - 1] ?? '',
    ];
    const m = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)$/.exec(memory);
    const id = Number.parseInt(index, 10);
    if (!Number.isInteger(id) || m?.[1] === undefined || m[2] === undefined) continue;
    gpus.push({
      device_id: id,
      name,
      vram_total_bytes: Math.round(Number(m[1]) * (MEMORY_UNITS[m[2]] ?? 1)),
      compute_capability: cc,
    });
  }
  return gpus;
}

/** GPUs via nvidia-smi when it is installed and works; [] otherwise (CPU-only nodes). */
export async function detectGpus(logger: Logger, nvidiaSmi = 'nvidia-smi'): Promise<GpuInfo[]> {
  try {
    const r = await execa(nvidiaSmi, ['--query-gpu=index,name,memory.total,compute_cap', '--format=csv,noheader'], {
      timeout: 10_000,
      reject: false,
    });
    if (r.exitCode !== 0) {
      if (r.failed && (r as { code?: string }).code !== 'ENOENT')
        logger.warn(
          { exit_code: r.exitCode, stderr: String(r.stderr).slice(0, 300) },
          'nvidia-smi failed; reporting no GPUs',
        );
      return [];
    }
    return parseNvidiaSmi(String(r.stdout));
  } catch (err) {
    logger.debug({ err }, 'nvidia-smi not available');
    return [];
  }
}

export async function detectCapabilities(logger: Logger, nvidiaSmi?: string): Promise<NodeCapabilities> {
  return NodeCapabilitiesSchema.parse({
    gpus: await detectGpus(logger, nvidiaSmi),
    cpu_cores: availableParallelism(),
    ram_total_bytes: totalmem(),
  });
}

/** `/etc/machine-id` when present, else the hostname. */
export function machineId(): string {
  try {
    const id = readFileSync('/etc/machine-id', 'utf8').trim();
    if (id !== '') return id;
  } catch {
    // No machine-id (containers): the hostname identifies the machine well enough.
  }
  return hostname();
}
