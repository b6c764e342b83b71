import { z } from 'zod';
import { EngineSourceSchema } from './engine.js';
import { GpuPolicySchema, HttpUrlSchema, NodeIdSchema, PoolIdSchema, Sha256Schema } from './common.js';

/** `host:port`; host may be an IPv4/IPv6 literal or a name. */
const HostPortSchema = z.string().regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'expected host:port');

/**
 * A Redis/Valkey URL: `redis://` or `rediss://`, a host, an optional port (1–65535) and database
 * number; credentials in the userinfo are allowed. Query strings and other paths are refused.
 */
export const RedisUrlSchema = z.string().superRefine((value, ctx) => {
  const problem = redisUrlProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `${problem} (expected redis://host:port/db or rediss://host:port/db)` });
});

function redisUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return `scheme ${url.protocol} is not redis: or rediss:`;
  if (url.hostname === '') return 'no host';
  if (url.port !== '' && (Number(url.port) < 1 || Number(url.port) > 65_535)) return `port ${url.port} is out of range`;
  if (!/^\/?(\d{1,5})?$/.test(url.pathname)) return `path ${url.pathname} is not a database number`;
  if (url.search !== '' || url.hash !== '') return 'query strings and fragments are not supported';
  return undefined;
}

/**
 * orchestratord configuration, read from the environment once at start-up (names from upstream).
 * Keys are the parsed form; {@link ORCHESTRATOR_ENV} maps env var names to them.
 */
