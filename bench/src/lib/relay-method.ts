import { EMBEDDING_METHOD } from './embedding-variants.js';

/**
 * The relay benchmark's method text (`pnpm bench relay`): what each variant sends, where, and how
 * each figure is computed. Kept apart from the run so the benchmark reads as its steps.
 */
export function relayMethod(o: { rounds: number; warmup: number; maxTokens: number; nginx: string }): string {
  const { rounds, warmup, maxTokens, nginx } = o;
  return (
    `${rounds} rounds (after ${warmup} warm-up rounds) of the same greedy ${maxTokens}-token generation on one llama-server ` +
    '(synthetic model, 1 slot, 1 thread), rotating which variant goes first: direct = POST <engine_url>/completion with the ' +
    'body the adapter sends ({prompt, n_predict, stream, cache_prompt:false, seed, temperature:0}); relay = POST /v2/tasks ' +
    '(determinism strict, same seed) then GET the SSE stream immediately after the 202, through orchestratord → pool-managerd; ' +
    'single-request /v2 stream = the same task POSTed with Accept: text/event-stream (the frames in the admission response); ' +
    'pool-managerd alone = its POST /v2/pools/{id}/completions (NDJSON), to split the added time between the hops; ' +
    `nginx = Debian's nginx (${nginx}, one worker each, proxy_buffering off) in the daemons' places: two hops = ` +
    'outer (keeps its connection to the inner hop) → inner (a new connection to the engine per request, like the adapter), ' +
    'one hop = the inner alone; the client keeps its connection to the first hop as it does to orchestratord. ' +
    'floor (diagnostic) = the same two places taken by two FIXTURE processes that only pass bytes through (node:http). ' +
    'Chat rows: the same prompt as one user message, streamed from /v1/chat/completions (temperature 0, same seed): ' +
    "chat direct = the engine's own chat route with the body the adapter sends it (prompt cache on, as the /v1 door asks), " +
    'chat through nginx = that request through the two nginx hops, chat relay = POST /v1/chat/completions on orchestratord; ' +
    'chat figures are added over chat direct. ' +
    "Messages and Responses rows (issue 27): the same prompt as one user message streamed (temperature 0) from the engine's own " +
    '/v1/messages and /v1/responses (direct) and through the doors (POST /v1/messages, /v1/responses on orchestratord: a chat ' +
    "task, encoded as that API's events by the door); token times are the arrival of text deltas, added over that API's direct. " +
    "Non-streamed rows (issue 28): the same prompt answered in one body (stream false) by the engine's OpenAI routes " +
    '(chat: /v1/chat/completions with the prompt as one user message; completion: /v1/completions), each with the body ' +
    'the adapter sends for a /v1 door request (temperature 0, same seed, prompt cache on): directly, through the two nginx ' +
    'hops, through two FIXTURE node:http pass-through processes that keep their connections at both hops (the floor of ' +
    'what two Node processes cost, as the daemons keep theirs for answers), and as the door request (POST ' +
    '/v1/chat/completions or /v1/completions on orchestratord, not streamed); latency = ' +
    "request send → whole body read, added = percentile − the direct percentile (paired: the median over rounds of the variant's latency − the direct latency of the same round); CPU per request = the processes' CPU time " +
    'metered around each request as above, ÷ requests. ' +
    EMBEDDING_METHOD +
    'TTFT = request send → arrival of the first token frame (relay: the clock starts before POST /v2/tasks, so admission, ' +
    'the SSE request and both hops count); inter-token = gaps between consecutive token frames at the client. ' +
    'Added = variant percentile − direct percentile; "over nginx" = relay added − two nginx hops added. Tokens/s = ' +
    '(frames − 1) / (last − first frame) per generation, ratio of medians. CPU per token = time on CPU of every thread ' +
    "(/proc/<pid>/task/*/schedstat, ns; nginx master + worker) of the variant's own processes, metered from just before each of its requests to the pause " +
    'after it (10 ms, 80 ms for pool-managerd alone), summed over its rounds, ÷ token frames the client received.'
  );
}
