import type { PoolCapability } from '@llama-orch/contracts';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';

/**
 * What an engine serves (issue 27), from the flags it runs with and what it says itself. An engine
 * started with `--embeddings` serves only `/v1/embeddings` and one with `--reranking` only
 * `/v1/rerank`: their models are not generators, and generation there would share the pooled
 * context. Any other engine serves chat and completion, and infill when its model has the
 * fill-in-the-middle tokens (asked of the engine: `/props` does not say).
 */
export function flagCapabilities(flags: readonly string[]): PoolCapability[] | undefined {
  if (flags.includes('--reranking') || flags.includes('--rerank')) return ['rerank'];
  if (flags.includes('--embeddings') || flags.includes('--embedding')) return ['embeddings'];
  return undefined;
}

/** {@link flagCapabilities}, else chat and completion plus infill when the engine accepts `/infill` for its model. */
export async function engineCapabilities(
  client: Pick<LlamaServerClient, 'supportsInfill'>,
  flags: readonly string[],
  signal?: AbortSignal,
): Promise<PoolCapability[]> {
  const fixed = flagCapabilities(flags);
  if (fixed !== undefined) return fixed;
  return (await client.supportsInfill(signal)) ? ['chat', 'completion', 'infill'] : ['chat', 'completion'];
}
