import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Agent, Dispatcher } from 'undici';
import { ResolvedModelSchema, Sha256Schema } from '@llama-orch/contracts';
import type { ResolvedModel } from '@llama-orch/contracts';
import { ensureSourceTree } from '@llama-orch/llamacpp-source';
import { Catalog } from './catalog.js';
import { download, removePartial } from './download.js';
import type { RetryPolicy } from './download.js';
import { ModelProvisionError, cacheError } from './errors.js';
import { sha256File } from './fs-util.js';
import { readGgufHeader, readGgufInfo } from './gguf-reader.js';
import { acquireLock } from './lock.js';
import { parseModelRef, sourceOf } from './model-ref.js';
import type { ModelRef } from './model-ref.js';
import { ProgressReporter } from './progress.js';
import type { ModelProgress } from './progress.js';
import { SharedJobs } from './shared-job.js';
import { ModelStore } from './store.js';
import type { RefRecord } from './store.js';
import { SYNTHETIC_GENERATOR_VERSION, SYNTHETIC_VOCAB_FILE, writeSyntheticModel } from './synthetic-model.js';

export interface ModelProvisionerOptions {
  /** Root of the llama-orch cache; models live in `<cacheDir>/models`, llama.cpp sources in `<cacheDir>/sources`. */
  cacheDir: string;
  logger: Logger;
  /** HTTP dispatcher for downloads (redirects are followed on top of it). @default a private undici Agent, closed by close() */
  dispatcher?: Dispatcher;
  /** Base of `hf:` downloads: `<base>/<org>/<repo>/resolve/main/<path>`. @default https://huggingface.co */
  hfBaseUrl?: string;
  /** Hugging Face token, sent as `Authorization: Bearer` to the `hf:` base only (never logged). */
  hfToken?: string;
  /** Directory that relative model paths resolve against (the config file's directory). Relative refs fail without it. */
  baseDir?: string;
  /** Accept `http://` refs (tests on loopback). @default false */
  allowInsecureHttp?: boolean;
  /** Retries of transient download failures. @default { attempts: 4, baseMs: 500, maxMs: 10000 } */
  retry?: Partial<RetryPolicy>;
  /** A download that receives nothing for this long is retried. @default 60000 */
  stallTimeoutMs?: number;
  /** Catalog to register models in. @default new Catalog({ dir: `<cacheDir>/models`, … }) */
  catalog?: Catalog;
  /** Byte budget of cached models (LRU eviction after each new model), for the default catalog. */
  budgetBytes?: number;
  /** Models in use by a running pool; never evicted (default catalog). */
  isPinned?: (id: string) => boolean;
  /** Vocab GGUF whose tokenizer `synthetic:` models copy. @default `<llama.cpp tree>/models/ggml-vocab-llama-spm.gguf` */
  vocabPath?: string;
  /** llama.cpp checkout to take the vocab from. @default ensureSourceTree({ cacheDir, source: { kind: 'bundle' } }) */
  llamaSourceDir?: string;
  /** Where a progress bar is drawn when it is a TTY; `false` for none. @default process.stderr */
  progressTty?: NodeJS.WriteStream | false;
}

export interface EnsureOptions {
  /** Expected SHA-256 (hex); the file is refused (`DIGEST_MISMATCH`) unless it matches. */
  sha256?: string;
  /** Deadline / cancel: aborts a download or generation cleanly (`DEADLINE_EXCEEDED`). */
  signal?: AbortSignal;
  /** Download progress (at most every 250 ms, plus a final event). */
  onProgress?: (p: ModelProgress) => void;
}

/** `open` → `closed`; a closed provisioner refuses `ensure()` with `PROVISIONER_CLOSED`. */
export type ModelProvisionerState = 'open' | 'closing' | 'closed';

interface Located {
  path: string;
  sha256: string;
  size: number;
}

/**
 * The store key of a synthetic model. The generator's version is part of it: a file an older
 * generator wrote for the same parameters (other bytes, e.g. without a chat template) is never
 * picked up again.
 */
function syntheticKey(ref: Extract<ModelRef, { kind: 'synthetic' }>): string {
  return ModelStore.keyOf(`${ref.canonical}#generator=${SYNTHETIC_GENERATOR_VERSION}`);
}

