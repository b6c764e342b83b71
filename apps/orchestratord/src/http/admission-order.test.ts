// Wire order at admission: a task placed at once has its dispatch written to the node before the
// 202 goes to the client, so the engine starts while the client reads the 202 and opens its stream.
import type { Socket } from 'node:net';
import { Agent, buildConnector, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { HB_MS } from '../testing/openai-cluster.js';
import { makeApp, openSse, taskBody, TOKEN, type TestApp } from '../testing/test-helpers.js';

/** Records the start of every chunk written to `socket` whose text starts with `prefix`. */
function tapWrites(socket: Socket, prefix: string, label: string, order: string[]): void {
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (String(chunk).startsWith(prefix)) order.push(label);
    return write(chunk, ...rest);
  }) as typeof socket.write;
}

describe('admission answers after the dispatch it started', () => {
  let t: TestApp | undefined;
  let node: FixturePoolManager | undefined;
  afterEach(async () => {
    await t?.close();
    await node?.close();
  });

  it.each([
    ['a free slot: dispatch, then 202', 1, ['dispatch', '202']],
    ['no free slot: 202 at once, no dispatch', 0, ['202']],
  ])('%s', async (_title, slots, expected) => {
    const order: string[] = [];
    const connect = buildConnector({});
    const http1 = new Agent({
      connect: (opts, cb) =>
        connect(opts, (err, socket) => {
          if (socket !== null) tapWrites(socket as Socket, 'POST /v2/pools/', 'dispatch', order);
          cb(err, socket as never);
        }),
    });
    t = await makeApp({ heartbeat_interval_ms: HB_MS }, { tickMs: 20 }, undefined, http1);
    t.app.server.on('connection', (s: Socket) => tapWrites(s, 'HTTP/1.1 202', '202', order));
    const auth = t.auth;
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
      token: TOKEN,
      tokenIntervalMs: 5,
    });
    await node.startHeartbeats(url, HB_MS);
    const submit = async (): Promise<{ status: number; sse: string }> => {
      const res = await request(`${url}/v2/tasks`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify(taskBody({ max_tokens: 2 })),
      });
      const json = (await res.body.json()) as { streams: { sse: string } };
      return { status: res.statusCode, sse: json.streams.sse };
    };
    // A first task opens the kept connection to the node (a dispatch that must connect first goes
    // out after the 202 whatever the order: nothing to wait for).
    await (
      await openSse((await submit()).sse, auth)
    ).done;
    if (slots === 0) {
      // Occupy the only slot with a task the node never finishes, so the next one waits in the queue.
      node.nextBehaviours.push({ kind: 'hang' });
      await submit();
    }
    order.length = 0;
    const task = await submit();
    expect(task.status).toBe(202);
    if (slots === 1) await (await openSse(task.sse, auth)).done;
    expect(order).toEqual(expected);
  });
});