export const OrchestratorConfigSchema = z
  .strictObject({
    /** Listen address. @default 127.0.0.1:8080 (env ORCHD_ADDR) */
    addr: HostPortSchema.default('127.0.0.1:8080'),
    /** Public base URL used in `streams.*` links; default derived from `addr`. (env ORCHD_PUBLIC_URL) */
    public_url: HttpUrlSchema.optional(),
    /** Bearer token for every route but /metrics; required on a non-loopback bind. (env LLORCH_API_TOKEN) */
    api_token: z.string().min(16, 'LLORCH_API_TOKEN must be at least 16 characters').optional(),
    /**
     * Token of the node API (register, heartbeat, deregister) and of the calls to pool-managerd,
     * apart from the client keys; absent = `api_token` serves both. (env LLORCH_NODE_TOKEN)
     */
    node_token: z.string().min(16, 'LLORCH_NODE_TOKEN must be at least 16 characters').optional(),
    /** YAML file of client API keys (`KeysFileSchema`); absent = `api_token` only. (env ORCHD_KEYS_FILE) */
    keys_file: z.string().min(1).optional(),
    /** Admission queue capacity (tasks). @default 1024 (env ORCHD_ADMISSION_CAPACITY) */
    admission_capacity: z.coerce.number().int().min(1).max(10_000_000).default(1024),
    /** What a full queue does: `reject` (429) or `drop-lru` (evict the oldest batch task). @default reject (env ORCHD_ADMISSION_POLICY) */
    admission_policy: z.enum(['reject', 'drop-lru']).default('reject'),
    /**
     * Placement strategy: `cache-aware` (the pool that holds the longest prefix of the prompt in its
     * prompt cache, under a load guard; .specs/68-prefix-routing.md), `least-loaded` or `round-robin`.
     * @default cache-aware (env ORCHESTRATORD_PLACEMENT_STRATEGY)
     */
    placement_strategy: z.enum(['cache-aware', 'least-loaded', 'round-robin']).default('cache-aware'),
    /** Expected heartbeat interval of nodes, ms; offline after 3 missed. @default 5000 (env ORCHD_NODE_HEARTBEAT_MS) */
    heartbeat_interval_ms: z.coerce.number().int().min(50).max(600_000).default(5000),
    /**
     * How long a node may take to answer a dispatch with its response headers, ms. A node answers at
     * once (before the engine starts), so silence means it is frozen or unreachable: the task is placed
     * elsewhere and the node is suspect until its next heartbeat, well before the heartbeat timeout
     * marks it offline. @default max(heartbeat_interval_ms, 1000) (env ORCHD_DISPATCH_ACCEPT_TIMEOUT_MS)
     */
    dispatch_accept_timeout_ms: z.coerce.number().int().min(50).max(600_000).optional(),
    /**
     * Dispatches in flight to one node over HTTP/1.1 before the rest go over the node's h2c listener
     * (when it offers one). HTTP/1.1 reaches the node sooner; h2c carries any number of tasks on one
     * connection. 0 = h2c whenever offered. @default 8 (env ORCHD_DISPATCH_HTTP1_PER_NODE)
     */
    dispatch_http1_per_node: z.coerce.number().int().min(0).max(100_000).default(8),
    /** Largest ctx accepted when no pool reports one. @default 32768 (env ORCHD_CTX_MAX) */
    ctx_max: z.coerce.number().int().min(1).default(32_768),
    /** How long a finished task's frames stay for `Last-Event-ID` resume, ms. @default 60000 (env ORCHD_STREAM_GRACE_MS) */
    stream_grace_ms: z.coerce.number().int().min(0).default(60_000),
    /**
     * At most this many finished tasks are kept for resume; past it the oldest go first, before their
     * grace ends (bounds memory under a flood of short tasks). @default 100000 (env ORCHD_STREAM_GRACE_MAX_TASKS)
     */
    stream_grace_max_tasks: z.coerce.number().int().min(0).default(100_000),
    /**
     * How long a task's record (`GET /v2/tasks/{id}`, the task list) and a stored Response
     * (`/v1/responses/{id}`) are kept after the task ends, ms. @default 86400000 = 24 h (env ORCHD_TASK_RETENTION_MS)
     */
    task_retention_ms: z.coerce.number().int().min(1000).default(86_400_000),
    /**
     * At most this many task records are kept, and as many stored Responses; past it the oldest go
     * first (bounds memory in one process and in Redis). @default 10000 (env ORCHD_TASK_RETENTION_COUNT)
     */
    task_retention_count: z.coerce.number().int().min(1).max(10_000_000).default(10_000),
    /** SSE keep-alive comment interval, ms. @default 15000 (env ORCHD_SSE_KEEPALIVE_MS) */
    sse_keepalive_ms: z.coerce.number().int().min(10).max(15_000).default(15_000),
    /** Session time-to-live without activity, ms. @default 600000 (env ORCHD_SESSION_TTL_MS) */
    session_ttl_ms: z.coerce.number().int().min(1000).default(600_000),
    /**
     * Sessions kept at most; past it a new session evicts the least recently active idle one (bounds
     * memory under a flood of unique session ids). @default 100000 (env ORCHD_SESSION_MAX)
     */
    session_max: z.coerce.number().int().min(1).default(100_000),
    /** Per-session token budget; absent = unlimited. (env ORCHD_SESSION_TOKEN_BUDGET) */
    session_token_budget: z.coerce.number().int().min(1).optional(),
    /**
     * Directory for state that survives a restart: the catalog's registered interest
     * (`catalog-interest.json`). Absent = in memory only. (env ORCHD_STATE_DIR)
     */
    state_dir: z.string().min(1).optional(),
    /**
     * YAML file of catalog models registered at start-up (`models:`, a list of
     * `CatalogRegisterRequest`s, .specs/67-models-on-demand.md): each one absent from the catalog is
     * registered; one already there is left as it is (changes made through the API since win). An
     * invalid file refuses the start. Absent = nothing registered. (env ORCHD_CATALOG_FILE)
     */
    catalog_file: z.string().min(1).optional(),
    /**
     * Deadline of a task whose request names none (`/v2` without `deadline_ms`, every `/v1` request),
     * ms from admission to the end of its stream. @default 300000 (env ORCHD_DEFAULT_DEADLINE_MS)
     */
    default_deadline_ms: z.coerce.number().int().min(1).max(86_400_000).default(300_000),
    /** Largest request body, bytes. @default 1048576 (env ORCHD_BODY_LIMIT) */
    body_limit: z.coerce.number().int().min(1024).default(1_048_576),
    /**
     * Browser origins allowed to call the API (CORS), comma-separated `scheme://host[:port]`, or `*`
     * for any. Absent = none: no CORS headers, preflights are unknown routes. (env ORCHD_CORS_ORIGINS)
     */
    cors_origins: z
      .string()
      .transform((s) => s.split(',').map((o) => o.trim()).filter((o) => o !== ''))
      .pipe(z.array(z.union([z.literal('*'), z.string().regex(/^https?:\/\/[^/\s,]+$/, 'an origin is scheme://host[:port], no path')])).min(1))
      .optional(),
    /**
     * Cluster store shared by orchestratord replicas: `redis://[user:password@]host[:port][/db]` or
     * `rediss://…` (TLS), Redis ≥ 7.0 or Valkey ≥ 7.2. Absent = in-process state, one replica (the
     * default; nothing new is loaded). See .specs/65-cluster-store.md. (env ORCHD_REDIS_URL)
     */
    redis_url: RedisUrlSchema.optional(),
    /** Prefix of every key the cluster store writes, so two clusters can share one Redis. @default llorch: (env ORCHD_REDIS_PREFIX) */
    redis_prefix: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,64}$/, 'a key prefix is 1–64 of [A-Za-z0-9._:-]')
      .default('llorch:'),
    /**
     * This replica's id among the replicas of one cluster store (the dashboard's "replicas", task
     * ownership). Absent = `<hostname>-<pid>`. (env ORCHD_REPLICA_ID)
     */
    replica_id: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, 'a replica id is 1–64 of [A-Za-z0-9._-]')
      .optional(),
    /**
     * Base URL at which the other replicas reach this one directly, not through the load balancer
     * (a task read on another replica is served from the replica that owns it). Absent = the bound
     * address. (env ORCHD_ADVERTISE_URL)
     */
    advertise_url: HttpUrlSchema.optional(),
    /**
     * On SIGTERM/SIGINT, longest this process goes on serving and finishing the tasks it admitted
     * (running and queued) before it closes; what is left then ends with `error INTERNAL`. Not
     * ready from the signal on. 0 = no drain. @default 30000 (env ORCHD_DRAIN_GRACE_MS)
     */
    drain_grace_ms: z.coerce.number().int().min(0).max(600_000).default(30_000),
    /**
     * On SIGTERM/SIGINT, how long admission stays open in the drain (and its shortest length): the
     * time a load balancer's health checks take to see /readyz fail and stop sending (HAProxy at
     * `inter 1s fall 2`: ≤ 3 s); later tasks are refused (retriable). Capped by `drain_grace_ms`.
     * 0 = no balancer in front. @default 0 (env ORCHD_DRAIN_DELAY_MS)
     */
    drain_delay_ms: z.coerce.number().int().min(0).max(60_000).default(0),
    /** pino level. @default info (env LOG_LEVEL) */
    log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  })
  .meta({ id: 'OrchestratorConfig' });