/**
 * Resolves model refs to verified local GGUF files: downloads (`hf:`, `https:`), local files
 * (`file:`, paths; never copied) and generated models (`synthetic:`), registered in the catalog.
 * Concurrent ensures of one ref share one run in this process and one cross-process lock.
 */
export class ModelProvisioner {
  readonly catalog: Catalog;
  readonly store: ModelStore;
  private readonly log: Logger;
  /** Created on the first download: a cache hit never loads undici (it sits on pool-managerd's start path). */
  private http: Promise<Dispatcher> | undefined;
  private ownAgent: Agent | undefined;
  private readonly retry: RetryPolicy;
  private readonly hfBaseUrl: string;
  private readonly jobs = new SharedJobs<Omit<ResolvedModel, 'ref'>, ModelProgress>();
  private stateValue: ModelProvisionerState = 'open';
  private closing: Promise<void> | undefined;

  constructor(private readonly opts: ModelProvisionerOptions) {
    this.log = opts.logger.child({ component: 'model-provisioner' });
    this.store = new ModelStore(join(opts.cacheDir, 'models'), this.log);
    this.catalog =
      opts.catalog ??
      new Catalog({
        dir: this.store.root,
        logger: opts.logger,
        ...(opts.budgetBytes === undefined ? {} : { budgetBytes: opts.budgetBytes }),
        ...(opts.isPinned ? { isPinned: opts.isPinned } : {}),
        storeDir: this.store.blobDir,
      });
    this.retry = { attempts: 4, baseMs: 500, maxMs: 10_000, ...opts.retry };
    this.hfBaseUrl = (opts.hfBaseUrl ?? 'https://huggingface.co').replace(/\/+$/, '');
  }

  get state(): ModelProvisionerState {
    return this.stateValue;
  }

  /**
   * Makes the model of `ref` available locally and returns where it is and what it is.
   * Idempotent: a model already in the cache is returned without network access.
   * @throws ModelProvisionError (see its codes)
   */
  async ensure(ref: string, opts: EnsureOptions = {}): Promise<ResolvedModel> {
    if (this.stateValue !== 'open')
      throw new ModelProvisionError('PROVISIONER_CLOSED', 'model provisioner is closed', { ref });
    const parsed = parseModelRef(ref, this.opts.baseDir, { allowInsecureHttp: this.opts.allowInsecureHttp ?? false });
    let expected: string | undefined;
    if (opts.sha256 !== undefined) {
      const s = Sha256Schema.safeParse(opts.sha256.toLowerCase());
      if (!s.success)
        throw new ModelProvisionError(
          'INVALID_MODEL_REF',
          `expected sha256 '${opts.sha256}' is not 64 hex characters`,
          { ref },
        );
      expected = s.data;
    }
    const resolved = await this.jobs.run(
      `${parsed.canonical}\n${expected ?? ''}`,
      (signal, listeners) => this.resolve(parsed, expected, signal, listeners),
      {
        signal: opts.signal,
        onProgress: opts.onProgress,
        what: `ensure ${parsed.id}`,
      },
    );
    return { ...resolved, ref };
  }

  /**
   * Where the model of `ref` already is on this host, without downloading, generating or hashing
   * anything: a cached download or synthetic model (the one matching `sha256` when given), or a
   * local file as it is now. pool-managerd projects a load's memory from it before it admits the
   * load. `undefined` when the model is not here yet.
   * @throws ModelProvisionError `INVALID_MODEL_REF` for a malformed ref
   */
  async cachedFile(
    ref: string,
    opts: { sha256?: string } = {},
  ): Promise<{ path: string; size_bytes: number } | undefined> {
    const parsed = parseModelRef(ref, this.opts.baseDir, { allowInsecureHttp: this.opts.allowInsecureHttp ?? false });
    const expected = opts.sha256?.toLowerCase();
    if (parsed.kind === 'file') {
      const st = await stat(parsed.path).catch(() => undefined);
      return st?.isFile() === true ? { path: parsed.path, size_bytes: st.size } : undefined;
    }
    const key = parsed.kind === 'synthetic' ? syntheticKey(parsed) : ModelStore.keyOf(parsed.canonical);
    const hit = await this.cached(key, parsed.kind === 'synthetic' ? undefined : expected);
    if (hit === undefined || (expected !== undefined && hit.sha256 !== expected)) return undefined;
    return { path: hit.path, size_bytes: hit.size };
  }

