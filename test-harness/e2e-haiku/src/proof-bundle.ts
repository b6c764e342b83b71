import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CapturedLine } from '@llama-orch/daemon-support/daemon-launcher';
import type { HaikuRun } from './haiku-client.js';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

/** One line of `logs.jsonl`: `{source, received_at, line}` (the bundle's format); non-JSON lines are left out. */
function logRecord(l: CapturedLine): string[] {
  return l.json === undefined ? [] : [JSON.stringify({ source: l.source, received_at: l.at, line: l.json })];
}

/** Writes one run's evidence: request, admission, SSE transcript, metrics, logs, verification. */
export async function writeProofBundle(
  root: string,
  run: HaikuRun,
  extra: {
    metricsBefore: string;
    metricsAfter: string;
    /** The daemons' JSON log lines the run is about. */
    logs: readonly CapturedLine[];
    checks: Check[];
  },
): Promise<string> {
  const name = `${new Date(run.startedAt).toISOString().replace(/[:.]/g, '-')}-${String(run.request.task_id)}`;
  const dir = join(root, name);
  const tmp = `${dir}.tmp`;
  await mkdir(tmp, { recursive: true });
  await writeFile(join(tmp, 'request.json'), `${JSON.stringify(run.request, null, 2)}\n`);
  await writeFile(
    join(tmp, 'admission.json'),
    `${JSON.stringify({ status: run.admissionStatus, body: run.admission }, null, 2)}\n`,
  );
  await writeFile(join(tmp, 'sse_transcript.jsonl'), run.frames.map((f) => JSON.stringify(f)).join('\n') + '\n');
  await writeFile(join(tmp, 'metrics_before.txt'), extra.metricsBefore);
  await writeFile(join(tmp, 'metrics_after.txt'), extra.metricsAfter);
  await writeFile(join(tmp, 'logs.jsonl'), extra.logs.flatMap(logRecord).join('\n') + '\n');
  await writeFile(
    join(tmp, 'verification.json'),
    `${JSON.stringify(
      {
        task_id: run.request.task_id,
        correlation_id: run.correlationId,
        minute_word: run.minute,
        duration_ms: run.finishedAt - run.startedAt,
        passed: extra.checks.every((c) => c.ok),
        checks: extra.checks,
      },
      null,
      2,
    )}\n`,
  );
  await rename(tmp, dir);
  return dir;
}