export type OrchestratorConfig = z.infer<typeof OrchestratorConfigSchema>;

/** Env var → config key for orchestratord. */
export const ORCHESTRATOR_ENV: Readonly<Record<string, keyof OrchestratorConfig>> = Object.freeze({
  ORCHD_ADDR: 'addr',
  ORCHD_PUBLIC_URL: 'public_url',
  LLORCH_API_TOKEN: 'api_token',
  LLORCH_NODE_TOKEN: 'node_token',
  ORCHD_KEYS_FILE: 'keys_file',
  ORCHD_ADMISSION_CAPACITY: 'admission_capacity',
  ORCHD_ADMISSION_POLICY: 'admission_policy',
  ORCHESTRATORD_PLACEMENT_STRATEGY: 'placement_strategy',
  ORCHD_NODE_HEARTBEAT_MS: 'heartbeat_interval_ms',
  ORCHD_DISPATCH_ACCEPT_TIMEOUT_MS: 'dispatch_accept_timeout_ms',
  ORCHD_DISPATCH_HTTP1_PER_NODE: 'dispatch_http1_per_node',
  ORCHD_CTX_MAX: 'ctx_max',
  ORCHD_STREAM_GRACE_MS: 'stream_grace_ms',
  ORCHD_STREAM_GRACE_MAX_TASKS: 'stream_grace_max_tasks',
  ORCHD_TASK_RETENTION_MS: 'task_retention_ms',
  ORCHD_TASK_RETENTION_COUNT: 'task_retention_count',
  ORCHD_SSE_KEEPALIVE_MS: 'sse_keepalive_ms',
  ORCHD_SESSION_TTL_MS: 'session_ttl_ms',
  ORCHD_SESSION_MAX: 'session_max',
  ORCHD_SESSION_TOKEN_BUDGET: 'session_token_budget',
  ORCHD_DEFAULT_DEADLINE_MS: 'default_deadline_ms',
  ORCHD_BODY_LIMIT: 'body_limit',
  ORCHD_STATE_DIR: 'state_dir',
  ORCHD_CATALOG_FILE: 'catalog_file',
  ORCHD_CORS_ORIGINS: 'cors_origins',
  ORCHD_REDIS_URL: 'redis_url',
  ORCHD_REDIS_PREFIX: 'redis_prefix',
  ORCHD_REPLICA_ID: 'replica_id',
  ORCHD_ADVERTISE_URL: 'advertise_url',
  ORCHD_DRAIN_GRACE_MS: 'drain_grace_ms',
  ORCHD_DRAIN_DELAY_MS: 'drain_delay_ms',
  LOG_LEVEL: 'log_level',
});

