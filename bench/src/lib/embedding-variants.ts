import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { UnexpectedResponseError } from '../errors.js';
import { answerAddedOver, AnswerVariant, timedPost, type TimedAnswer } from './answer-variants.js';
import type { PoolSpec } from './cluster.js';
import type { MeteredProcess } from './relay-variants.js';
import type { Figure } from './result.js';

/** The synthetic embedding model (non-causal, mean pooling) the embeddings rows run on, with `embeddings: true`. */
export const EMBED_MODEL = 'synthetic:llama?role=embed';
/** Inputs per request (issue 27: batches of 32). */
export const EMBED_BATCH = 32;

/** The embeddings rows' pool: their own, so the generation rows' engine is untouched. */
export const EMBED_POOL: PoolSpec = Object.freeze({ id: 'embed', model: EMBED_MODEL, embeddings: true, threads: 1 });

/** The embeddings rows' part of the relay benchmark's method text. */
export const EMBEDDING_METHOD =
  `Embeddings rows (issue 27): ${EMBED_MODEL} on its own pool (embeddings: true, 1 slot), ${EMBED_BATCH} short texts a request ` +
  "(encoding_format float), the engine's /v1/embeddings directly vs POST /v1/embeddings on orchestratord in the same " +
  'rotation; requests/s = requests ÷ the sum of their latencies (one client, one request at a time). ';

/** The two embeddings variants: the engine directly (no daemon metered) and the door (`daemons` metered). */
export function embeddingVariants(daemons: readonly MeteredProcess[]): {
  embed_direct: AnswerVariant;
  embed_door: AnswerVariant;
} {
  return { embed_direct: new AnswerVariant('embed_direct', []), embed_door: new AnswerVariant('embed_door', daemons) };
}

/** One round's request of an embeddings variant: the same 32 inputs to the engine (new connection, as direct rows do) or the door. */
export function embeddingAnswer(
  name: 'embed_direct' | 'embed_door',
  seed: number,
  at: { engineUrl: string; doorUrl: string; token: string },
  dispatcher: Dispatcher,
): Promise<TimedAnswer> {
  const input = embeddingInputs(seed);
  if (name === 'embed_direct')
    return embeddingRequest(at.engineUrl, { input, encoding_format: 'float' }, dispatcher, { reset: true });
  return embeddingRequest(at.doorUrl, { model: EMBED_MODEL, input, encoding_format: 'float' }, dispatcher, {
    token: at.token,
  });
}

const WORDS = [
  'rack',
  'fan',
  'cooling',
  'night',
  'shift',
  'cable',
  'switch',
  'power',
  'queue',
  'token',
  'slot',
  'node',
];

/** 32 short texts, different per seed (so no round is answered from a cache of the last). */
export function embeddingInputs(seed: number): string[] {
  return Array.from(
    { length: EMBED_BATCH },
    (_, k) => `${WORDS[(seed + k) % WORDS.length]} ${WORDS[(seed * 7 + k * 3) % WORDS.length]} ${seed}-${k}`,
  );
}

/**
 * One `POST <baseUrl>/v1/embeddings` (the engine itself, or orchestratord's door with `token`),
 * ended when the whole body was read. `text` is a digest of the vectors, so every path's answers
 * can be checked equal; `completionTokens` holds the prompt tokens (nothing is generated).
 */
export async function embeddingRequest(
  baseUrl: string,
  body: Record<string, unknown>,
  dispatcher: Dispatcher,
  opts: { token?: string; reset?: boolean } = {},
): Promise<TimedAnswer> {
  const { sentAt, endAt, text } = await timedPost(`${baseUrl}/v1/embeddings`, body, dispatcher, opts);
  const json = JSON.parse(text) as { data?: Array<{ embedding: number[] }>; usage?: { prompt_tokens?: number } };
  if (json.data?.length !== EMBED_BATCH)
    throw new UnexpectedResponseError(
      `POST ${baseUrl}/v1/embeddings answered ${json.data?.length ?? 0} vectors for ${EMBED_BATCH} inputs`,
    );
  const digest = createHash('sha256')
    .update(JSON.stringify(json.data.map((d) => d.embedding)))
    .digest('hex');
  return { sentAt, endAt, text: digest, completionTokens: json.usage?.prompt_tokens ?? 0 };
}

/** Requests per second one client gets, one request after another: requests ÷ the time they took. */
function requestsPerSecond(v: AnswerVariant): number {
  const total = v.answers.reduce((s, a) => s + (a.endAt - a.sentAt), 0);
  return total > 0 ? (v.answers.length * 1000) / total : 0;
}

/** Issue 27's embeddings rows: the door against the engine's own /v1/embeddings, 32 inputs a request. */
export function embeddingRows(door: AnswerVariant, direct: AnswerVariant): Record<string, Figure> {
  const added = answerAddedOver(door, direct);
  const cpu = door.cpuMsPerRequest();
  const doorRps = requestsPerSecond(door);
  const directRps = requestsPerSecond(direct);
  return {
    embed_door_rps: {
      label: `/v1/embeddings (${EMBED_BATCH} inputs a request) through the door: requests/s, one client`,
      value: doorRps,
      unit: 'req/s',
    },
    embed_direct_rps: {
      label: "the engine's own /v1/embeddings, the same requests: requests/s",
      value: directRps,
      unit: 'req/s',
    },
    embed_rps_ratio: { label: 'embeddings: door requests/s ÷ direct', value: doorRps / directRps, unit: '×' },
    embed_door_p99: { label: 'embeddings through the door: latency p99', value: door.latency().p99, unit: 'ms' },
    embed_direct_p99: { label: 'embeddings directly: latency p99', value: direct.latency().p99, unit: 'ms' },
    embed_added_p50: { label: 'embeddings through the door: added latency p50', value: added.p50, unit: 'ms' },
    embed_added_p99: { label: 'embeddings through the door: added latency p99', value: added.p99, unit: 'ms' },
    embed_cpu_ms: {
      label: 'embeddings through the door: CPU per request, both daemons',
      value: cpu.total as number,
      unit: 'ms',
    },
  };
}
