import type { Logger } from 'pino';
import type { PoolConfig, ProvisioningProgress, ResolvedModel } from '@llama-orch/contracts';
import type { EngineBinary, EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { PoolManagerMetrics } from '../support/metrics.js';
import { ProgressLogThrottle } from './progress-log.js';

export interface ProvisionRequest {
  pool: PoolConfig;
  /** Model reference to resolve (the configured one, or a reload's new one). */
  ref: string;
  sha256: string | undefined;
  /** Also ensure the engine binary (first start, or a pool that never got one). */
  withEngine: boolean;
  signal: AbortSignal;
  engines: Pick<EngineProvisioner, 'ensureBinary'>;
  models: Pick<ModelProvisioner, 'ensure'>;
  metrics: PoolManagerMetrics;
  logger: Logger;
  /** Progress so far (fractions and bytes), on every change. */
  onProgress: (progress: ProvisioningProgress) => void;
}

export interface Provisioned {
  model: ResolvedModel;
  /** The engine binary, when it was asked for. */
  binary: EngineBinary | undefined;
}

/**
 * The provisioning step of a pool: engine binary and model, concurrently, with progress reported
 * to the caller and logged with its figures when they move (ProgressLogThrottle), and each phase
 * timed in `llorch_pool_provisioning_duration_seconds`.
 * Rejects with the first failure; aborting `signal` aborts both.
 */
export async function provision(req: ProvisionRequest): Promise<Provisioned> {
  const { pool, ref, sha256, signal, metrics, logger: log, onProgress } = req;
  const progress: ProvisioningProgress = { engine: req.withEngine ? 0 : 1, model: 0 };
  onProgress(progress);
  const throttle = new ProgressLogThrottle();
  let engineStep = 'engine';
  const modelStep = `model ${modelVerb(ref)}`;
  const report = (): void => {
    onProgress(progress);
    const enginePercent = Math.floor(progress.engine * 100);
    const modelPercent = Math.floor(progress.model * 100);
    if (!throttle.due([enginePercent, modelPercent])) return;
    const human = `${req.withEngine ? `${engineStep} ${enginePercent}%, ` : ''}${modelStep} ${modelPercent}%`;
    log.info(
      {
        engine_step: engineStep,
        engine_percent: enginePercent,
        model_step: modelStep,
        model_percent: modelPercent,
        human,
      },
      'provisioning progress',
    );
  };
  const t0 = performance.now();
  const observe = (phase: string, outcome: string): void => {
    metrics.provisioningSeconds.observe({ pool_id: pool.id, phase, outcome }, (performance.now() - t0) / 1000);
  };
  const timed = <T>(phase: string, work: Promise<T>): Promise<T> =>
    work.then(
      (value) => {
        observe(phase, 'ok');
        return value;
      },
      (err: unknown) => {
        observe(phase, 'error');
        throw err;
      },
    );
  const enginePromise = req.withEngine
    ? timed(
        'engine',
        req.engines.ensureBinary(pool, {
          signal,
          onProgress: (p) => {
            progress.engine = p.fraction;
            if (p.phase === 'configure' || p.phase === 'build') engineStep = `engine ${p.phase}`;
            else if (p.cached === true) engineStep = 'engine (cached)';
            report();
          },
        }),
      ).then((bin) => {
        progress.engine = 1;
        report();
        return bin;
      })
    : Promise.resolve(undefined);
  const modelPromise = timed(
    'model',
    req.models.ensure(ref, {
      ...(sha256 !== undefined ? { sha256 } : {}),
      signal,
      onProgress: (p) => {
        progress.model_bytes_done = p.bytes_done;
        if (p.bytes_total !== undefined && p.bytes_total > 0) {
          progress.model_bytes_total = p.bytes_total;
          progress.model = Math.min(1, p.bytes_done / p.bytes_total);
        }
        report();
      },
    }),
  ).then((m) => {
    progress.model = 1;
    report();
    return m;
  });
  const [binary, model] = await Promise.all([enginePromise, modelPromise]);
  log.info({ model: model.id, path: model.local_path, ms: Math.round(performance.now() - t0) }, 'pool provisioned');
  return { model, binary };
}

/** What fetching `ref` means to an operator: a synthetic model is generated, a remote one downloaded. */
function modelVerb(ref: string): string {
  if (ref.startsWith('synthetic:')) return 'generate';
  if (ref.startsWith('hf:') || ref.startsWith('https:') || ref.startsWith('http:')) return 'download';
  return 'verify';
}
