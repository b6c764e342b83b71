import { stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import {
  PoolConfigSchema,
  PreparedEngineSchema,
  formatIssues,
  type BuildProvenance,
  type PoolConfig,
  type PreparedEngine,
} from '@llama-orch/contracts';
import {
  defaultPatchesDir,
  ensureSourceTree,
  loadPatchSet,
  NO_PATCHES,
  SourceError,
  type PatchSet,
  type SourceSpec,
  type SourceTree,
} from '@llama-orch/llamacpp-source';
import { cmakeFlagsFor } from './cmake-flags.js';
import {
  CUDA_DRIVER_COMPONENT,
  DEFAULT_CUDA_SEARCH_ROOTS,
  lookupCudaToolkit,
  type CudaToolkit,
} from './cuda-toolkit.js';
import { buildEngine, configureEngine, type ConfigureResult } from './engine-builder.js';
import {
  acquireBuildLock,
  engineCacheLayout,
  ensureCacheWritable,
  readCacheEntry,
  removeStaleStages,
  type CacheEntry,
  type EngineCacheLayout,
} from './engine-cache.js';
import { ENGINE_HOST, buildEngineFlags } from './engine-flags.js';
import { parseVersionOutput } from './engine-version.js';
import { EngineProvisionError } from './errors.js';
import { verifyExternalEngine } from './external-engine.js';
import { engineFingerprint } from './fingerprint.js';
import { selectPort } from './free-port.js';
import { overallFraction, type EnginePhase, type EngineProgress } from './progress.js';
import { cpuIdentity, cxxCompiler, toolVersion } from './toolchain.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Options of {@link EngineProvisioner}. */
export interface EngineProvisionerOptions {
  /** Cache root; engines go to `<cacheDir>/engines/<fingerprint>/`, sources to `<cacheDir>/sources/`. */
  cacheDir: string;
  /** Logger; the provisioner adds `{ component: 'engine-provisioner' }`. */
  logger: Logger;
  /**
   * Environment for the CUDA toolkit lookup and for the git / cmake / compiler processes.
   * Pass it from the process boundary (CLI, app main).
   * @default a snapshot of `process.env` taken by the constructor
   */
  env?: Env;
  /** Parallel compile jobs (`cmake --build -j`). @default os.availableParallelism() */
  jobs?: number;
  /** Where to look for `cuda*` dirs after PATH / CUDA_HOME / CUDA_PATH. @default ['/usr/local', '/opt'] */
  cudaSearchRoots?: readonly string[];
  /** Log build progress as structured events (turn off when a TTY progress bar shows it). @default true */
  logProgress?: boolean;
  /**
   * Folder of the `.patch` files applied (in name order) to every built source whose pool does not
   * set `source.patches: false`. @default the `patches/` folder of `@llama-orch/llamacpp-source`
   */
  patchesDir?: string;
}

/** Per-call options of {@link EngineProvisioner.ensureBinary}. */
export interface EnsureOptions {
  signal?: AbortSignal;
  /** Called on every phase change and build percentage (pool-managerd reports it as `progress.engine`). */
  onProgress?: (progress: EngineProgress) => void;
}

/** Per-call options of {@link EngineProvisioner.prepare}. */
export interface PrepareOptions extends EnsureOptions {
  /** Resolved model file (model-provisioner's job). */
  modelPath: string;
  /** Replica id within the pool (e.g. `r0`). */
  replicaId: string;
  /**
   * The pool's binary from an earlier {@link EngineProvisioner.ensureBinary}, so a restart does not
   * resolve the source and toolchain again; ignored (ensured afresh) when its file is gone.
   */
  binary?: EngineBinary;
}

/** A ready engine binary. */
export interface EngineBinary {
  /** Absolute path of `llama-server`. */
  binary_path: string;
  /**
   * Absolute path of `llama-fit-params` (llama.cpp's memory projection; run it with
   * `projectMemory`). Every built engine has it, beside `binary_path`; an `external` engine has it
   * when an executable `llama-fit-params` sits next to its binary, else it is absent.
   */
  fit_params_path?: string;
  /** `--version` identity, e.g. `0.5.0-dev (build 1, commit de3ff81)`. */
  engine_version: string;
  /** Cache key: sha256 of commit + cmake flags + toolchain (+ CPU when native); for external, of the file. */
  engine_fingerprint: string;
  build_provenance: BuildProvenance;
  /** True when no build ran in this call (cache hit, another process built it, or external). */
  cached: boolean;
}

function toSourceSpec(pool: PoolConfig): SourceSpec {
  const s = pool.source;
  if (s.kind === 'bundle') return s.bundle_path ? { kind: 'bundle', bundlePath: s.bundle_path } : { kind: 'bundle' };
  if (s.kind === 'git') return { kind: 'git', repo: s.repo, ref: s.ref };
  throw new Error('external sources have no source tree');
}

function mapAbort(err: unknown, what: string): never {
  if (err instanceof EngineProvisionError) throw err;
  if ((err as Error | undefined)?.name === 'AbortError')
    throw new EngineProvisionError('ABORTED', `${what} aborted`, {}, { cause: err });
  throw err;
}

/**
 * Prepares llama-server engines for pools: finds or builds the binary (cached by fingerprint,
 * one build per fingerprint across processes), picks a port, and computes the argv. It never
 * spawns or supervises engines; pool-managerd does.
 */
export class EngineProvisioner {
  readonly cacheDir: string;
  private readonly log: Logger;
  private readonly env: Env;
  private readonly jobs: number;
  private readonly cudaSearchRoots: readonly string[];
  private readonly logProgress: boolean;
  private readonly layout: EngineCacheLayout;
  private readonly patchesDir: string;
  private patchSetLoad: Promise<PatchSet> | undefined;

  constructor(opts: EngineProvisionerOptions) {
    this.cacheDir = opts.cacheDir;
    this.log = opts.logger.child({ component: 'engine-provisioner' });
    this.env = Object.freeze({ ...(opts.env ?? process.env) });
    this.jobs = opts.jobs ?? availableParallelism();
    this.cudaSearchRoots = opts.cudaSearchRoots ?? DEFAULT_CUDA_SEARCH_ROOTS;
    this.logProgress = opts.logProgress ?? true;
    this.layout = engineCacheLayout(opts.cacheDir);
    this.patchesDir = opts.patchesDir ?? defaultPatchesDir();
  }

  /** Makes sure the pool's llama-server binary exists (building it if needed) and returns it. */
  async ensureBinary(poolInput: PoolConfig, opts: EnsureOptions = {}): Promise<EngineBinary> {
    const pool = this.validatePool(poolInput);
    const log = this.log.child({ pool_id: pool.id });
    const report = this.progressReporter(log, opts.onProgress);
    if (pool.source.kind === 'external') {
      const ext = await verifyExternalEngine(pool.source.binary_path, this.env, opts.signal).catch((e: unknown) =>
        mapAbort(e, 'external verify'),
      );
      if (pool.gpu === 'required' && !ext.provenance.cuda) {
        throw new EngineProvisionError(
          'EXTERNAL_BINARY_INVALID',
          `pool ${pool.id} requires GPU but external llama-server ${ext.binaryPath} has no CUDA backend`,
          {
            poolId: pool.id,
            path: ext.binaryPath,
          },
        );
      }
      log.info({ binary: ext.binaryPath, engineVersion: ext.engineVersion }, 'using external llama-server');
      report('done', 1, { cached: true });
      return {
        binary_path: ext.binaryPath,
        ...(ext.fitParamsPath !== undefined ? { fit_params_path: ext.fitParamsPath } : {}),
        engine_version: ext.engineVersion,
        engine_fingerprint: ext.fingerprint,
        build_provenance: ext.provenance,
        cached: true,
      };
    }

    const cuda = await this.decideCuda(pool, log);
    const cmakeFlags = cmakeFlagsFor(pool, cuda);
    // The fingerprint's inputs are independent probes (a git and a compiler subprocess): run them
    // together — this is every pool start's path, cache hits included. Failures are reported in
    // the order the checks are listed (cache, source, compiler), as when they ran one by one.
    report('source', 0);
    const [writable, treeResult, compilerResult, cpuResult, patchResult] = await Promise.allSettled([
      ensureCacheWritable(this.layout),
      this.sourceTree(pool, opts.signal),
      toolVersion(cxxCompiler(this.env), this.env, opts.signal),
      pool.native ? cpuIdentity() : Promise.resolve(undefined),
      pool.source.patches === false ? Promise.resolve(NO_PATCHES) : this.patchSet(),
    ]);
    if (writable.status === 'rejected') throw writable.reason;
    if (treeResult.status === 'rejected') throw treeResult.reason;
    const tree = treeResult.value;
    report('source', 1);
    if (compilerResult.status === 'rejected') throw compilerResult.reason;
    const compiler = compilerResult.value;
    if (cpuResult.status === 'rejected') throw cpuResult.reason;
    const cpu = cpuResult.value;
    if (patchResult.status === 'rejected') throw patchResult.reason;
    const patches = patchResult.value;
    const fingerprint = engineFingerprint({
      commit: tree.commit,
      cmakeFlags,
      compiler,
      cudaVersion: cuda?.version,
      cpu,
      patches: patches.hash,
    });

    const hit = await readCacheEntry(this.layout, fingerprint, log);
    if (hit) return this.fromEntry(hit, fingerprint, true, log, report);

    const release = await acquireBuildLock(this.layout, fingerprint, {
      log,
      signal: opts.signal,
      onCompromised: (err) =>
        log.error({ err, fingerprint }, 'engine build lock compromised (lock dir touched by someone else)'),
    }).catch((e: unknown) => mapAbort(e, 'waiting for the engine build lock'));
    try {
      const built = await readCacheEntry(this.layout, fingerprint, log);
      if (built) return this.fromEntry(built, fingerprint, true, log, report);
      await removeStaleStages(this.layout, fingerprint);
      const toolchain: Record<string, string> = {
        cmake: await toolVersion('cmake', this.env, opts.signal),
        cxx: compiler,
        ...(cuda ? { nvcc: cuda.version } : {}),
        ...(cpu ? { cpu } : {}),
      };
      log.info(
        {
          fingerprint,
          source: tree.origin,
          commit: tree.commit,
          patches: patches.patches.map((p) => p.name),
          cuda: Boolean(cuda),
          jobs: this.jobs,
          cmakeFlags,
        },
        'building llama-server (not in cache)',
      );
      const started = performance.now();
      const entry = await buildEngine({
        layout: this.layout,
        fingerprint,
        sourceDir: tree.dir,
        commit: tree.commit,
        origin: tree.origin,
        patches,
        cmakeFlags,
        cuda: Boolean(cuda),
        toolchain,
        env: this.env,
        jobs: this.jobs,
        log,
        ...(opts.signal ? { signal: opts.signal } : {}),
        onPhase: (phase, within) => report(phase, within),
      });
      log.info(
        { fingerprint, buildMs: Math.round(performance.now() - started), binary: entry.binaryPath },
        'llama-server built',
      );
      return this.fromEntry(entry, fingerprint, false, log, report);
    } finally {
      await release().catch((err: unknown) => log.warn({ err }, 'releasing the engine build lock failed'));
    }
  }

  /**
   * Everything pool-managerd needs to spawn one engine: the binary (built if needed), a port (0 in
   * config = a free loopback port; a taken configured port falls back to the next free one), and
   * the argv. Nothing is spawned.
   */
  async prepare(poolInput: PoolConfig, opts: PrepareOptions): Promise<PreparedEngine> {
    const pool = this.validatePool(poolInput);
    const known = opts.binary !== undefined && (await isFile(opts.binary.binary_path)) ? opts.binary : undefined;
    const bin = known ?? (await this.ensureBinary(pool, opts));
    const { port, fallback } = await selectPort(pool.port, ENGINE_HOST);
    if (fallback && pool.port !== 0)
      this.log.warn({ poolId: pool.id, requested: pool.port, port }, 'configured engine port is taken; using another');
    const flags = buildEngineFlags({ pool, modelPath: opts.modelPath, port, host: ENGINE_HOST });
    return PreparedEngineSchema.parse({
      binary_path: bin.binary_path,
      flags,
      host: ENGINE_HOST,
      port,
      model_path: opts.modelPath,
      engine: pool.engine,
      engine_version: bin.engine_version,
      engine_fingerprint: bin.engine_fingerprint,
      build_provenance: bin.build_provenance,
      pool_id: pool.id,
      replica_id: opts.replicaId,
      ...(pool.device_mask !== undefined ? { device_mask: pool.device_mask } : {}),
      gpu_policy: pool.gpu,
    });
  }

  /**
   * Runs only cmake's configure step for `pool` into `buildDir` (which the caller owns and
   * removes). Applies the same GPU policy and flags as a real build; used to prove a CUDA build
   * configures on hosts where compiling it is too slow or pointless.
   */
  async configureOnly(
    poolInput: PoolConfig,
    opts: { buildDir: string; signal?: AbortSignal },
  ): Promise<ConfigureResult & { cuda: boolean }> {
    const pool = this.validatePool(poolInput);
    if (pool.source.kind === 'external')
      throw new EngineProvisionError(
        'CONFIG_INVALID',
        `pool ${pool.id} uses an external binary; there is nothing to configure`,
        { poolId: pool.id },
      );
    const cuda = await this.decideCuda(pool, this.log.child({ poolId: pool.id }));
    const cmakeFlags = cmakeFlagsFor(pool, cuda);
    await ensureCacheWritable(this.layout);
    const tree = await this.sourceTree(pool, opts.signal);
    const res = await configureEngine({
      sourceDir: tree.dir,
      buildDir: opts.buildDir,
      cmakeFlags,
      env: this.env,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    return { ...res, cuda: Boolean(cuda) };
  }

  private validatePool(pool: PoolConfig): PoolConfig {
    const parsed = PoolConfigSchema.safeParse(pool);
    if (!parsed.success) {
      throw new EngineProvisionError('CONFIG_INVALID', `invalid pool config:\n${formatIssues(parsed.error)}`, {
        poolId: (pool as { id?: unknown }).id,
      });
    }
    return parsed.data;
  }

  /** GPU policy → toolkit or CPU. `required` without a toolkit fails here, before anything is built. */
  private async decideCuda(pool: PoolConfig, log: Logger): Promise<CudaToolkit | undefined> {
    if (pool.gpu === 'off') return undefined;
    const report = await lookupCudaToolkit(this.env, this.cudaSearchRoots);
    const { tried } = report;
    // ggml links libcuda only for virtual memory management; GGML_CUDA_NO_VMM=ON builds without it
    const noVmm = pool.build_flags.includes('-DGGML_CUDA_NO_VMM=ON');
    const toolkit =
      report.toolkit && noVmm
        ? { ...report.toolkit, missing: report.toolkit.missing.filter((m) => m !== CUDA_DRIVER_COMPONENT) }
        : report.toolkit;
    if (toolkit && toolkit.missing.length === 0) {
      log.info(
        { nvcc: toolkit.nvccPath, foundVia: toolkit.foundVia, cudaVersion: toolkit.version, gpu: pool.gpu },
        'CUDA toolkit found; building with GGML_CUDA=ON',
      );
      return toolkit;
    }
    if (toolkit) {
      // nvcc alone is not a toolkit: without cuBLAS CMake fails late with an obscure error
      if (pool.gpu === 'required') {
        throw new EngineProvisionError(
          'GPU_TOOLKIT_MISSING',
          `pool ${pool.id} has gpu: required but the CUDA toolkit at ${toolkit.root} (nvcc ${toolkit.version}, ${toolkit.nvccPath}) is incomplete: missing ${toolkit.missing.join(', ')}. Install the full CUDA toolkit (with cuBLAS); a CPU build is never substituted.`,
          { poolId: pool.id, missing: toolkit.missing, nvcc: toolkit.nvccPath, root: toolkit.root },
        );
      }
      log.warn(
        { nvcc: toolkit.nvccPath, missing: toolkit.missing },
        'gpu: optional and the CUDA toolkit is incomplete; building for CPU',
      );
      return undefined;
    }
    if (pool.gpu === 'required') {
      throw new EngineProvisionError(
        'GPU_TOOLKIT_MISSING',
        `pool ${pool.id} has gpu: required but no CUDA toolkit was found: nvcc is not on PATH, not under CUDA_HOME/CUDA_PATH, and not in ${this.cudaSearchRoots.map((r) => `${r}/cuda*/bin`).join(' or ')}. Install the CUDA toolkit or set CUDA_HOME; a CPU build is never substituted.`,
        { poolId: pool.id, missing: 'nvcc', tried },
      );
    }
    log.warn({ tried: tried.length }, 'gpu: optional and no CUDA toolkit found; building for CPU');
    return undefined;
  }

  /** The carried patch set, read once per provisioner (the files ship with the code). */
  private patchSet(): Promise<PatchSet> {
    this.patchSetLoad ??= loadPatchSet(this.patchesDir).catch((err: unknown) => {
      this.patchSetLoad = undefined;
      throw new EngineProvisionError(
        'SOURCE_NOT_FOUND',
        `llama.cpp patches in ${this.patchesDir} cannot be read: ${(err as Error).message}`,
        { path: this.patchesDir },
        { cause: err },
      );
    });
    return this.patchSetLoad;
  }

  private async sourceTree(pool: PoolConfig, signal: AbortSignal | undefined): Promise<SourceTree> {
    try {
      return await ensureSourceTree({
        cacheDir: this.cacheDir,
        source: toSourceSpec(pool),
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      if (err instanceof SourceError) {
        throw new EngineProvisionError(
          err.code === 'SOURCE_PATCH_FAILED' ? 'PATCH_FAILED' : err.code,
          `pool ${pool.id}: ${err.message}`,
          { poolId: pool.id, ...err.context },
          { cause: err },
        );
      }
      if (signal?.aborted)
        throw new EngineProvisionError('ABORTED', 'source checkout aborted', { poolId: pool.id }, { cause: err });
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EROFS' || code === 'ENOTDIR' || code === 'EEXIST') {
        throw new EngineProvisionError(
          'CACHE_UNWRITABLE',
          `cannot write sources under ${this.cacheDir} (${code})`,
          { path: this.cacheDir },
          { cause: err },
        );
      }
      throw err;
    }
  }

  private fromEntry(
    entry: CacheEntry,
    fingerprint: string,
    cached: boolean,
    log: Logger,
    report: ProgressReporter,
  ): EngineBinary {
    const version = parseVersionOutput(entry.provenance.version_output);
    if (cached)
      log.info(
        { fingerprint, binary: entry.binaryPath, patches: entry.provenance.patches ?? [] },
        'llama-server found in cache',
      );
    report('done', 1, { cached });
    return {
      binary_path: entry.binaryPath,
      fit_params_path: entry.fitParamsPath,
      engine_version: version?.engineVersion ?? entry.provenance.version_output.split('\n')[0] ?? 'unknown',
      engine_fingerprint: fingerprint,
      build_provenance: entry.provenance,
      cached,
    };
  }

  /** Fans progress out to the callback and, throttled to 10 % steps, to the log. */
  private progressReporter(log: Logger, onProgress?: (p: EngineProgress) => void): ProgressReporter {
    let lastPhase: EnginePhase | undefined;
    let lastLoggedPct = -1;
    return (phase, within, extra = {}) => {
      const fraction = overallFraction(phase, within);
      const progress: EngineProgress = {
        phase,
        fraction,
        ...(phase === 'build' ? { build_percent: Math.round(within * 100) } : {}),
        ...extra,
      };
      onProgress?.(progress);
      if (!this.logProgress) return;
      const pct = Math.floor(fraction * 10) * 10;
      if (phase !== lastPhase || (phase === 'build' && pct > lastLoggedPct)) {
        // source/done happen on every call, cache hits included; only real build work is news
        const level = phase === 'source' || phase === 'done' ? 'debug' : 'info';
        log[level]({ progress }, `engine ${phase} ${Math.round(fraction * 100)}%`);
        lastPhase = phase;
        lastLoggedPct = pct;
      }
    };
  }
}

type ProgressReporter = (phase: EnginePhase, within: number, extra?: Partial<EngineProgress>) => void;

async function isFile(path: string): Promise<boolean> {
  return stat(path).then(
    (st) => st.isFile(),
    () => false,
  );
}
