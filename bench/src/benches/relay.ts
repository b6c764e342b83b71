import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { startOtlpReceiver } from '@llama-orch/daemon-support/otlp-receiver';
import { BenchError } from '../errors.js';
import {
  COLD_START_TIMEOUT_MS,
  SYNTHETIC_MODEL,
  newToken,
  poolStatus,
  startOrchestratord,
  startPoolManagerd,
  waitNodeIdle,
  waitPoolsReady,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { relayMethod } from '../lib/relay-method.js';
import { answerAddedOver, answerGeneration, AnswerVariant, engineAnswerBody } from '../lib/answer-variants.js';
import { EMBED_POOL, embeddingAnswer, embeddingRows, embeddingVariants } from '../lib/embedding-variants.js';
import { startPassthroughProxy } from '../lib/fixture.js';
import { ensureNginx, nginxVersion, startNginxHop, type NginxHop } from '../lib/nginx.js';
import { cpuSeconds } from '../lib/proc.js';
import { doorBody, doorGeneration, doorStreamRows } from '../lib/door-variants.js';
import {
  addedOver,
  chatGeneration,
  doorChatBody,
  engineChatBody,
  RelayVariant,
  singleRequestGeneration,
  type MeteredProcess,
} from '../lib/relay-variants.js';
import type { BenchOutcome, Figure } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';
import {
  directBody,
  directGeneration,
  poolManagerdGeneration,
  relayGeneration,
  type TimedGeneration,
} from '../lib/streams.js';

function metered(name: string, pid: number): MeteredProcess {
  return { name, cpuSeconds: () => cpuSeconds(pid) };
}

const PROMPT = 'Once upon a time, in a data centre far away,';

/** CPU per task of a variant's generations (every one `maxTokens` long), both daemons, ms. */
function cpuMsPerTask(v: RelayVariant): number {
  return ((v.cpuUsPerToken().total as number) * v.tokens) / v.generations.length / 1000;
}

/**
 * Issue 43: what tracing at 100 % costs, the traced pair against its untraced twin in the same rounds
 * (`relay`, the main pair, is only the spread: the same untraced code at another duty cycle).
 */
function tracingCost(
  twin: RelayVariant,
  traced: RelayVariant,
  chatTwin: RelayVariant,
  chatTraced: RelayVariant,
  main: RelayVariant,
) {
  const ratio = (on: RelayVariant, off: RelayVariant) =>
    (on.cpuUsPerToken().total as number) / (off.cpuUsPerToken().total as number);
  const relay = twin;
  const chat = chatTwin;
  return {
    twin_cpu_us_per_token: {
      label: 'tracing off (the traced pair’s twin): /v2 relay CPU per token, both daemons',
      value: twin.cpuUsPerToken().total as number,
      unit: 'µs',
    },
    twin_vs_main_cpu_ratio: {
      label: 'tracing off, two pairs of the same code (twin ÷ main pair): the spread of the comparison',
      value: ratio(twin, main),
      unit: '×',
    },
    traced_cpu_us_per_token: {
      label: 'traced (100 %): /v2 relay CPU per token, both daemons',
      value: traced.cpuUsPerToken().total as number,
      unit: 'µs',
    },
    trace_cpu_per_token_ratio: {
      label: 'tracing on ÷ off: /v2 relay CPU per token',
      value: ratio(traced, relay),
      unit: '×',
    },
    trace_cpu_ms_per_task_added: {
      label: 'tracing on − off: /v2 relay CPU per task (128 tokens), both daemons',
      value: cpuMsPerTask(traced) - cpuMsPerTask(relay),
      unit: 'ms',
    },
    chat_trace_cpu_per_token_ratio: {
      label: 'tracing on ÷ off: /v1 chat stream CPU per token',
      value: ratio(chatTraced, chat),
      unit: '×',
    },
    chat_trace_cpu_ms_per_task_added: {
      label: 'tracing on − off: /v1 chat stream CPU per task (128 tokens), both daemons',
      value: cpuMsPerTask(chatTraced) - cpuMsPerTask(chat),
      unit: 'ms',
    },
  };
}

/**
 * Issue 18's five comparisons of a relayed variant with two nginx hops, each added over the same
 * direct variant: keys `ttft_p50_over_nginx` … (prefixed `chat_` etc. for another door).
 */
function againstNginx(
  door: '' | 'chat',
  relay: RelayVariant,
  nginx: RelayVariant,
  direct: RelayVariant,
): Record<string, Figure> {
  const key = door === '' ? '' : `${door}_`;
  const label = door === '' ? '' : '/v1 chat: ';
  const r = addedOver(relay, direct);
  const n = addedOver(nginx, direct);
  return {
    [`${key}ttft_p50_over_nginx`]: {
      label: `${label}relay − two nginx hops: added TTFT p50`,
      value: r.ttftP50 - n.ttftP50,
      unit: 'ms',
    },
    [`${key}ttft_p99_over_nginx`]: {
      label: `${label}relay − two nginx hops: added TTFT p99`,
      value: r.ttftP99 - n.ttftP99,
      unit: 'ms',
    },
    [`${key}itl_p99_over_nginx`]: {
      label: `${label}relay − two nginx hops: added inter-token p99`,
      value: r.itlP99 - n.itlP99,
      unit: 'ms',
    },
    [`${key}tps_vs_nginx`]: {
      label: `${label}relay tokens/s ÷ two nginx hops' (median)`,
      value: relay.rate().p50 / nginx.rate().p50,
      unit: '×',
    },
    [`${key}cpu_vs_nginx`]: {
      label: `${label}relay CPU per token ÷ two nginx hops'`,
      value: (relay.cpuUsPerToken().total as number) / (nginx.cpuUsPerToken().total as number),
      unit: '×',
    },
  };
}

/**
 * Issue 28's rows for one kind of non-streamed request (`chat`, `cmpl`): the door, two nginx hops
 * and two bare node:http hops (the floor), each added over the engine answering the same request
 * directly, and CPU per request.
 */
function answerRows(
  kind: 'chat' | 'cmpl',
  door: AnswerVariant,
  nginx: AnswerVariant,
  floor: AnswerVariant,
  direct: AnswerVariant,
): Record<string, Figure> {
  const noun = kind === 'chat' ? 'chat' : 'completion';
  const d = answerAddedOver(door, direct);
  const n = answerAddedOver(nginx, direct);
  const f = answerAddedOver(floor, direct);
  const cpu = door.cpuMsPerRequest();
  const floorCpu = floor.cpuMsPerRequest().total as number;
  return {
    [`answer_${kind}_added_p50`]: {
      label: `non-streamed /v1 ${noun} (128 tokens) through the door: added latency p50 over the engine answering directly`,
      value: d.p50,
      unit: 'ms',
    },
    [`answer_${kind}_added_p99`]: {
      label: `non-streamed /v1 ${noun} through the door: added latency p99`,
      value: d.p99,
      unit: 'ms',
    },
    [`answer_${kind}_added_paired_p50`]: {
      label: `non-streamed /v1 ${noun} through the door: median of the per-round added latency (door − engine in the same round)`,
      value: d.pairedP50,
      unit: 'ms',
    },
    [`answer_${kind}_cpu_ms`]: {
      label: `non-streamed /v1 ${noun} through the door: CPU per request, both daemons`,
      value: cpu.total as number,
      unit: 'ms',
    },
    [`answer_${kind}_cpu_ms_orchestratord`]: {
      label: 'of which orchestratord',
      value: cpu.orchestratord as number,
      unit: 'ms',
    },
    [`answer_${kind}_cpu_ms_pool_managerd`]: {
      label: 'of which pool-managerd',
      value: cpu.pool_managerd as number,
      unit: 'ms',
    },
    [`answer_${kind}_nginx2_added_p50`]: {
      label: `non-streamed ${noun} through two nginx hops: added latency p50`,
      value: n.p50,
      unit: 'ms',
    },
    [`answer_${kind}_nginx2_added_p99`]: {
      label: `non-streamed ${noun} through two nginx hops: added latency p99`,
      value: n.p99,
      unit: 'ms',
    },
    [`answer_${kind}_nginx2_added_paired_p50`]: {
      label: `non-streamed ${noun} through two nginx hops: median of the per-round added latency`,
      value: n.pairedP50,
      unit: 'ms',
    },
    [`answer_${kind}_nginx2_cpu_ms`]: {
      label: `non-streamed ${noun} through two nginx hops: CPU per request (both)`,
      value: nginx.cpuMsPerRequest().total as number,
      unit: 'ms',
    },
    [`answer_${kind}_floor_added_p50`]: {
      label: `non-streamed ${noun} through two bare node:http hops (FIXTURE floor): added latency p50`,
      value: f.p50,
      unit: 'ms',
    },
    [`answer_${kind}_floor_added_paired_p50`]: {
      label: `non-streamed ${noun} through two bare node:http hops: median of the per-round added latency`,
      value: f.pairedP50,
      unit: 'ms',
    },
    [`answer_${kind}_floor_cpu_ms`]: {
      label: `non-streamed ${noun} through two bare node:http hops: CPU per request (both)`,
      value: floorCpu,
      unit: 'ms',
    },
    [`answer_${kind}_cpu_vs_floor`]: {
      label: `non-streamed ${noun}: the door's CPU per request ÷ the two bare node:http hops'`,
      value: (cpu.total as number) / floorCpu,
      unit: '×',
    },
  };
}

export const relayBench: Bench = {
  name: 'relay',
  title: 'Relay overhead (real llama-server)',
  targets: [
    // Issue 18: the relay against two nginx hops in the same run.
    { figure: 'ttft_p50_over_nginx', op: '<=', value: 1, unit: 'ms' },
    { figure: 'ttft_p99_over_nginx', op: '<=', value: 3, unit: 'ms' },
    { figure: 'itl_p99_over_nginx', op: '<=', value: 0.3, unit: 'ms' },
    { figure: 'tps_vs_nginx', op: '>=', value: 0.99, unit: '×' },
    { figure: 'cpu_vs_nginx', op: '<=', value: 2, unit: '×' },
    // The same targets for /v1/chat/completions streaming (against nginx relaying the engine's own chat stream).
    { figure: 'chat_ttft_p50_over_nginx', op: '<=', value: 1, unit: 'ms' },
    { figure: 'chat_ttft_p99_over_nginx', op: '<=', value: 3, unit: 'ms' },
    { figure: 'chat_itl_p99_over_nginx', op: '<=', value: 0.3, unit: 'ms' },
    { figure: 'chat_tps_vs_nginx', op: '>=', value: 0.99, unit: '×' },
    { figure: 'chat_cpu_vs_nginx', op: '<=', value: 2, unit: '×' },
    // Issue 28: a non-streamed 128-token chat through the door against the engine answering it directly.
    { figure: 'answer_chat_added_p50', op: '<=', value: 2, unit: 'ms' },
    { figure: 'answer_chat_cpu_ms', op: '<=', value: 2, unit: 'ms' },
    // Earlier absolute targets (against the direct engine).
    { figure: 'ttft_added_p50', op: '<=', value: 1, unit: 'ms' },
    { figure: 'ttft_added_p99', op: '<=', value: 5, unit: 'ms' },
    { figure: 'itl_added_p99', op: '<=', value: 0.5, unit: 'ms' },
    { figure: 'tps_ratio', op: '>=', value: 0.99, unit: '×' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const dir = ctx.dir;
    const nginxBin = ensureNginx(ctx.log);
    const token = newToken();
    const heartbeatMs = 1000;
    const orch = await startOrchestratord({
      paths: ctx.paths,
      dir,
      token,
      heartbeatMs,
      nodeFlags: profFlags(ctx, 'relay-orchestratord'),
    });
    const pm = await startPoolManagerd({
      paths: ctx.paths,
      dir,
      nodeId: 'relay-node',
      token,
      orchestratorUrl: orch.url,
      heartbeatMs,
      pools: [{ id: 'relay', slots: 1, determinism: true, threads: 1 }, EMBED_POOL],
      nodeFlags: profFlags(ctx, 'relay-pool-managerd'),
    });
    // Tracing's cost (issue 43): a pair of daemons exporting every span (the default sampler keeps
    // every root: 100 %) to an OTLP/HTTP receiver in this process (a FIXTURE collector), and its
    // untraced twin, each with its own one-slot engine. Both serve two variants of the run, so they
    // sit idle alike between their requests (a daemon serving every variant stays warmer): the twin,
    // not the main pair, is what tracing is compared with.
    const receiver = await startOtlpReceiver();
    const pairOf = async (name: string, env: Readonly<Record<string, string>>) => {
      // its own name: its own log file, where its URL is read from
      const o = await startOrchestratord({
        paths: ctx.paths,
        dir,
        token,
        heartbeatMs,
        env,
        name: `orchestratord-${name}`,
      });
      const p = await startPoolManagerd({
        paths: ctx.paths,
        dir,
        nodeId: `${name}-node`,
        token,
        orchestratorUrl: o.url,
        heartbeatMs,
        pools: [{ id: name, slots: 1, determinism: true, threads: 1 }],
        env,
      });
      return { orch: o, pm: p };
    };
    const tracedPair = await pairOf('traced', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    const twinPair = await pairOf('twin', {});
    const orchT = tracedPair.orch;
    const pmT = tracedPair.pm;
    const proxies: FileLoggedDaemon[] = [];
    const hops: NginxHop[] = [];
    try {
      ctx.log('relay: waiting for the pool (a cold cache builds llama-server first)');
      await waitPoolsReady(orch.url, token, ['relay', 'embed'], [orch, pm.daemon], COLD_START_TIMEOUT_MS);
      await waitPoolsReady(orchT.url, token, ['traced'], [orchT, pmT.daemon], COLD_START_TIMEOUT_MS);
      await waitPoolsReady(
        twinPair.orch.url,
        token,
        ['twin'],
        [twinPair.orch, twinPair.pm.daemon],
        COLD_START_TIMEOUT_MS,
      );
      if (new Set([orch.url, orchT.url, twinPair.orch.url]).size !== 3)
        throw new BenchError('two orchestratords report one URL');
      const engineUrl = (await poolStatus(pm, 'relay', token))?.engine_url;
      const embedUrl = (await poolStatus(pm, 'embed', token))?.engine_url;
      if (engineUrl === undefined || embedUrl === undefined)
        throw new BenchError('pool-managerd reports no engine_url for a ready pool');
      await waitNodeIdle(orch.url, token, 'relay-node', 10_000);
      // The peer: nginx in the daemons' two places. The inner hop opens a connection to the engine
      // per request (like pool-managerd's adapter), the outer keeps its connection to the inner hop
      // (like orchestratord to pool-managerd); the one-hop variant is the inner hop alone.
      const nginxInner = await startNginxHop(nginxBin, dir, 'inner', engineUrl, 'close');
      hops.push(nginxInner);
      const nginxOuter = await startNginxHop(nginxBin, dir, 'outer', nginxInner.url, 'keepalive');
      hops.push(nginxOuter);
      // Diagnostic floor: two bare node:http pass-through processes (FIXTURES) in the same places.
      const floorInner = await startPassthroughProxy(ctx.paths, dir, 'inner', engineUrl, 'close');
      proxies.push(floorInner);
      const floorOuter = await startPassthroughProxy(ctx.paths, dir, 'outer', floorInner.url, 'keepalive');
      proxies.push(floorOuter);
      // The floor of the non-streamed rows keeps its connections at both hops, as the daemons do for answers.
      const answerFloorInner = await startPassthroughProxy(ctx.paths, dir, 'answer-inner', engineUrl, 'keepalive');
      proxies.push(answerFloorInner);
      const answerFloorOuter = await startPassthroughProxy(
        ctx.paths,
        dir,
        'answer-outer',
        answerFloorInner.url,
        'keepalive',
      );
      proxies.push(answerFloorOuter);
      const mFloorAnswer = [metered('floor_outer', answerFloorOuter.pid), metered('floor_inner', answerFloorInner.pid)];

      const mOrch = metered('orchestratord', orch.pid);
      const mPm = metered('pool_managerd', pm.daemon.pid);
      const mTraced = [metered('orchestratord', orchT.pid), metered('pool_managerd', pmT.daemon.pid)];
      const mTwin = [metered('orchestratord', twinPair.orch.pid), metered('pool_managerd', twinPair.pm.daemon.pid)];
      const mInner: MeteredProcess = { name: 'nginx_inner', cpuSeconds: () => nginxInner.cpuSeconds() };
      const mOuter: MeteredProcess = { name: 'nginx_outer', cpuSeconds: () => nginxOuter.cpuSeconds() };
      const v = {
        direct: new RelayVariant('direct', []),
        relay: new RelayVariant('relay', [mOrch, mPm]),
        single: new RelayVariant('single', [mOrch, mPm]),
        pool: new RelayVariant('pool', [mPm]),
        nginx1: new RelayVariant('nginx1', [mInner]),
        nginx2: new RelayVariant('nginx2', [mOuter, mInner]),
        floor: new RelayVariant('floor', [
          metered('floor_outer', floorOuter.pid),
          metered('floor_inner', floorInner.pid),
        ]),
        // /v1/chat/completions streaming: the engine's chat route directly, through two nginx hops, through the daemons.
        chat_direct: new RelayVariant('chat_direct', []),
        chat_nginx2: new RelayVariant('chat_nginx2', [mOuter, mInner]),
        chat_relay: new RelayVariant('chat_relay', [mOrch, mPm]),
        // Issue 27: the Anthropic Messages and OpenAI Responses streams, the engine's own route directly and through the doors.
        msg_direct: new RelayVariant('msg_direct', []),
        msg_relay: new RelayVariant('msg_relay', [mOrch, mPm]),
        resp_direct: new RelayVariant('resp_direct', []),
        resp_relay: new RelayVariant('resp_relay', [mOrch, mPm]),
        // The /v2 relay and the /v1 chat stream through the traced pair.
        traced: new RelayVariant('traced', mTraced),
        chat_traced: new RelayVariant('chat_traced', mTraced),
        twin: new RelayVariant('twin', mTwin),
        chat_twin: new RelayVariant('chat_twin', mTwin),
      };
      type Name = keyof typeof v;
      const names = Object.keys(v) as Name[];
      // Non-streamed answers (issue 28): the engine's OpenAI routes with stream false, directly, through
      // the two nginx hops, and through the /v1 door (orchestratord → pool-managerd).
      const av = {
        answer_chat_direct: new AnswerVariant('answer_chat_direct', []),
        answer_chat_nginx2: new AnswerVariant('answer_chat_nginx2', [mOuter, mInner]),
        answer_chat_door: new AnswerVariant('answer_chat_door', [mOrch, mPm]),
        answer_chat_floor: new AnswerVariant('answer_chat_floor', mFloorAnswer),
        answer_cmpl_direct: new AnswerVariant('answer_cmpl_direct', []),
        answer_cmpl_nginx2: new AnswerVariant('answer_cmpl_nginx2', [mOuter, mInner]),
        answer_cmpl_door: new AnswerVariant('answer_cmpl_door', [mOrch, mPm]),
        answer_cmpl_floor: new AnswerVariant('answer_cmpl_floor', mFloorAnswer),
        ...embeddingVariants([mOrch, mPm]),
      };
      type AnswerName = keyof typeof av;
      const answerNames = Object.keys(av) as AnswerName[];
      const isAnswer = (n: string): n is AnswerName => n in av;
      const allNames: Array<Name | AnswerName> = [...names, ...answerNames];

      const agent = new Agent({ connections: 4, keepAliveTimeout: 30_000 });
      const maxTokens = 128;
      const warmup = ctx.quick ? 3 : 10;
      const rounds = ctx.quick ? 20 : 200;
      const task = {
        orchUrl: orch.url,
        token,
        model: SYNTHETIC_MODEL,
        prompt: PROMPT,
        maxTokens,
        determinism: 'strict' as const,
      };
      const pairUrl = (name: string): string => (name.endsWith('traced') ? orchT.url : twinPair.orch.url);
      const generate = (name: Name, seed: number): Promise<TimedGeneration> => {
        const body = directBody(PROMPT, maxTokens, seed);
        const chatBody = engineChatBody(PROMPT, maxTokens, seed);
        switch (name) {
          case 'direct':
            return directGeneration(engineUrl, body, agent);
          case 'nginx1':
            return directGeneration(nginxInner.url, body, agent, undefined, false);
          case 'nginx2':
            return directGeneration(nginxOuter.url, body, agent, undefined, false);
          case 'floor':
            return directGeneration(floorOuter.url, body, agent, undefined, false);
          case 'pool':
            return poolManagerdGeneration(
              pm.daemon.url,
              'relay',
              token,
              { prompt: PROMPT, max_tokens: maxTokens, seed },
              agent,
            );
          case 'relay':
            return relayGeneration({ ...task, seed }, agent);
          case 'single':
            return singleRequestGeneration({ ...task, seed }, agent);
          case 'chat_direct':
            return chatGeneration(engineUrl, chatBody, agent, { reset: true });
          case 'chat_nginx2':
            return chatGeneration(nginxOuter.url, chatBody, agent);
          case 'chat_relay':
            return chatGeneration(orch.url, doorChatBody(SYNTHETIC_MODEL, PROMPT, maxTokens, seed), agent, { token });
          case 'traced':
          case 'twin':
            return relayGeneration({ ...task, orchUrl: pairUrl(name), seed }, agent);
          case 'chat_traced':
          case 'chat_twin':
            return chatGeneration(pairUrl(name), doorChatBody(SYNTHETIC_MODEL, PROMPT, maxTokens, seed), agent, {
              token,
            });
          case 'msg_direct':
            return doorGeneration('messages', engineUrl, doorBody('messages', PROMPT, maxTokens), agent, {
              reset: true,
            });
          case 'msg_relay':
            return doorGeneration(
              'messages',
              orch.url,
              { model: SYNTHETIC_MODEL, ...doorBody('messages', PROMPT, maxTokens) },
              agent,
              { token },
            );
          case 'resp_direct':
            return doorGeneration('responses', engineUrl, doorBody('responses', PROMPT, maxTokens), agent, {
              reset: true,
            });
          case 'resp_relay':
            return doorGeneration(
              'responses',
              orch.url,
              { model: SYNTHETIC_MODEL, ...doorBody('responses', PROMPT, maxTokens) },
              agent,
              { token },
            );
        }
      };
      const answer = (name: AnswerName, seed: number) => {
        if (name === 'embed_direct' || name === 'embed_door')
          return embeddingAnswer(name, seed, { engineUrl: embedUrl, doorUrl: orch.url, token }, agent);
        const kind = name.startsWith('answer_chat') ? ('chat' as const) : ('completion' as const);
        const engineBody = engineAnswerBody(kind, PROMPT, maxTokens, seed);
        if (name.endsWith('_direct')) return answerGeneration(engineUrl, kind, engineBody, agent, { reset: true });
        if (name.endsWith('_nginx2')) return answerGeneration(nginxOuter.url, kind, engineBody, agent);
        if (name.endsWith('_floor')) return answerGeneration(answerFloorOuter.url, kind, engineBody, agent);
        const door =
          kind === 'chat'
            ? { model: SYNTHETIC_MODEL, messages: engineBody.messages, max_tokens: maxTokens, seed, temperature: 0 }
            : { model: SYNTHETIC_MODEL, prompt: PROMPT, max_tokens: maxTokens, seed, temperature: 0 };
        return answerGeneration(orch.url, kind, door, agent, { token });
      };
      let mismatches = 0;
      ctx.log(
        `relay: ${warmup} warm-up + ${rounds} interleaved rounds of ${maxTokens}-token generations (${allNames.join(', ')}); ${nginxVersion(nginxBin)}`,
      );
      for (let i = 0; i < warmup + rounds; i++) {
        const seed = 1000 + i;
        const counted = i >= warmup;
        // Rotate which variant goes first so none always follows another's engine work.
        const order = allNames.map((_, k) => allNames[(i + k) % allNames.length] as Name | AnswerName);
        const texts: string[] = [];
        const chatTexts: string[] = [];
        const cmplTexts: string[] = [];
        const embedTexts: string[] = [];
        for (const name of order) {
          if (isAnswer(name)) {
            const variant = av[name];
            variant.meterStart();
            const a = await answer(name, seed);
            await sleep(10);
            variant.meterStop(counted);
            await waitNodeIdle(orch.url, token, 'relay-node', 10_000);
            if (counted) variant.answers.push(a);
            (name.startsWith('embed_') ? embedTexts : name.startsWith('answer_chat') ? chatTexts : cmplTexts).push(
              a.text,
            );
            continue;
          }
          const variant = v[name];
          variant.meterStart();
          const g = await generate(name, seed);
          // The engine frees its slot just after the last event; the next request must not queue behind it.
          // A dispatch sent to pool-managerd directly holds a lease orchestratord does not know about:
          // its debounced (50 ms) heartbeats report the slot busy, then free again; wait for the latter.
          await sleep(name === 'pool' ? 80 : 10);
          variant.meterStop(counted);
          if (name.endsWith('traced') || name.endsWith('twin'))
            await waitNodeIdle(pairUrl(name), token, `${name.replace('chat_', '')}-node`, 10_000);
          else await waitNodeIdle(orch.url, token, 'relay-node', 10_000);
          if (counted) variant.generations.push(g);
          // Every chat-rendered door (chat, messages, responses) generates the same greedy text.
          (name.startsWith('chat_') || name.startsWith('msg_') || name.startsWith('resp_') ? chatTexts : texts).push(
            g.text,
          );
        }
        if (counted && [texts, chatTexts, cmplTexts, embedTexts].some((group) => group.some((t) => t !== group[0])))
          mismatches += 1;
      }
      await agent.close();

      const relay = addedOver(v.relay, v.direct);
      const single = addedOver(v.single, v.direct);
      const ngx2 = addedOver(v.nginx2, v.direct);
      const ngx1 = addedOver(v.nginx1, v.direct);
      const pool = addedOver(v.pool, v.direct);
      const floor = addedOver(v.floor, v.direct);
      const cpuRelay = v.relay.cpuUsPerToken();
      const cpuNginx2 = v.nginx2.cpuUsPerToken();
      const cpuPool = v.pool.cpuUsPerToken();
      const cpuFloor = v.floor.cpuUsPerToken();
      const chatRelay = addedOver(v.chat_relay, v.chat_direct);
      const chatNgx2 = addedOver(v.chat_nginx2, v.chat_direct);
      const cpuChatRelay = v.chat_relay.cpuUsPerToken();
      const cpuChatNginx2 = v.chat_nginx2.cpuUsPerToken();
      // The streamed /v1 chat of the same generation, per request: what a non-streamed request would
      // cost generated as a stream and assembled at the end.
      const streamedChatCpuMs =
        ((cpuChatRelay.total as number) * v.chat_relay.tokens) / v.chat_relay.generations.length / 1000;
      if (receiver.spans().length === 0) throw new BenchError('the traced daemons exported no span: they ran untraced');
      const traced = tracingCost(v.twin, v.traced, v.chat_twin, v.chat_traced, v.relay);
      const pairedTtft = summarize(
        v.relay.generations.map((r, k) => {
          const d = v.direct.generations[k] as TimedGeneration;
          return (r.tokenAt[0] as number) - r.sentAt - ((d.tokenAt[0] as number) - d.sentAt);
        }),
      );
      const ms = 'ms';
      return {
        method: relayMethod({ rounds, warmup, maxTokens, nginx: nginxVersion(nginxBin) }),
        samples: { rounds, 'token gaps per variant': v.direct.itl().n },
        figures: {
          ttft_added_p50: { label: 'relay: added time to first token, p50', value: relay.ttftP50, unit: ms },
          ttft_added_p99: { label: 'relay: added time to first token, p99', value: relay.ttftP99, unit: ms },
          itl_added_p50: { label: 'relay: added inter-token latency, p50', value: relay.itlP50, unit: ms },
          itl_added_p99: { label: 'relay: added inter-token latency, p99', value: relay.itlP99, unit: ms },
          tps_ratio: { label: 'relay: tokens/s ÷ direct (median)', value: relay.tpsRatio, unit: '×' },
          cpu_us_per_token: {
            label: 'relay: CPU per token, orchestratord + pool-managerd',
            value: cpuRelay.total as number,
            unit: 'µs',
          },
          cpu_us_per_token_orchestratord: {
            label: 'of which orchestratord',
            value: cpuRelay.orchestratord as number,
            unit: 'µs',
          },
          cpu_us_per_token_pool_managerd: {
            label: 'of which pool-managerd',
            value: cpuRelay.pool_managerd as number,
            unit: 'µs',
          },
          nginx2_ttft_added_p50: {
            label: 'two nginx hops: added time to first token, p50',
            value: ngx2.ttftP50,
            unit: ms,
          },
          nginx2_ttft_added_p99: {
            label: 'two nginx hops: added time to first token, p99',
            value: ngx2.ttftP99,
            unit: ms,
          },
          nginx2_itl_added_p50: {
            label: 'two nginx hops: added inter-token latency, p50',
            value: ngx2.itlP50,
            unit: ms,
          },
          nginx2_itl_added_p99: {
            label: 'two nginx hops: added inter-token latency, p99',
            value: ngx2.itlP99,
            unit: ms,
          },
          nginx2_tps_ratio: { label: 'two nginx hops: tokens/s ÷ direct (median)', value: ngx2.tpsRatio, unit: '×' },
          nginx2_cpu_us_per_token: {
            label: 'two nginx hops: CPU per token (both)',
            value: cpuNginx2.total as number,
            unit: 'µs',
          },
          ...againstNginx('', v.relay, v.nginx2, v.direct),
          single_ttft_added_p50: {
            label: 'single-request /v2 stream (POST with Accept: text/event-stream): added TTFT p50',
            value: single.ttftP50,
            unit: ms,
          },
          single_ttft_added_p99: {
            label: 'single-request /v2 stream: added TTFT p99',
            value: single.ttftP99,
            unit: ms,
          },
          single_itl_added_p99: {
            label: 'single-request /v2 stream: added inter-token p99',
            value: single.itlP99,
            unit: ms,
          },
          single_cpu_us_per_token: {
            label: 'single-request /v2 stream: CPU per token, both daemons',
            value: v.single.cpuUsPerToken().total as number,
            unit: 'µs',
          },
          chat_ttft_added_p50: {
            label: "/v1/chat/completions stream through the daemons: added TTFT p50 (over the engine's own chat route)",
            value: chatRelay.ttftP50,
            unit: ms,
          },
          chat_ttft_added_p99: {
            label: '/v1 chat through the daemons: added TTFT p99',
            value: chatRelay.ttftP99,
            unit: ms,
          },
          chat_itl_added_p99: {
            label: '/v1 chat through the daemons: added inter-token p99',
            value: chatRelay.itlP99,
            unit: ms,
          },
          chat_cpu_us_per_token: {
            label: '/v1 chat through the daemons: CPU per token, both daemons',
            value: cpuChatRelay.total as number,
            unit: 'µs',
          },
          chat_nginx2_ttft_added_p50: {
            label: '/v1 chat through two nginx hops: added TTFT p50',
            value: chatNgx2.ttftP50,
            unit: ms,
          },
          chat_nginx2_cpu_us_per_token: {
            label: '/v1 chat through two nginx hops: CPU per token (both)',
            value: cpuChatNginx2.total as number,
            unit: 'µs',
          },
          ...againstNginx('chat', v.chat_relay, v.chat_nginx2, v.chat_direct),
          ...doorStreamRows('msg', v.msg_relay, v.msg_direct),
          ...doorStreamRows('resp', v.resp_relay, v.resp_direct),
          ...answerRows(
            'chat',
            av.answer_chat_door,
            av.answer_chat_nginx2,
            av.answer_chat_floor,
            av.answer_chat_direct,
          ),
          answer_chat_streamed_door_cpu_ms: {
            label:
              'the same chat streamed through the door (how a non-streamed one ran before): CPU per request, both daemons',
            value: streamedChatCpuMs,
            unit: ms,
          },
          ...answerRows(
            'cmpl',
            av.answer_cmpl_door,
            av.answer_cmpl_nginx2,
            av.answer_cmpl_floor,
            av.answer_cmpl_direct,
          ),
          ...embeddingRows(av.embed_door, av.embed_direct),
          ...traced,
          ttft_pool_managerd_p50: {
            label: "pool-managerd's hop alone (its dispatch API − direct): added TTFT p50",
            value: pool.ttftP50,
            unit: ms,
          },
          cpu_us_per_token_pool_managerd_alone: {
            label: "pool-managerd's hop alone: CPU per token",
            value: cpuPool.total as number,
            unit: 'µs',
          },
          nginx1_ttft_added_p50: {
            label: 'one nginx hop (new engine connection per request): added TTFT p50',
            value: ngx1.ttftP50,
            unit: ms,
          },
          nginx1_cpu_us_per_token: {
            label: 'one nginx hop: CPU per token',
            value: v.nginx1.cpuUsPerToken().total as number,
            unit: 'µs',
          },
          ttft_floor_p50: {
            label: 'floor (diagnostic): two bare node:http pass-through processes (FIXTURE), added TTFT p50',
            value: floor.ttftP50,
            unit: ms,
          },
          floor_cpu_us_per_token: {
            label: 'floor (diagnostic): CPU per token (both)',
            value: cpuFloor.total as number,
            unit: 'µs',
          },
        },
        details: {
          variants: Object.fromEntries(names.map((n) => [n, v[n].details()])),
          answer_variants: Object.fromEntries(answerNames.map((n) => [n, av[n].details()])),
          added_over_direct: {
            relay,
            single_request: single,
            nginx2: ngx2,
            nginx1: ngx1,
            pool_managerd_alone: pool,
            floor_passthrough: floor,
          },
          chat_added_over_chat_direct: { relay: chatRelay, nginx2: chatNgx2 },
          messages_added_over_messages_direct: addedOver(v.msg_relay, v.msg_direct),
          responses_added_over_responses_direct: addedOver(v.resp_relay, v.resp_direct),
          relay_minus_direct_paired_ttft_ms: rounded(pairedTtft),
          text_mismatches: mismatches,
          nginx: nginxVersion(nginxBin),
          // every task makes ~7 spans in the two daemons: none received means the traced pair ran untraced
          spans_received: receiver.spans().length,
          engine_url: engineUrl,
          max_tokens: maxTokens,
        },
        notes:
          mismatches > 0 ? [`${mismatches} round(s) produced different text through some variant than directly`] : [],
      };
    } finally {
      for (const h of hops.reverse()) await h.stop();
      for (const p of proxies.reverse()) await p.stop();
      await pm.daemon.stop();
      await orch.stop();
      for (const pair of [tracedPair, twinPair]) {
        await pair.pm.daemon.stop();
        await pair.orch.stop();
      }
      await receiver.close();
    }
  },
};
