#!/usr/bin/env node
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent } from 'undici';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { answerGeneration, AnswerVariant } from '../lib/answer-variants.js';
import {
  COLD_START_TIMEOUT_MS,
  SYNTHETIC_MODEL,
  newToken,
  startOrchestratord,
  startPoolManagerd,
  waitNodeIdle,
  waitPoolsReady,
} from '../lib/cluster.js';
import { cpuSeconds } from '../lib/proc.js';
import {
  chatGeneration,
  doorChatBody,
  engineChatBody,
  RelayVariant,
  type MeteredProcess,
} from '../lib/relay-variants.js';
import { benchPaths } from '../lib/repo.js';
import { median } from '../lib/stats.js';
import { relayGeneration } from '../lib/streams.js';
import { numberOption } from '../lib/tool-args.js';

/**
 * `node bench/dist/tools/relay-ab.js [--rounds=60] [--blocks=6] NAME=REPO …`: the relay's CPU on
 * several builds in one interleaved run. REPO is a built checkout (its
 * `apps/{orchestratord,pool-managerd}/dist/main.js`); each build runs its own orchestratord and
 * pool-managerd with a one-slot synthetic pool (its own llama-server). Every round sends, to each
 * build in a rotating order, a 128-token `/v2` stream (POST then GET /events), a `/v1` chat stream
 * and a non-streamed `/v1` chat; the daemons' CPU is metered around each request. The rounds are
 * cut into blocks so the spread between blocks shows the run's own noise. Prints, per build and
 * per block, orchestratord and pool-managerd CPU µs per token (streams) and ms per answer, then the
 * medians over blocks with their range. A diagnostic: nothing is written to bench/results.
 */

const PROMPT = 'Write a haiku about the sea.';
const MAX_TOKENS = 128;

const args = process.argv.slice(2);
const rounds = numberOption(args, 'rounds', 60);
const blocks = numberOption(args, 'blocks', 6);
const specs = args.filter((a) => !a.startsWith('--'));
if (specs.length === 0 || specs.some((s) => !/^[\w-]+=.+/.test(s))) {
  process.stderr.write('usage: relay-ab.js [--rounds=60] [--blocks=6] NAME=REPO_ROOT …\n');
  process.exit(2);
}

interface Build {
  readonly name: string;
  readonly orch: FileLoggedDaemon;
  readonly url: string;
  readonly processes: readonly MeteredProcess[];
}

type Kind = 'v2' | 'v1' | 'answer';
const KINDS: readonly Kind[] = ['v2', 'v1', 'answer'];