  /** Aborts running work, waits for it to clean up, and closes the private HTTP agent. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stateValue = 'closing';
      await this.jobs.abortAll(new ModelProvisionError('PROVISIONER_CLOSED', 'model provisioner closed'));
      await this.http?.catch(() => undefined);
      await this.ownAgent?.close().catch(() => undefined);
      this.stateValue = 'closed';
    })();
    return this.closing;
  }

  private async resolve(
    ref: ModelRef,
    expected: string | undefined,
    signal: AbortSignal,
    listeners: ReadonlySet<(p: ModelProgress) => void>,
  ): Promise<Omit<ResolvedModel, 'ref'>> {
    const log = this.log.child({ model: ref.id });
    try {
      await Promise.all(
        [this.store.blobDir, this.store.refDir, this.store.tmpDir, this.store.lockDir].map((d) =>
          mkdir(d, { recursive: true }).catch((err: unknown) => {
            throw cacheError(err, d);
          }),
        ),
      );
      let located: Located;
      if (ref.kind === 'file') located = await this.resolveFile(ref, expected, signal);
      else if (ref.kind === 'synthetic') located = await this.resolveSynthetic(ref, expected, signal, log);
      else located = await this.resolveRemote(ref, expected, signal, listeners, log);

      const gguf = await readGgufInfo(located.path);
      if (gguf.tensor_count === 0) {
        throw new ModelProvisionError('INVALID_GGUF', `${located.path}: no tensors (a vocab-only file?)`, {
          path: located.path,
        });
      }
      await this.register(ref, located);
      log.info(
        { sha256: located.sha256, size_bytes: located.size, architecture: gguf.architecture, path: located.path },
        'model ready',
      );
      return ResolvedModelSchema.omit({ ref: true }).parse({
        id: ref.id,
        local_path: located.path,
        size_bytes: located.size,
        sha256: located.sha256,
        gguf,
        source: sourceOf(ref),
      });
    } catch (err) {
      if (signal.aborted && !(err instanceof ModelProvisionError && err.code === 'DEADLINE_EXCEEDED')) {
        throw new ModelProvisionError(
          'DEADLINE_EXCEEDED',
          `ensure ${ref.id}: aborted before the model was ready`,
          { id: ref.id },
          { cause: err },
        );
      }
      throw err;
    }
  }

  private digestMismatch(ref: ModelRef, expected: string, actual: string): ModelProvisionError {
    return new ModelProvisionError(
      'DIGEST_MISMATCH',
      `${ref.canonical}: sha256 mismatch: expected ${expected}, got ${actual}`,
      { id: ref.id, expected, actual },
    );
  }

  /** Local files are used in place; their hash is cached by (path, size, mtime). */
  private async resolveFile(
    ref: Extract<ModelRef, { kind: 'file' }>,
    expected: string | undefined,
    signal: AbortSignal,
  ): Promise<Located> {
    const st = await stat(ref.path).catch((err: unknown) => {
      throw new ModelProvisionError(
        'MODEL_NOT_FOUND',
        `model file not found: ${ref.path}`,
        { path: ref.path },
        { cause: err },
      );
    });
    if (!st.isFile())
      throw new ModelProvisionError('MODEL_NOT_FOUND', `not a regular file: ${ref.path}`, { path: ref.path });
    const key = ModelStore.keyOf(ref.canonical);
    const rec = await this.store.readRef(key);
    let sha: string;
    if (rec?.file && rec.file.path === ref.path && rec.file.size === st.size && rec.file.mtime_ms === st.mtimeMs) {
      sha = rec.sha256;
    } else {
      // header first: a non-GGUF file fails fast instead of after hashing gigabytes
      await readGgufHeader(ref.path);
      sha = await sha256File(ref.path, signal);
      await this.store.writeRef(key, {
        ref: ref.canonical,
        sha256: sha,
        size_bytes: st.size,
        file: { path: ref.path, size: st.size, mtime_ms: st.mtimeMs },
        updated_at: new Date().toISOString(),
      });
    }
    if (expected && sha !== expected) throw this.digestMismatch(ref, expected, sha);
    return { path: ref.path, sha256: sha, size: st.size };
  }

