import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { HandoffFileSchema, type HandoffFile } from '@llama-orch/contracts';

/** `<engines dir>/<pool_id>-<replica_id>.json` */
export function handoffPath(enginesDir: string, poolId: string, replicaId: string): string {
  return join(enginesDir, `${poolId}-${replicaId}.json`);
}

/** Whether a path names a handoff candidate (temp files of atomic writes are not). */
export function isHandoffName(path: string): boolean {
  const name = basename(path);
  return name.endsWith('.json') && !name.startsWith('.');
}

/** What a managed engine's handoff file says about it (the engine's own answers, not the config's). */
export interface ManagedEngineFacts {
  poolId: string;
  replicaId: string;
  /** The engine's `build_info`. */
  engineVersion: string;
  url: string;
  pid: number;
  model: { id: string; path: string };
  slotsTotal: number;
  deviceMask?: string | undefined;
  flags: readonly string[];
}

/** The handoff record of an engine this daemon spawned (the one place it is built). */
export function managedHandoff(f: ManagedEngineFacts): HandoffFile {
  return {
    pool_id: f.poolId,
    replica_id: f.replicaId,
    engine: 'llamacpp',
    engine_version: f.engineVersion,
    url: f.url,
    pid: f.pid,
    model: { id: f.model.id, path: f.model.path },
    slots_total: f.slotsTotal,
    ...(f.deviceMask !== undefined ? { device_mask: f.deviceMask } : {}),
    flags: [...f.flags],
    provisioning_mode: 'managed',
    written_at: new Date().toISOString(),
  };
}

/**
 * Writes the handoff atomically (temp file in the same dir + rename) so the watcher never sees a
 * partial file. The content is validated before it is written.
 */
export async function writeHandoffFile(enginesDir: string, handoff: HandoffFile): Promise<string> {
  const content = HandoffFileSchema.parse(handoff);
  await mkdir(enginesDir, { recursive: true });
  const path = handoffPath(enginesDir, content.pool_id, content.replica_id);
  const tmp = join(enginesDir, `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  await writeFile(tmp, `${JSON.stringify(content, null, 2)}\n`);
  await rename(tmp, path);
  return path;
}

export async function removeHandoffFile(path: string): Promise<void> {
  await rm(path, { force: true });
}
