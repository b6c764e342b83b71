import type { Logger } from 'pino';
import type { PoolConfig, ProvisioningProgress, ResolvedModel } from '@llama-orch/contracts';
import type { EngineBinary, EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { PoolManagerMetrics } from '../support/metrics.js';

/** How often a provisioning in progress is logged, ms (progress itself is reported continuously). */
const PROGRESS_LOG_MS = 5000;

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
 * to the caller and logged every 5 s, and each phase timed in `llorch_pool_provisioning_duration_seconds`.
 * Rejects with the first failure; aborting `signal` aborts both.
 */
export async function provision(req: ProvisionRequest): Promise<Provisioned> {
  const { pool, ref, sha256, signal, metrics, logger: log, onProgress } = req;
  const progress: ProvisioningProgress = { engine: req.withEngine ? 0 : 1, model: 0 };
  onProgress(progress);
  let lastLog = 0;
  const report = (): void => {
    onProgress(progress);
    const now = Date.now();
    if (now - lastLog >= PROGRESS_LOG_MS) {
      lastLog = now;
      log.info({ progress }, 'provisioning progress');
    }
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