/** One pool of a pool-managerd node. */
export const PoolConfigSchema = z
  .strictObject({
    /** Pool id, unique in the cluster. */
    id: PoolIdSchema,
    /** Engine kind. @default llamacpp */
    engine: z.literal('llamacpp').default('llamacpp'),
    /** Where llama.cpp comes from. @default { kind: bundle } */
    source: EngineSourceSchema.default({ kind: 'bundle' }),
    /** GPU policy. @default off */
    gpu: GpuPolicySchema.default('off'),
    /** `CMAKE_CUDA_ARCHITECTURES` for CUDA builds (e.g. `90` for H100/H200). @default 90 */
    cuda_architectures: z.string().regex(/^[0-9a-z;-]+$/).default('90'),
    /** Build CPU code for this machine's CPU (`GGML_NATIVE`); the CPU is then part of the cache key. @default false */
    native: z.boolean().default(false),
    /** Extra CMake flags (`-DNAME=VALUE`). */
    build_flags: z.array(z.string().regex(/^-D[A-Za-z0-9_]+=.*$/, 'build flags must look like -DNAME=VALUE')).default([]),
    /** Model ref (`hf:`, `https://`, `file:`, path, `synthetic:`). */
    model: z.string().min(1),
    /**
     * Other names clients may use for this pool's model (`model` in /v1 requests, `model_ref` in
     * /v2); the first is the id `GET /v1/models` lists. @default []
     */
    aliases: z.array(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$/, 'alias: 1–128 of [A-Za-z0-9._:/@+-], not starting with a symbol')).max(16).default([]),
    /** Expected SHA-256 of the model file. */
    sha256: Sha256Schema.optional(),
    /** Engine context size, tokens (`-c`). @default 2048 */
    ctx: z.int().min(64).max(1_048_576).default(2048),
    /** Slots (`--parallel`). @default 1 */
    slots: z.int().min(1).max(256).default(1),
    /** Determinism profile: `-np 1 --no-cont-batching`, greedy-friendly. @default false */
    determinism: z.boolean().default(false),
    /** GPU layers to offload (`--n-gpu-layers`); `all` or a number. */
    gpu_layers: z.union([z.literal('all'), z.int().min(0)]).optional(),
    /** `CUDA_VISIBLE_DEVICES` for the engine. */
    device_mask: z.string().regex(/^[0-9,]+$/).optional(),
    /** Engine port; 0 = pick a free port. @default 0 */
    port: z.int().min(0).max(65535).default(0),
    /** Generation threads (`-t`); absent = engine default. */
    threads: z.int().min(1).max(1024).optional(),
    /** Extra engine flags appended verbatim (after normalisation of GPU-layer aliases). */
    extra_flags: z.array(z.string()).default([]),
    /**
     * Serve embeddings (`--embeddings`): the pool answers `/v1/embeddings` and no generation
     * (embedding models are not generators). Pooling comes from the model unless `pooling` says. @default false
     */
    embeddings: z.boolean().default(false),
    /** Serve reranking (`--reranking`: rank pooling): the pool answers `/v1/rerank` and nothing else. @default false */
    reranking: z.boolean().default(false),
    /** Override the model's pooling for `embeddings` (`--pooling`). @default the model's */
    pooling: z.enum(['none', 'mean', 'cls', 'last']).optional(),
  })
  .refine((p) => !(p.embeddings && p.reranking), { message: 'a pool serves either embeddings or reranking, not both', path: ['reranking'] })
  .refine((p) => p.pooling === undefined || p.embeddings, { message: 'pooling needs embeddings: true', path: ['pooling'] })
  .meta({ id: 'PoolConfig' });
