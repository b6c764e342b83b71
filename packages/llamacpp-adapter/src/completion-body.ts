import type { DispatchRequest } from '@llama-orch/contracts';

/**
 * Sampling temperature sent when a request is not greedy and names none: llama-server's own
 * default (`--temp 0.8`), written out so a body means the same on any engine configuration.
 */
export const DEFAULT_TEMPERATURE = 0.8;

/** The fields of a dispatch that shape the engine request. */
export type CompletionInput = Pick<DispatchRequest, 'prompt' | 'max_tokens'> &
  Partial<Pick<DispatchRequest, 'seed' | 'greedy' | 'temperature'>>;

/** Body of llama-server's native `POST /completion`, exactly as this adapter sends it. */
export interface CompletionBody {
  prompt: string;
  n_predict: number;
  stream: true;
  cache_prompt: false;
  seed?: number;
  temperature: number;
}

/**
 * Maps a dispatch to the `/completion` body. Key order and values are part of the contract
 * (`.specs/40-llamacpp-adapter.md`): the e2e suite sends the identical body straight to the engine
 * and compares bytes.
 *
 * - `cache_prompt: false`: upstream's determinism tests pin it (reference §6); a cached prefix can
 *   change logits of the first generated token.
 * - `seed` only when given; absent means the engine's default (random unless `--seed`).
 * - `greedy` wins over `temperature` (temperature 0 is greedy in llama.cpp).
 */
export function toCompletionBody(req: CompletionInput): CompletionBody {
  return {
    prompt: req.prompt,
    n_predict: req.max_tokens,
    stream: true,
    cache_prompt: false,
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    temperature: req.greedy === true ? 0 : (req.temperature ?? DEFAULT_TEMPERATURE),
  };
}
