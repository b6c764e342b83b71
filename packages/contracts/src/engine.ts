import { z } from 'zod';
import { EngineKindSchema, GpuPolicySchema, PoolIdSchema, TimestampSchema } from './common.js';

/** Where an engine's llama.cpp comes from. */
export const EngineSourceSchema = z
  .discriminatedUnion('kind', [
    z.strictObject({
      /** The llama.cpp git bundle shipped in the `node-llama-cpp` npm package (no network). */
      kind: z.literal('bundle'),
      /** Override of the bundle file; default: resolved from the installed package. */
      bundle_path: z.string().optional(),
      /**
       * Apply the llama.cpp patches llama-orch carries (packages/llamacpp-source/patches) before
       * building; `false` builds the source exactly as it is (e.g. a ref the patches were not
       * written for: a patch that does not apply fails the build with PATCH_FAILED). @default true
       */
      patches: z.boolean().optional(),
    }),
    z.strictObject({
      /** A git repository (hosts with internet or a mirror). */
      kind: z.literal('git'),
      /** Clone URL or local path. */
      repo: z.string().min(1),
      /** Branch, tag or commit. */
      ref: z.string().min(1),
      /**
       * Apply the llama.cpp patches llama-orch carries (packages/llamacpp-source/patches) before
       * building; `false` builds the source exactly as it is (e.g. a ref the patches were not
       * written for: a patch that does not apply fails the build with PATCH_FAILED). @default true
       */
      patches: z.boolean().optional(),
    }),
    z.strictObject({
      /** An existing `llama-server` binary; verified by running `--version`. */
      kind: z.literal('external'),
      /** Path to the binary. */
      binary_path: z.string().min(1),
    }),
  ])
  .meta({ id: 'EngineSource' });
export type EngineSource = z.infer<typeof EngineSourceSchema>;

/** What was built, from what, with which tools. Written as `build.json` next to the binary. */
export const BuildProvenanceSchema = z
  .strictObject({
    /** Source label (`bundle:v0.5.0`, `git:<repo>@<ref>`, `external`). */
    source: z.string(),
    /** llama.cpp commit the binary was built from; absent for external binaries. */
    commit: z.string().optional(),
    /** CMake `-D` flags used, in order. */
    cmake_flags: z.array(z.string()),
    /** Whether the CUDA backend is compiled in. */
    cuda: z.boolean(),
    /** Toolchain versions (`cmake`, `cc`, `nvcc`). */
    toolchain: z.record(z.string(), z.string()),
    /** Wall time of the build, milliseconds (0 for external). */
    build_ms: z.number().nonnegative(),
    /** Carried patches applied to the source before the build, in order (absent: none). */
    patches: z.array(z.string()).optional(),
    /** First line(s) of `llama-server --version`. */
    version_output: z.string(),
    /** When the build finished. */
    built_at: TimestampSchema,
  })
  .meta({ id: 'BuildProvenance' });
export type BuildProvenance = z.infer<typeof BuildProvenanceSchema>;

/** An engine ready to spawn. engine-provisioner returns it; pool-managerd spawns and supervises. */
export const PreparedEngineSchema = z
  .strictObject({
    /** Absolute path of the `llama-server` binary. */
    binary_path: z.string(),
    /** Complete argv after the binary (model, host, port, ctx, slots, …). */
    flags: z.array(z.string()),
    /** Bind host; always loopback: only pool-managerd talks to engines. */
    host: z.string(),
    /** Bind port. */
    port: z.int().min(1).max(65535),
    /** Model file passed with `-m`. */
    model_path: z.string(),
    /** Engine kind. */
    engine: EngineKindSchema,
    /** Version string reported by the binary (e.g. `0.5.0-dev (build 1, commit de3ff81)`). */
    engine_version: z.string(),
    /** Hash of source commit + build flags + toolchain (+ CPU when native): the cache key. */
    engine_fingerprint: z.string(),
    /** Build provenance. */
    build_provenance: BuildProvenanceSchema,
    /** Pool the engine serves. */
    pool_id: PoolIdSchema,
    /** Replica within the pool. */
    replica_id: z.string(),
    /** `CUDA_VISIBLE_DEVICES` value for the process, when pinned to devices. */
    device_mask: z.string().optional(),
    /** GPU policy the engine was prepared under. */
    gpu_policy: GpuPolicySchema,
  })
  .meta({ id: 'PreparedEngine' });
export type PreparedEngine = z.infer<typeof PreparedEngineSchema>;