  /** A stored blob for this ref that satisfies `expected`, if any. */
  private async cached(key: string, expected: string | undefined): Promise<Located | undefined> {
    if (expected) {
      const size = await this.store.blobSize(expected);
      if (size !== undefined) return { path: this.store.blobPath(expected), sha256: expected, size };
    }
    const rec = await this.store.readRef(key);
    if (!rec || (expected && rec.sha256 !== expected)) return undefined;
    const size = await this.store.blobSize(rec.sha256);
    if (size !== rec.size_bytes) return undefined;
    return { path: this.store.blobPath(rec.sha256), sha256: rec.sha256, size };
  }

  private async withRefLock<T>(key: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    const release = await acquireLock(this.store.lockDir, key, { logger: this.log, signal });
    try {
      return await fn();
    } finally {
      await release().catch((err: unknown) => this.log.warn({ err }, 'model lock release failed'));
    }
  }

  private async record(key: string, ref: ModelRef, located: Located): Promise<void> {
    const rec: RefRecord = {
      ref: ref.canonical,
      sha256: located.sha256,
      size_bytes: located.size,
      updated_at: new Date().toISOString(),
    };
    await this.store.writeRef(key, rec);
  }

  private async vocabPath(signal: AbortSignal): Promise<string> {
    if (this.opts.vocabPath) return this.opts.vocabPath;
    let dir = this.opts.llamaSourceDir;
    if (!dir) {
      try {
        dir = (await ensureSourceTree({ cacheDir: this.opts.cacheDir, source: { kind: 'bundle' }, signal })).dir;
      } catch (err) {
        throw new ModelProvisionError(
          'MODEL_NOT_FOUND',
          `llama.cpp source for the synthetic vocab is unavailable: ${(err as Error).message}`,
          {},
          { cause: err },
        );
      }
    }
    return join(dir, SYNTHETIC_VOCAB_FILE);
  }

  private async resolveSynthetic(
    ref: Extract<ModelRef, { kind: 'synthetic' }>,
    expected: string | undefined,
    signal: AbortSignal,
    log: Logger,
  ): Promise<Located> {
    const key = syntheticKey(ref);
    const hit = await this.cached(key, undefined);
    if (hit && (!expected || hit.sha256 === expected)) return hit;
    return this.withRefLock(key, signal, async () => {
      const again = await this.cached(key, undefined);
      if (again && (!expected || again.sha256 === expected)) return again;
      const vocab = await this.vocabPath(signal);
      const tmp = join(this.store.tmpDir, `${key}.synthetic.gguf`);
      log.info(
        { ref: ref.canonical, params: ref.params, vocab },
        'generating synthetic llama model: random weights, its output text is noise',
      );
      const t0 = performance.now();
      const res = await writeSyntheticModel(ref.params, tmp, vocab, { signal });
      if (expected && res.sha256 !== expected) {
        await rm(tmp, { force: true });
        throw this.digestMismatch(ref, expected, res.sha256);
      }
      const path = await this.store.commit(tmp, res.sha256);
      const located = { path, sha256: res.sha256, size: res.size_bytes };
      await this.record(key, ref, located);
      log.info(
        {
          sha256: res.sha256,
          size_bytes: res.size_bytes,
          n_vocab: res.n_vocab,
          ms: Math.round(performance.now() - t0),
        },
        'synthetic model written',
      );
      return located;
    });
  }

  private dispatcher(): Promise<Dispatcher> {
    this.http ??= import('undici').then(({ Agent, interceptors }) => {
      const base = this.opts.dispatcher ?? (this.ownAgent = new Agent());
      return base.compose(interceptors.redirect({ maxRedirections: 5 }));
    });
    return this.http;
  }

