import { z } from 'zod';

/**
 * What a pool's engine can serve (issue 27). `chat` and `completion` are the generation routes;
 * `embeddings` needs llama-server's `--embeddings` (pool config `embeddings: true`), `rerank` its
 * `--reranking` (`reranking: true`), `infill` a model with fill-in-the-middle tokens (the engine
 * says so: its `/infill` answers 501 for a model without them). Placement only picks a pool whose
 * capabilities include the request's kind.
 */
export const PoolCapabilitySchema = z.enum(['chat', 'completion', 'embeddings', 'rerank', 'infill']).meta({ id: 'PoolCapability' });
export type PoolCapability = z.infer<typeof PoolCapabilitySchema>;

/** A pool that does not report its capabilities (an older pool-managerd) serves these. */
export const DEFAULT_POOL_CAPABILITIES: readonly PoolCapability[] = Object.freeze(['chat', 'completion']);

/** Engine routes a dispatch can name besides generation: the door's body goes to the engine as it is. */
export const EngineCallKindSchema = z.enum(['embeddings', 'rerank', 'infill']);
export type EngineCallKind = z.infer<typeof EngineCallKindSchema>;

/** The llama-server route of each engine call (reference §4). */
export const ENGINE_CALL_ROUTES: Readonly<Record<EngineCallKind, string>> = Object.freeze({
  embeddings: '/v1/embeddings',
  rerank: '/v1/rerank',
  infill: '/infill',
});

/**
 * An engine call carried by a task and its dispatch: which engine route, and the body the door
 * validated, forwarded to the engine unchanged (so the answer is the engine's own). Not part of
 * `POST /v2/tasks`: the doors (`/v1/embeddings`, `/v1/rerank`, `/infill`) make it.
 */
export const EngineCallSchema = z
  .strictObject({
    /** The engine route to call. */
    kind: EngineCallKindSchema,
    /** The request body for that route (validated by the door, not re-validated on the node). */
    body: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'EngineCall' });
export type EngineCall = z.infer<typeof EngineCallSchema>;

/** The capability a task needs: its engine call's kind, else its workload (`chat` or `completion`). */
export function taskCapability(task: { readonly workload: 'chat' | 'completion'; readonly call?: EngineCall | undefined }): PoolCapability {
  return task.call?.kind ?? task.workload;
}

/** Whether a pool with these capabilities (absent: {@link DEFAULT_POOL_CAPABILITIES}) serves `kind`. */
export function servesCapability(capabilities: readonly PoolCapability[] | undefined, kind: PoolCapability): boolean {
  return (capabilities ?? DEFAULT_POOL_CAPABILITIES).includes(kind);
}
