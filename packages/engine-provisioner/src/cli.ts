#!/usr/bin/env node
import { homedir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pino from 'pino';
import type { PoolConfig } from '@llama-orch/contracts';
import { defaultCacheDir, readPoolsFile } from './pools-file.js';
import { EngineProvisionError } from './errors.js';
import { createProgressBar } from './progress-bar.js';
import { EngineProvisioner } from './provisioner.js';

const USAGE = `usage: engine-provisioner --config <pool-managerd.yaml> --pool <id> [--model <path>] [options]

Prepares llama-server for one pool (builds it into the cache when needed) and prints the
PreparedEngine JSON on stdout. Nothing is spawned.

  -c, --config <file>     pool-managerd YAML config (required)
  -p, --pool <id>         pool id (default: the first pool)
  -m, --model <path>      model file for -m (default: the pool's model when it is a local path)
      --replica <id>      replica id (default: r0)
      --cache-dir <dir>   cache root (default: config cache_dir, else ~/.cache/llama-orch)
      --binary-only       only ensure the binary; print {binary_path, engine_version, ...}
      --jobs <n>          parallel compile jobs (default: number of CPUs)
      --log-level <lvl>   pino level on stderr (default: info)
  -h, --help`;

/** Local path from a `file:` ref or a plain path; undefined for refs that need fetching. */
function localModelPath(ref: string): string | undefined {
  if (ref.startsWith('file://')) return fileURLToPath(ref);
  if (ref.startsWith('file:')) return resolve(ref.slice('file:'.length));
  if (/^[a-z][a-z0-9+.-]*:/i.test(ref)) return undefined;
  return resolve(ref);
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? `${homedir()}${p.slice(1)}` : p;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      config: { type: 'string', short: 'c' },
      pool: { type: 'string', short: 'p' },
      model: { type: 'string', short: 'm' },
      replica: { type: 'string', default: 'r0' },
      'cache-dir': { type: 'string' },
      'binary-only': { type: 'boolean', default: false },
      jobs: { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const log = pino({ name: 'engine-provisioner', level: values['log-level'] ?? 'info' }, pino.destination(2));
  if (!values.config) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) process.exit(130);
    log.warn({ signal: sig }, 'aborting; a second signal exits immediately');
    controller.abort(new Error(`received ${sig}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const config = await readPoolsFile(values.config);
    const pool: PoolConfig | undefined = values.pool ? config.pools.find((p) => p.id === values.pool) : config.pools[0];
    if (!pool) {
      throw new EngineProvisionError(
        'CONFIG_INVALID',
        `pool '${values.pool ?? ''}' is not in ${values.config} (pools: ${config.pools.map((p) => p.id).join(', ')})`,
        {
          pool: values.pool,
        },
      );
    }
    const modelPath = values.model ? resolve(values.model) : localModelPath(pool.model);
    if (!values['binary-only'] && !modelPath) {
      throw new EngineProvisionError(
        'CONFIG_INVALID',
        `pool ${pool.id} model '${pool.model}' is not a local file; pass --model <path> (pool-managerd resolves refs with model-provisioner) or use --binary-only`,
        { poolId: pool.id },
      );
    }
    const cacheDir = resolve(expandHome(values['cache-dir'] ?? config.cacheDir ?? defaultCacheDir(homedir())));
    const jobs = values.jobs ? Number(values.jobs) : undefined;
    if (jobs !== undefined && (!Number.isInteger(jobs) || jobs < 1))
      throw new EngineProvisionError('CONFIG_INVALID', `--jobs must be a positive integer, got ${values.jobs ?? ''}`);
    const bar = process.stderr.isTTY ? createProgressBar(process.stderr) : undefined;
    const provisioner = new EngineProvisioner({
      cacheDir,
      logger: log,
      env: process.env,
      logProgress: !bar,
      ...(jobs ? { jobs } : {}),
    });
    const common = { signal: controller.signal, ...(bar ? { onProgress: bar.update } : {}) };
    try {
      const out = values['binary-only']
        ? await provisioner.ensureBinary(pool, common)
        : await provisioner.prepare(pool, {
            ...common,
            modelPath: modelPath as string,
            replicaId: values.replica ?? 'r0',
          });
      bar?.stop();
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    } finally {
      bar?.stop();
    }
    return 0;
  } catch (err) {
    if (err instanceof EngineProvisionError) {
      log.error({ code: err.code, context: err.context }, err.message);
      process.stderr.write(`engine-provisioner: ${err.code}: ${err.message}\n`);
      return err.code === 'CONFIG_INVALID' ? 2 : 1;
    }
    log.error({ err }, 'unexpected failure');
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`engine-provisioner: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  },
);
