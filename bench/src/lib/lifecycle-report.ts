import type { Figure } from './result.js';
import { rounded, summarize } from './stats.js';
import type { ColdSample, DirectSample, ProjectionRow } from './lifecycle-cold.js';
import type { SwapSummary } from './lifecycle-swaps.js';
import type { BenchModel } from './on-demand.js';

/** `pnpm bench lifecycle`: its figures, notes and details from what the parts measured. */

const MiB = 1024 * 1024;

/** The cold loads of one model: interleaved pairs of a load through orchestratord and the engine alone. */
export interface ColdResult {
  model: BenchModel;
  fileBytes: number;
  argv: string[];
  orch: ColdSample[];
  direct: DirectSample[];
}

const ms = (label: string, value: number): Figure => ({ label, value, unit: 'ms' });
export const mib = (b: number | undefined): number | undefined =>
  b === undefined ? undefined : Math.round((b / MiB) * 10) / 10;

/** Per model size: request → first token through orchestratord and alone (p50), and the added time of the pairs (p50, p90). */
export function coldFigures(r: ColdResult): Record<string, Figure> {
  const n = Math.min(r.orch.length, r.direct.length);
  const added = Array.from(
    { length: n },
    (_, i) => (r.orch[i]?.firstTokenMs ?? NaN) - (r.direct[i]?.firstTokenMs ?? NaN),
  );
  const a = summarize(added);
  const what = `${r.model.name} (${(r.fileBytes / MiB).toFixed(1)} MiB)`;
  const k = `cold_${r.model.name}`;
  return {
    [`${k}_orch_p50`]: ms(
      `cold load ${what} through orchestratord: request → first token, p50`,
      summarize(r.orch.map((s) => s.firstTokenMs)).p50,
    ),
    [`${k}_direct_p50`]: ms(
      `${what} engine alone: spawn → first token, p50`,
      summarize(r.direct.map((s) => s.firstTokenMs)).p50,
    ),
    [`${k}_added_p50`]: ms(`cold load ${what}: added over the engine alone, p50 of pairs`, a.p50),
    [`${k}_added_p90`]: ms(`cold load ${what}: added over the engine alone, p90 of pairs`, a.p90),
  };
}

/** Per mode and setup: latency p50/p99 and requests answered; on demand also loads, refusals and busy evictions per request. */
export function swapFigures(s: Record<string, SwapSummary>): Record<string, Figure> {
  const out: Record<string, Figure> = {};
  for (const mode of ['sequential', 'concurrent'] as const) {
    const who = mode === 'sequential' ? '1 client' : '3 clients';
    for (const setup of ['on-demand', 'static'] as const) {
      const x = s[`${setup}/${mode}`];
      if (x === undefined) continue;
      const q = summarize(x.ms);
      const name = setup === 'on-demand' ? 'node fitting 2 of 3 models' : '3 static pools';
      const k = `swap_${mode}_${setup.replace('-', '_')}`;
      out[`${k}_p50`] = ms(`A,B,C alternating, ${who}, ${name}: latency p50`, q.p50);
      out[`${k}_p99`] = ms(`A,B,C alternating, ${who}, ${name}: latency p99`, q.p99);
      out[`${k}_success`] = {
        label: `A,B,C alternating, ${who}, ${name}: requests answered (retries after Retry-After included)`,
        value: x.requests === 0 ? NaN : (x.succeeded / x.requests) * 100,
        unit: '%',
      };
      if (setup === 'on-demand') {
        out[`${k}_loads`] = {
          label: `A,B,C alternating, ${who}, ${name}: engine loads (swaps) per request`,
          value: x.requests === 0 ? NaN : (x.loads_ready ?? 0) / x.requests,
          unit: '',
        };
        out[`${k}_refused`] = {
          label: `A,B,C alternating, ${who}, ${name}: retriable refusals (503) per request`,
          value: x.requests === 0 ? NaN : Object.values(x.refusals).reduce((p, v) => p + v, 0) / x.requests,
          unit: '',
        };
        out[`${k}_room_waits`] = {
          label: `A,B,C alternating, ${who}, ${name}: loads that waited for room (nothing evictable) per request`,
          value: x.requests === 0 ? NaN : (x.room_waits ?? 0) / x.requests,
          unit: '',
        };
        out[`${k}_evicted_busy`] = {
          label: `A,B,C alternating, ${who}, ${name}: evictions of a copy with a task in flight (of ${x.evictions ?? 0} evictions)`,
          value: x.evicted_busy ?? NaN,
          unit: '',
        };
      }
    }
  }
  return out;
}