  private urlOf(ref: Extract<ModelRef, { kind: 'hf' | 'url' }>): string {
    if (ref.kind === 'url') return ref.url;
    const path = ref.path.split('/').map(encodeURIComponent).join('/');
    return `${this.hfBaseUrl}/${encodeURIComponent(ref.org)}/${encodeURIComponent(ref.repo)}/resolve/main/${path}`;
  }

  private async resolveRemote(
    ref: Extract<ModelRef, { kind: 'hf' | 'url' }>,
    expected: string | undefined,
    signal: AbortSignal,
    listeners: ReadonlySet<(p: ModelProgress) => void>,
    log: Logger,
  ): Promise<Located> {
    const key = ModelStore.keyOf(ref.canonical);
    const hit = await this.cached(key, expected);
    if (hit) return hit;
    return this.withRefLock(key, signal, async () => {
      // another process may have finished the download while we waited for the lock
      const again = await this.cached(key, expected);
      if (again) return again;
      const url = this.urlOf(ref);
      const partial = this.store.partialPath(key);
      const headers: Record<string, string> = { 'user-agent': 'llama-orch-model-provisioner' };
      if (ref.kind === 'hf' && this.opts.hfToken) headers.authorization = `Bearer ${this.opts.hfToken}`;
      const progress = new ProgressReporter(
        {
          logger: log,
          tty: this.opts.progressTty === false ? undefined : (this.opts.progressTty ?? process.stderr),
          listeners,
        },
        ref.id,
      );
      const resumeFrom = await stat(partial).then(
        (s) => s.size,
        () => 0,
      );
      log.info({ ref: ref.canonical, resume_from: resumeFrom }, 'downloading model');
      const t0 = performance.now();
      let res;
      try {
        res = await download({
          url,
          partialPath: partial,
          headers,
          dispatcher: await this.dispatcher(),
          retry: this.retry,
          stallTimeoutMs: this.opts.stallTimeoutMs ?? 60_000,
          logger: log,
          progress,
          signal,
        });
      } catch (err) {
        // bytes from transient failures stay for the next ensure to resume; anything else is dropped
        const resumable =
          err instanceof ModelProvisionError && err.code === 'MODEL_FETCH_FAILED' && err.context.attempts !== undefined;
        if (!resumable) await removePartial(partial);
        throw err;
      } finally {
        progress.finish();
      }
      if (expected && res.sha256 !== expected) {
        await removePartial(partial);
        throw this.digestMismatch(ref, expected, res.sha256);
      }
      try {
        await readGgufHeader(partial);
      } catch (err) {
        await removePartial(partial);
        throw err;
      }
      const path = await this.store.commit(partial, res.sha256);
      await removePartial(partial);
      const located = { path, sha256: res.sha256, size: res.size_bytes };
      await this.record(key, ref, located);
      const secs = (performance.now() - t0) / 1000;
      log.info(
        {
          sha256: res.sha256,
          size_bytes: res.size_bytes,
          seconds: Number(secs.toFixed(3)),
          mib_per_s: Number((res.size_bytes / 2 ** 20 / secs).toFixed(1)),
        },
        'model downloaded and verified',
      );
      return located;
    });
  }

  private async register(ref: ModelRef, located: Located): Promise<void> {
    const existing = await this.catalog.get(ref.id);
    if (existing && existing.sha256 === located.sha256 && existing.local_path === located.path) {
      await this.catalog.touch(ref.id);
    } else {
      const detail =
        ref.kind === 'hf'
          ? this.urlOf(ref)
          : ref.kind === 'url'
            ? (ref.url.split('?')[0] ?? ref.url)
            : ref.kind === 'file'
              ? ref.path
              : `${ref.canonical} (random weights; text is noise)`;
      await this.catalog.put({
        id: ref.id,
        ref: ref.canonical,
        local_path: located.path,
        sha256: located.sha256,
        size_bytes: located.size,
        lifecycle: existing?.lifecycle ?? 'Active',
        last_used: new Date().toISOString(),
        provenance: { source: sourceOf(ref), detail },
      });
    }
    await this.catalog.evict({ keep: [ref.id] });
  }
}
