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