const metered = (name: string, pid: number): MeteredProcess => ({ name, cpuSeconds: () => cpuSeconds(pid) });
const paths = benchPaths(process.env);
const dir = await mkdtemp(join(paths.workDir, 'relay-ab-'));
const token = newToken();
const daemons: FileLoggedDaemon[] = [];
const agent = new Agent({ connections: 4, keepAliveTimeout: 30_000 });
try {
  const builds: Build[] = [];
  for (const spec of specs) {
    const [name, root] = spec.split(/=(.*)/s) as [string, string];
    const orch = await startOrchestratord({
      paths: { ...paths, orchestratord: join(root, 'apps/orchestratord/dist/main.js') },
      dir,
      token,
      heartbeatMs: 1000,
      name: `orchestratord-${name}`,
    });
    daemons.push(orch);
    const pm = await startPoolManagerd({
      paths: { ...paths, poolManagerd: join(root, 'apps/pool-managerd/dist/main.js') },
      dir,
      nodeId: `node-${name}`,
      token,
      orchestratorUrl: orch.url,
      heartbeatMs: 1000,
      pools: [{ id: `relay-${name}`, slots: 1, determinism: true, threads: 1 }],
    });
    daemons.push(pm.daemon);
    await waitPoolsReady(orch.url, token, [`relay-${name}`], [orch, pm.daemon], COLD_START_TIMEOUT_MS);
    await waitNodeIdle(orch.url, token, `node-${name}`, 10_000);
    builds.push({
      name,
      orch,
      url: orch.url,
      processes: [metered('orchestratord', orch.pid), metered('pool_managerd', pm.daemon.pid)],
    });
  }
  const newBlock = () =>
    new Map(
      builds.map((b) => [
        b.name,
        {
          v2: new RelayVariant(`${b.name}-v2`, b.processes),
          v1: new RelayVariant(`${b.name}-v1`, b.processes),
          answer: new AnswerVariant(`${b.name}-answer`, b.processes),
        },
      ]),
    );
  const perBlock: Array<ReturnType<typeof newBlock>> = [];
  const warmup = 5;
  const perBlockRounds = Math.max(1, Math.floor(rounds / blocks));
  process.stdout.write(
    `relay-ab: ${warmup} warm-up + ${perBlockRounds * blocks} rounds (${blocks} blocks) of ${builds.map((b) => b.name).join(', ')} × ${KINDS.join(', ')}\n`,
  );
  let block = newBlock();
  for (let i = 0; i < warmup + perBlockRounds * blocks; i++) {
    const counted = i >= warmup;
    const seed = 1000 + i;
    const order = builds.map((_, k) => builds[(i + k) % builds.length] as Build);
    for (const b of order) {
      const v = block.get(b.name)!;
      for (const kind of KINDS) {
        const variant = v[kind];
        variant.meterStart();
        if (kind === 'answer') {
          const body = engineChatBody(PROMPT, MAX_TOKENS, seed);
          const a = await answerGeneration(
            b.url,
            'chat',
            { model: SYNTHETIC_MODEL, messages: body.messages, max_tokens: MAX_TOKENS, seed, temperature: 0 },
            agent,
            { token },
          );
          await new Promise((r) => setTimeout(r, 20));
          variant.meterStop(counted);
          if (counted) (variant as AnswerVariant).answers.push(a);
          continue;
        }
        const g =
          kind === 'v2'
            ? await relayGeneration(
                {
                  orchUrl: b.url,
                  token,
                  model: SYNTHETIC_MODEL,
                  prompt: PROMPT,
                  maxTokens: MAX_TOKENS,
                  seed,
                  determinism: 'strict',
                },
                agent,
              )
            : await chatGeneration(b.url, doorChatBody(SYNTHETIC_MODEL, PROMPT, MAX_TOKENS, seed), agent, { token });
        await new Promise((r) => setTimeout(r, 20));
        variant.meterStop(counted);
        if (counted) (variant as RelayVariant).generations.push(g);
      }
    }
    if (counted && (i - warmup + 1) % perBlockRounds === 0) {
      perBlock.push(block);
      const line = builds
        .map((b) => {
          const v = block.get(b.name)!;
          const us = (k: 'v2' | 'v1') => v[k].cpuUsPerToken();
          const ms = v.answer.cpuMsPerRequest();
          return `${b.name}: v2 ${us('v2').orchestratord!.toFixed(1)}+${us('v2').pool_managerd!.toFixed(1)} µs/token, v1 ${us('v1').orchestratord!.toFixed(1)}+${us('v1').pool_managerd!.toFixed(1)} µs/token, answer ${ms.orchestratord!.toFixed(3)}+${ms.pool_managerd!.toFixed(3)} ms`;
        })
        .join(' | ');
      process.stdout.write(`block ${perBlock.length}: ${line}\n`);
      block = newBlock();
    }
  }
  process.stdout.write('medians over blocks [min–max]: orchestratord + pool-managerd\n');
  const show = (xs: readonly number[], digits: number): string =>
    `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}]`;
  for (const b of builds) {
    const figure = (kind: Kind, process: string): string => {
      const xs = perBlock.map((blk) => {
        const v = blk.get(b.name)!;
        return (kind === 'answer' ? v.answer.cpuMsPerRequest() : v[kind].cpuUsPerToken())[process]!;
      });
      return show(xs, kind === 'answer' ? 3 : 1);
    };
    const both = (kind: Kind): string => `${figure(kind, 'orchestratord')} + ${figure(kind, 'pool_managerd')}`;
    process.stdout.write(
      `  ${b.name}: v2 ${both('v2')} µs/token; v1 ${both('v1')} µs/token; answer ${both('answer')} ms/request\n`,
    );
  }
} finally {
  await agent.close();
  for (const d of daemons.reverse()) await d.stop();
  process.stdout.write(`run dir ${dir}\n`);
}
