import { z } from 'zod';

/**
 * Wire shapes of the engine-route doors (issue 27): `POST /v1/embeddings` (OpenAI's shape),
 * `POST /v1/rerank` and `/rerank` (llama-server's shape), `POST /infill` (llama.cpp's shape).
 * Requests are checked at the door; what passes is forwarded to the engine as it came (the
 * engine reads its own optional fields), so these schemas are loose where the engine is.
 */

const TokenIds = z.array(z.int().min(0)).min(1).max(1_000_000);

/** `POST /v1/embeddings`. `dimensions` is refused with 400 (the engine returns the model's full width, never a shortened one). */
export const EmbeddingsRequestSchema = z
  .looseObject({
    /** Model name, alias or ref, as for chat. */
    model: z.string().min(1).max(512),
    /** One text, several texts, one token array or several token arrays (at most 2048 inputs, as OpenAI). */
    input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(2048), TokenIds, z.array(TokenIds).min(1).max(2048)]),
    /** `float` (default) or `base64` (little-endian float32 bytes). */
    encoding_format: z.enum(['float', 'base64']).optional(),
    /** Accepted and ignored (no session state for embeddings). */
    user: z.string().max(256).optional(),
  })
  .meta({ id: 'EmbeddingsRequest' });
export type EmbeddingsRequest = z.infer<typeof EmbeddingsRequestSchema>;

/** `POST /v1/embeddings` 200 (the engine's body with the door's `model`). */
export const EmbeddingsResponseSchema = z
  .looseObject({
    object: z.literal('list'),
    model: z.string(),
    data: z.array(z.looseObject({ object: z.literal('embedding'), index: z.int(), embedding: z.union([z.array(z.number()), z.string()]) })),
    usage: z.looseObject({ prompt_tokens: z.int(), total_tokens: z.int() }),
  })
  .meta({ id: 'EmbeddingsResponse' });

/** `POST /v1/rerank` (and `/rerank`): llama-server's (Jina's) shape; TEI's `texts` is accepted too. */
export const RerankRequestSchema = z
  .looseObject({
    model: z.string().min(1).max(512),
    query: z.string().min(1),
    /** The documents to score (or `texts`, TEI's name). */
    documents: z.array(z.string()).min(1).max(1024).optional(),
    texts: z.array(z.string()).min(1).max(1024).optional(),
    /** Keep the best N. @default all */
    top_n: z.int().min(1).optional(),
    /** Echo each document's text in its result. */
    return_text: z.boolean().optional(),
  })
  .refine((r) => (r.documents === undefined) !== (r.texts === undefined), { message: 'exactly one of documents or texts is required', path: ['documents'] })
  .meta({ id: 'RerankRequest' });
export type RerankRequest = z.infer<typeof RerankRequestSchema>;

/** `POST /v1/rerank` 200. */
export const RerankResponseSchema = z
  .looseObject({
    model: z.string(),
    object: z.literal('list'),
    usage: z.looseObject({ prompt_tokens: z.int(), total_tokens: z.int() }),
    results: z.array(z.looseObject({ index: z.int(), relevance_score: z.number() })),
  })
  .meta({ id: 'RerankResponse' });

/** `POST /infill`: llama.cpp's fill-in-the-middle request (the `/completion` sampling fields are forwarded as they are). */
export const InfillRequestSchema = z
  .looseObject({
    /** Model name; optional as on llama-server (editor plugins send none) where one model serves infill. */
    model: z.string().min(1).max(512).optional(),
    input_prefix: z.string(),
    input_suffix: z.string(),
    /** Extra context chunks (other files). */
    input_extra: z.array(z.looseObject({ text: z.string(), filename: z.string().optional() })).max(1024).optional(),
    /** Text right before the cursor, after the prefix. */
    prompt: z.string().optional(),
    /** Tokens to generate. @default the engine's (-1: until stop) capped by the task limit */
    n_predict: z.int().min(-1).optional(),
    /** SSE as llama-server streams `/infill`. */
    stream: z.boolean().optional(),
    seed: z.int().min(0).max(0xffff_ffff).optional(),
    temperature: z.number().min(0).max(5).optional(),
  })
  .meta({ id: 'InfillRequest' });
export type InfillRequest = z.infer<typeof InfillRequestSchema>;

/** `POST /infill` 200 (not streamed) and each streamed `data:` chunk. */
export const InfillResponseSchema = z
  .looseObject({
    content: z.string(),
    stop: z.boolean(),
    tokens_predicted: z.int().optional(),
    tokens_evaluated: z.int().optional(),
  })
  .meta({ id: 'InfillResponse' });
