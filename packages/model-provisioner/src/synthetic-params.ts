import { ModelProvisionError } from './errors.js';

/** Shape of a `synthetic:llama` model. Every field has a default, see {@link SYNTHETIC_LLAMA_DEFAULTS}. */
export interface SyntheticLlamaParams {
  /** Transformer blocks (`llama.block_count`). @default 2 */
  layers: number;
  /** Embedding width (`llama.embedding_length`); a multiple of `heads` with an even head size. @default 64 */
  embd: number;
  /** Attention heads (also used as KV heads). @default 4 */
  heads: number;
  /** Feed-forward width (`llama.feed_forward_length`). @default 128 */
  ff: number;
  /** Training context written to `llama.context_length`. @default 256 */
  ctx: number;
  /** PRNG seed (unsigned 32-bit). @default 42 */
  seed: number;
  /** Weight type of the 2-D tensors; norm weights stay F32. @default f32 */
  type: 'f32' | 'f16';
  /**
   * What the model is for. `chat`: a causal text generator (the original). `embed`: an embedding
   * model — non-causal attention (`llama.attention.causal = false`) and mean pooling
   * (`llama.pooling_type = 1`), which llama-server's `--embeddings` serves on `/v1/embeddings`
   * and `--reranking` on `/rerank` (rank pooling over the first token, no classification head).
   * @default chat
   */
  role: 'chat' | 'embed';
  /**
   * Fill-in-the-middle tokens in the vocab metadata (`tokenizer.ggml.fim_pre/suf/mid_token_id`),
   * so llama-server's `/infill` accepts the model. @default false
   */
  fim: boolean;
}

export const SYNTHETIC_LLAMA_DEFAULTS: Readonly<SyntheticLlamaParams> = Object.freeze({
  layers: 2,
  embd: 64,
  heads: 4,
  ff: 128,
  ctx: 256,
  seed: 42,
  type: 'f32',
  role: 'chat',
  fim: false,
});

/** Order of the parameters in a canonical ref; also the set of accepted names. */
const ORDER = ['layers', 'embd', 'heads', 'ff', 'ctx', 'seed', 'type', 'role', 'fim'] as const;
type ParamName = (typeof ORDER)[number];
/** Parameters added after refs were first cached: written in a canonical ref only when not default, so older refs keep their ids. */
const LATER: ReadonlySet<ParamName> = new Set(['role', 'fim']);

const INT_BOUNDS: Record<Exclude<ParamName, 'type' | 'role' | 'fim'>, readonly [number, number]> = {
  layers: [1, 64],
  embd: [8, 4096],
  heads: [1, 64],
  ff: [1, 16384],
  ctx: [8, 131072],
  seed: [0, 0xffff_ffff],
};

function invalid(query: string, why: string): ModelProvisionError {
  return new ModelProvisionError(
    'INVALID_MODEL_REF',
    `invalid synthetic model parameters '${query}': ${why} (accepted: ${ORDER.join(', ')}; type=f32|f16, role=chat|embed, fim=0|1)`,
    { query },
  );
}

/**
 * Parses the query part of `synthetic:llama?…`. Unknown, repeated, malformed or out-of-range
 * parameters are `INVALID_MODEL_REF`; absent ones take their defaults.
 */
export function parseSyntheticParams(query: string): SyntheticLlamaParams {
  const params: SyntheticLlamaParams = { ...SYNTHETIC_LLAMA_DEFAULTS };
  const seen = new Set<string>();
  if (query !== '') {
    for (const pair of query.split('&')) {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw invalid(query, `'${pair}' is not name=value`);
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      if (!(ORDER as readonly string[]).includes(name)) throw invalid(query, `unknown parameter '${name}'`);
      if (seen.has(name)) throw invalid(query, `parameter '${name}' given twice`);
      seen.add(name);
      if (name === 'type') {
        if (value !== 'f32' && value !== 'f16') throw invalid(query, `type must be f32 or f16, got '${value}'`);
        params.type = value;
        continue;
      }
      if (name === 'role') {
        if (value !== 'chat' && value !== 'embed') throw invalid(query, `role must be chat or embed, got '${value}'`);
        params.role = value;
        continue;
      }
      if (name === 'fim') {
        if (value !== '0' && value !== '1') throw invalid(query, `fim must be 0 or 1, got '${value}'`);
        params.fim = value === '1';
        continue;
      }
      const key = name as Exclude<ParamName, 'type' | 'role' | 'fim'>;
      if (!/^\d{1,10}$/.test(value)) throw invalid(query, `${name} must be a non-negative integer, got '${value}'`);
      const n = Number(value);
      const [min, max] = INT_BOUNDS[key];
      if (n < min || n > max) throw invalid(query, `${name} must be in [${min}, ${max}], got ${n}`);
      params[key] = n;
    }
  }
  if (params.embd % params.heads !== 0)
    throw invalid(query, `embd (${params.embd}) must be a multiple of heads (${params.heads})`);
  // RoPE rotates pairs of dimensions, so llama.cpp needs an even head size.
  if ((params.embd / params.heads) % 2 !== 0)
    throw invalid(query, `head size embd/heads (${params.embd / params.heads}) must be even`);
  return params;
}

/** The canonical ref: every parameter spelled out in a fixed order, so equal models share one id. */
export function canonicalSyntheticRef(params: SyntheticLlamaParams): string {
  const parts = ORDER.filter((k) => !LATER.has(k) || params[k] !== SYNTHETIC_LLAMA_DEFAULTS[k]).map(
    (k) => `${k}=${k === 'fim' ? Number(params.fim) : params[k]}`,
  );
  return `synthetic:llama?${parts.join('&')}`;
}