export type PoolConfig = z.infer<typeof PoolConfigSchema>;
export type PoolConfigInput = z.input<typeof PoolConfigSchema>;

/** How pool-managerd supervises engines (spec 50); every field optional, defaults shown. */
export const SupervisionConfigSchema = z
  .strictObject({
    /** First restart delay after a crash, ms (doubles per consecutive failure, ±10 % jitter). @default 1000 */
    backoff_base_ms: z.int().min(10).max(3_600_000).optional(),
    /** Largest restart delay, ms. @default 60000 */
    backoff_max_ms: z.int().min(10).max(3_600_000).optional(),
    /** Consecutive failures that open the circuit breaker (pool `failed`, no restarts). @default 5 */
    breaker_threshold: z.int().min(1).max(1000).optional(),
    /** Open-breaker cool-down before one half-open trial, ms. @default 300000 */
    breaker_cooldown_ms: z.int().min(100).max(86_400_000).optional(),
    /** Restart-storm limit: at most this many restarts per window. @default 10 */
    restart_max: z.int().min(1).max(10_000).optional(),
    /** Restart-storm window, ms. @default 60000 */
    restart_window_ms: z.int().min(100).max(86_400_000).optional(),
    /** Ready for this long counts as stable: backoff reset, breaker closed, ms. @default 60000 */
    stable_after_ms: z.int().min(0).max(86_400_000).optional(),
    /** SIGTERM → SIGKILL grace when stopping an engine, ms. @default 5000 */
    stop_timeout_ms: z.int().min(100).max(600_000).optional(),
    /** Spawn → /health 200 limit before the process is killed as failed, ms. @default 120000 */
    readiness_timeout_ms: z.int().min(100).max(3_600_000).optional(),
  })
  .meta({ id: 'SupervisionConfig' });
export type SupervisionConfig = z.infer<typeof SupervisionConfigSchema>;

/**
 * pool-managerd: pools started on orchestratord's request for catalog models (spec 67). Each such
 * pool is a PoolConfig made of the request (model, aliases, ctx, slots, GPU policy, what it
 * serves) and these engine settings.
 */
