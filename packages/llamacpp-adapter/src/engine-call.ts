import { ENGINE_CALL_ROUTES, type EngineCall } from '@llama-orch/contracts';
import type { AnswerFigures, EngineAnswer } from './answer.js';
import { EngineProtocolError } from './errors.js';

/**
 * The engine routes besides generation (issue 27): `/v1/embeddings`, `/v1/rerank`, `/infill`. The
 * door's body goes to the engine as it came; the answer comes back as it is with the figures the
 * dispatch's `result` event carries, read from the members each route has.
 */

type Loose = Record<string, unknown>;

const isRecord = (v: unknown): v is Loose => typeof v === 'object' && v !== null && !Array.isArray(v);
const count = (v: unknown): number | undefined =>
  Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : undefined;

/**
 * The figures of an engine-call answer, or undefined for a body that is not one: embeddings and
 * rerank answers have `usage.prompt_tokens` and generate nothing; an infill answer is `/completion`'s
 * (`content`, `tokens_predicted`, `tokens_evaluated`, `stop_type`, `timings`).
 */
export function callFigures(kind: EngineCall['kind'], json: unknown): AnswerFigures | undefined {
  if (!isRecord(json) || 'error' in json) return undefined;
  if (kind === 'embeddings' || kind === 'rerank') {
    const list = kind === 'embeddings' ? json.data : json.results;
    const prompt = isRecord(json.usage) ? count(json.usage.prompt_tokens) : undefined;
    if (!Array.isArray(list) || prompt === undefined) return undefined;
    return { tokens_out: 0, decode_ms: 0, stop_type: 'eos', finish_reason: 'stop', prompt_tokens: prompt };
  }
  if (typeof json.content !== 'string') return undefined;
  const out = count(json.tokens_predicted);
  const prompt = count(json.tokens_evaluated);
  if (out === undefined || prompt === undefined) return undefined;
  const timings = isRecord(json.timings) ? json.timings : undefined;
  const decode = typeof timings?.predicted_ms === 'number' && timings.predicted_ms >= 0 ? timings.predicted_ms : 0;
  const limit = json.stop_type === 'limit';
  const figures: AnswerFigures = {
    tokens_out: out,
    decode_ms: decode,
    stop_type: limit ? 'limit' : 'eos',
    finish_reason: limit ? 'length' : 'stop',
    prompt_tokens: prompt,
  };
  const cached = count(json.tokens_cached) ?? count(timings?.cache_n);
  if (cached !== undefined) figures.cached_tokens = cached;
  return figures;
}

/** The engine path and body of a call; an infill answer is asked for unstreamed here (`stream` is the dispatch's business). */
export function callRequestOf(call: EngineCall): { path: string; body: Loose } {
  return {
    path: ENGINE_CALL_ROUTES[call.kind],
    body: call.kind === 'infill' ? { ...call.body, stream: false } : call.body,
  };
}

/** Reads a call's answer body; throws {@link EngineProtocolError} for one of another shape. */
export function readCallAnswer(kind: EngineCall['kind'], text: string, url: string): EngineAnswer {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new EngineProtocolError(
      `llama-server answered ${ENGINE_CALL_ROUTES[kind]} with a body that is not JSON`,
      { url, body: text.slice(0, 200) },
      { cause: err },
    );
  }
  const figures = callFigures(kind, json);
  if (figures === undefined)
    throw new EngineProtocolError(`llama-server answered ${ENGINE_CALL_ROUTES[kind]} with a body of unknown shape`, {
      url,
      body: text.slice(0, 200),
    });
  return { text, body: json as Loose, figures };
}
