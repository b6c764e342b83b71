#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { BENCHES, BENCH_ORDER } from './benches/index.js';
import { UsageError } from './errors.js';
import type { BenchContext } from './lib/context.js';
import { loadResults, renderPerformancePage, renderSection, updateReadme, writeAtomically } from './lib/readme.js';
import { benchPaths } from './lib/repo.js';
import { buildResult, currentLoad, writeResult } from './lib/result.js';

const USAGE = `usage: pnpm bench [--quick] [--cpu-prof] [--node-flags='…'] [--no-readme] [${BENCH_ORDER.join('|')} …]

Runs the named benchmarks (all of them when none is named), writes bench/results/<name>.json and
regenerates the Performance table in README.md from every result file present.
  --quick      fewer samples: checks the harness, not a result to report (README left alone)
  --cpu-prof   run the daemons under node --cpu-prof (profiles in bench/.work/<run>/)
  --node-flags extra node flags for orchestratord and pool-managerd (e.g. --node-flags=--trace-gc)
  --no-readme  leave README.md alone
  --clients=N --deadline-ms=N --max-tokens=N  flood: a smaller or different flood (a diagnostic run)
  --trials=N   flood: N floods per variant (alternating order with --baseline)
  --baseline=PATH  flood: also run this orchestratord build (dist/main.js) first, for a before/after
  --parts=a,b  failover: only these parts (sigstop, redis, rolling, adopt)
  --adopt-anyway=1  failover: run the replica SIGKILL trial on a build without replica adoption (harness check)
  --rounds=N --requests=N --chat-rounds=N --calibration=N --saturation=N --cache-ram=MiB --replicas=0|1
               prefix: a reshaped run (blocks, requests per block, llama-server --cache-ram, the 3-replica variant)
Env LLORCH_BENCH_ORCHESTRATORD / LLORCH_BENCH_POOL_MANAGERD: run another build of a daemon (to measure
a proposed change; such runs, like --quick/--cpu-prof/--node-flags, write under bench/.work only).`;

function say(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const quick = argv.includes('--quick');
  const cpuProf = argv.includes('--cpu-prof');
  const nodeFlags = argv
    .filter((a) => a.startsWith('--node-flags='))
    .flatMap((a) =>
      a
        .slice('--node-flags='.length)
        .split(' ')
        .filter((f) => f !== ''),
    );
  const options = new Map(
    argv
      .filter((a) => a.startsWith('--') && a.includes('=') && !a.startsWith('--node-flags='))
      .map((a) => [a.slice(2, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] as [string, string]),
  );
  const paths = benchPaths(process.env);
  // Diagnostic runs (quick, profiled, extra flags, another daemon build, a reshaped benchmark) never replace the reported results.
  const shaped = [...options.keys()].some((k) => k !== 'baseline' && k !== 'trials');
  const diagnostic = quick || cpuProf || nodeFlags.length > 0 || paths.overridden || shaped;
  const writeReadme = !argv.includes('--no-readme') && !diagnostic;
  const names = argv.filter((a) => !a.startsWith('--'));
  for (const n of names) if (!BENCH_ORDER.includes(n)) throw new UsageError(`unknown benchmark '${n}'\n${USAGE}`);
  const selected = names.length === 0 ? BENCH_ORDER : BENCH_ORDER.filter((n) => names.includes(n));

  for (const p of [
    paths.orchestratord,
    paths.poolManagerd,
    paths.placementBench,
    paths.fixturePoolManager,
    paths.passthroughProxy,
  ]) {
    if (!existsSync(p)) throw new UsageError(`${p} is missing: run \`pnpm build\` first`);
  }
  const runDir = join(paths.workDir, new Date().toISOString().replace(/[:.]/g, '-'));
  await mkdir(runDir, { recursive: true });
  say(`run dir ${runDir}; benchmarks: ${selected.join(', ')}${quick ? ' (quick)' : ''}`);

  const controller = new AbortController();
  const onSignal = (): void => {
    controller.abort();
    say('interrupted; stopping daemons');
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let failures = 0;
  for (const name of selected) {
    const bench = BENCHES[name];
    if (bench === undefined) continue;
    const dir = join(runDir, name);
    await mkdir(dir, { recursive: true });
    const ctx: BenchContext = {
      paths,
      dir,
      quick,
      cpuProf,
      nodeFlags,
      options,
      signal: controller.signal,
      log: (m) => say(m),
    };
    const startedAt = performance.now();
    const loadAtStart = currentLoad();
    say(`▶ ${name}: ${bench.title}`);
    try {
      const outcome = await bench.run(ctx);
      const result = buildResult({ name, title: bench.title, targets: bench.targets, outcome, startedAt, loadAtStart });
      if (diagnostic) {
        await writeResult(join(runDir, 'results'), result);
      } else {
        await writeResult(paths.resultsDir, result);
      }
      for (const row of result.rows) {
        const t =
          row.target === undefined
            ? ''
            : ` (target ${row.target.op} ${row.target.value} ${row.target.unit}: ${row.met === undefined ? 'not measured' : row.met ? 'met' : 'MISSED'})`;
        const value =
          row.notMeasured !== undefined
            ? `not measured: ${row.notMeasured}`
            : `${Number.isFinite(row.value) ? Math.round(row.value * 1000) / 1000 : 'n/a'} ${row.unit}`;
        say(`  ${row.label}: ${value}${t}`);
      }
      say(`✔ ${name} in ${result.duration_s} s; targets ${result.met ? 'met' : 'NOT met'}`);
    } catch (err) {
      failures += 1;
      say(`✘ ${name} failed: ${(err as Error).stack ?? String(err)}`);
    }
  }
  if (writeReadme) {
    const results = await loadResults(paths.resultsDir, BENCH_ORDER);
    await writeAtomically(paths.performancePage, renderPerformancePage(results));
    await updateReadme(paths.readme, renderSection(results));
    say(`docs/performance.md and the README's table of targets regenerated from ${results.length} result file(s)`);
  }
  return failures === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    say(err instanceof UsageError ? err.message : `failed: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  },
);