/** Per model: (projected − VmRSS after the fill request) ÷ VmRSS, %. */
export function projectionFigures(projection: readonly ProjectionRow[]): Record<string, Figure> {
  const figures: Record<string, Figure> = {};
  for (const p of projection)
    figures[`projection_${p.model}_error`] = {
      label: `memory projected${p.projection_method !== undefined ? ` (${p.projection_method})` : ''} vs engine VmRSS after a ${p.fill_prompt_tokens}-token prompt, ${p.model} (${p.ref}): ${mib(p.projected_bytes)} vs ${mib(p.rss_after_fill_bytes)} MiB`,
      value: p.error_pct,
      unit: '%',
    };

  return figures;
}

/** What a reader must know: failures, retried refusals, the node's refused loads, busy evictions, answers that differ. */
export function lifecycleNotes(cold: readonly ColdResult[], summaries: Record<string, SwapSummary>): string[] {
  const notes: string[] = [];
  for (const [key, x] of Object.entries(summaries)) {
    const failed = Object.entries(x.failures);
    if (failed.length > 0)
      notes.push(
        `${key}: ${x.requests - x.succeeded} of ${x.requests} requests failed: ${failed.map(([w, n]) => `${n} × ${w}`).join(', ')}`,
      );
    const refused = Object.entries(x.refusals);
    if (refused.length > 0)
      notes.push(
        `${key}: retriable refusals retried after their Retry-After: ${refused.map(([c, n]) => `${n} × ${c}`).join(', ')}; ${x.first_try} of ${x.requests} answered at the first attempt`,
      );
    if (x.loads_other !== undefined)
      notes.push(
        `${key}: node loads other than ready: ${JSON.stringify(x.loads_other)} (orchestratord was refused by the node ${x.orch_loads_refused ?? 0} times, then evicted)`,
      );
    if ((x.evicted_busy ?? 0) > 0)
      notes.push(
        `${key}: ${x.evicted_busy} of ${x.evictions} evicted copies had a task in flight (placed, not ended, by orchestratord's own log lines): eviction judges idleness by the node's idle_since in heartbeats, and drains the victim with a 5 s deadline`,
      );
  }
  for (const r of cold) {
    const texts = new Set([...r.orch, ...r.direct].map((s) => s.text));
    if (texts.size > 1)
      notes.push(`cold ${r.model.name}: the 1-token answers differ between samples: ${JSON.stringify([...texts])}`);
  }
  return notes;
}

const phase = (r: ColdResult, f: (s: ColdSample) => number): ReturnType<typeof rounded> =>
  rounded(summarize(r.orch.map(f)), 1);

/** The cold loads in full: distributions, phases, the engine's own start, the pairs. */
export function coldDetails(cold: readonly ColdResult[]): Record<string, unknown> {
  return Object.fromEntries(
    cold.map((r) => [
      r.model.name,
      {
        ref: r.model.ref,
        file_mib: mib(r.fileBytes),
        engine_argv: r.argv,
        orch_first_token_ms: rounded(summarize(r.orch.map((s) => s.firstTokenMs)), 1),
        direct_first_token_ms: rounded(summarize(r.direct.map((s) => s.firstTokenMs)), 1),
        direct_health_ms: rounded(summarize(r.direct.map((s) => s.healthMs)), 1),
        p50_minus_p50_ms:
          Math.round(
            (summarize(r.orch.map((s) => s.firstTokenMs)).p50 - summarize(r.direct.map((s) => s.firstTokenMs)).p50) *
              10,
          ) / 10,
        orch_phases_ms_from_request: {
          task_admitted: phase(r, (s) => s.phases.taskAdmitted),
          load_accepted: phase(r, (s) => s.phases.loadAccepted),
          engine_spawned: phase(r, (s) => s.phases.engineSpawned),
          engine_healthy: phase(r, (s) => s.phases.engineHealthy),
          pool_ready: phase(r, (s) => s.phases.poolReady),
          task_placed: phase(r, (s) => s.phases.taskPlaced),
          first_token: phase(r, (s) => s.firstTokenMs),
        },
        engine_own_start_to_listening_ms: {
          under_the_node: phase(r, (s) => s.engineListeningMs),
          direct: rounded(summarize(r.direct.map((s) => s.engineListeningMs)), 1),
        },
        unload_ms: rounded(summarize(r.orch.map((s) => s.unloadMs)), 1),
        rss_after_token_mib: rounded(summarize(r.orch.map((s) => s.rssBytes / MiB)), 1),
        pairs: r.orch.map((s, i) => ({
          orch_ms: Math.round(s.firstTokenMs * 10) / 10,
          direct_ms: Math.round((r.direct[i]?.firstTokenMs ?? NaN) * 10) / 10,
        })),
      },
    ]),
  );
}

export function projectionDetails(projection: readonly ProjectionRow[]): unknown[] {
  return projection.map((p) => ({
    ...p,
    projected_mib: mib(p.projected_bytes),
    rss_after_token_mib: mib(p.rss_after_token_bytes),
    rss_after_fill_mib: mib(p.rss_after_fill_bytes),
    reported_mib: mib(p.reported_bytes),
    error_pct: Math.round(p.error_pct * 10) / 10,
  }));
}