export const OnDemandConfigSchema = z
  .strictObject({
    /** Bytes the pools loaded on request may take together (host memory for CPU pools). */
    memory_budget_bytes: z.int().positive(),
    /** Most pools loaded on request at once. @default 8 */
    max_pools: z.int().min(1).max(64).default(8),
    /** Where llama.cpp comes from. @default { kind: bundle } */
    source: EngineSourceSchema.default({ kind: 'bundle' }),
    /** `CMAKE_CUDA_ARCHITECTURES` for CUDA builds. @default 90 */
    cuda_architectures: z.string().regex(/^[0-9a-z;-]+$/).default('90'),
    /** Build CPU code for this machine's CPU (`GGML_NATIVE`). @default false */
    native: z.boolean().default(false),
    /** Generation threads (`-t`) of each engine; absent = engine default. */
    threads: z.int().min(1).max(1024).optional(),
  })
  .meta({ id: 'OnDemandConfig' });
export type OnDemandConfig = z.infer<typeof OnDemandConfigSchema>;

/** pool-managerd YAML config (`requirements/*.yaml`). */
export const PoolManagerConfigSchema = z
  .strictObject({
    /** Node identity. */
    node: z.strictObject({
      /** Node id, unique in the cluster. */
      id: NodeIdSchema,
      /** Listen address of pool-managerd's HTTP API. @default 127.0.0.1:9200 */
      addr: HostPortSchema.default('127.0.0.1:9200'),
      /** URL orchestratord uses to reach this node; default derived from `addr`. */
      public_url: HttpUrlSchema.optional(),
      /**
       * Listen address of the dispatch listener over cleartext HTTP/2 (h2c), registered as
       * `dispatch_h2c`: orchestratord then sends every task for this node over one connection.
       * `off` = HTTP/1.1 only. @default the host of `addr`, any free port
       */
      dispatch_h2c_addr: z.union([HostPortSchema, z.literal('off')]).optional(),
    }),
    /** Where orchestratord is; absent = standalone (no registration). */
    orchestrator: z
      .strictObject({
        /** Base URL of orchestratord. */
        url: HttpUrlSchema,
        /** Heartbeat interval, ms. @default 5000 */
        heartbeat_interval_ms: z.int().min(50).max(600_000).default(5000),
      })
      .optional(),
    /** Bearer token (for both directions); may also come from env `LLORCH_API_TOKEN`. */
    api_token: z.string().min(16).optional(),
    /** Runtime dir: handoff files, PID files, engine logs. @default ~/.local/state/llama-orch/<node id> */
    runtime_dir: z.string().optional(),
    /** Cache dir: engines, sources, models. @default ~/.cache/llama-orch */
    cache_dir: z.string().optional(),
    /** Model cache budget, bytes; LRU eviction above it. */
    model_cache_budget_bytes: z.int().positive().optional(),
    /** Engine supervision tuning; absent = the spec 50 defaults. */
    supervision: SupervisionConfigSchema.optional(),
    /** Pools on this node (static: pinned models). At least one, unless `on_demand` is set. @default [] */
    pools: z.array(PoolConfigSchema).max(64).default([]),
    /** Load catalog models on orchestratord's request; absent = this node serves only `pools`. */
    on_demand: OnDemandConfigSchema.optional(),
  })
  .superRefine((cfg, ctx) => {
    if (cfg.pools.length === 0 && cfg.on_demand === undefined)
      ctx.addIssue({ code: 'custom', message: 'a node needs at least one pool, or on_demand to load models on request', path: ['pools'] });
    const seen = new Set<string>();
    cfg.pools.forEach((p, i) => {
      if (seen.has(p.id)) ctx.addIssue({ code: 'custom', message: `duplicate pool id '${p.id}'`, path: ['pools', i, 'id'] });
      seen.add(p.id);
    });
  })
  .meta({ id: 'PoolManagerConfig', description: 'pool-managerd configuration file (YAML).' });
export type PoolManagerConfig = z.infer<typeof PoolManagerConfigSchema>;
export type PoolManagerConfigInput = z.input<typeof PoolManagerConfigSchema>;
