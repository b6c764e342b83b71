import type { CapturedDaemon } from '@llama-orch/chaos';
import { startDelayRelay, type DelayRelay } from './delay-relay.js';
import { waitFor } from './lab-daemons.js';
import type { LabHost, NetLab } from './net-lab.js';

/**
 * The ports a relayed node is given. Fixed, so that the redirects are in place before the node
 * starts: a redirect only catches connections opened after it, and the replicas dial a node as soon
 * as it registered (a free port read from its log could lose that race). The namespace is the
 * node's alone and its engines listen on loopback, so nothing else holds them.
 */
export const RELAYED_NODE_PORT = 7100;
export const RELAYED_DISPATCH_PORT = 7101;

/** A node's links to the replicas, both ways through one delay relay in its namespace. */
export interface RelayedLinks {
  readonly relay: DelayRelay;
  /** What the node must use as `orchestrator.url`: the relay's loopback listener. */
  readonly orchestratorUrl: string;
  readonly nodePort: number;
  readonly dispatchPort: number;
}

/**
 * Puts a delay relay (FIXTURE) on every path between the replicas and the node in `host`, with no
 * delay until {@link DelayRelay.setDelay}:
 * - replicas → node (dispatches over HTTP/1.1 and h2c, status): nat PREROUTING in the node's
 *   namespace redirects connections arriving on its veth for its two ports to the relay, which
 *   dials the node's address from inside the namespace; locally originated, that connection goes
 *   through nat OUTPUT, not PREROUTING, so it is not redirected again;
 * - node → replica (register, heartbeats): the node dials the relay on loopback (its orchestrator
 *   URL), the relay dials the replica; no redirect, so no loop to break.
 * Each path crosses the veth once, so a loss rule on the veth hits it once. The rules go with the
 * namespace ({@link NetLab.close}); the relay is stopped by the caller.
 */
export async function relayNodeLinks(lab: NetLab, host: LabHost, orchestratorUrl: string): Promise<RelayedLinks> {
  const orchestrator = new URL(orchestratorUrl);
  const relay = await startDelayRelay({
    wrap: lab.wrap(host),
    maps: [
      { listen: `${host.addr}:0`, upstream: `${host.addr}:${RELAYED_NODE_PORT}` },
      { listen: `${host.addr}:0`, upstream: `${host.addr}:${RELAYED_DISPATCH_PORT}` },
      { listen: '127.0.0.1:0', upstream: `${orchestrator.hostname}:${orchestrator.port}` },
    ],
  });
  try {
    for (const [port, relayPort] of [
      [RELAYED_NODE_PORT, relay.ports[0]],
      [RELAYED_DISPATCH_PORT, relay.ports[1]],
    ] as const) {
      const match = ['-i', host.nsIf, '-p', 'tcp', '-d', host.addr, '--dport', String(port)];
      await lab.inNs(host, [
        'iptables',
        '-t',
        'nat',
        '-A',
        'PREROUTING',
        ...match,
        '-j',
        'REDIRECT',
        '--to-ports',
        String(relayPort),
      ]);
    }
  } catch (err) {
    await relay.stop();
    throw err;
  }
  return {
    relay,
    orchestratorUrl: `http://127.0.0.1:${relay.ports[2]}`,
    nodePort: RELAYED_NODE_PORT,
    dispatchPort: RELAYED_DISPATCH_PORT,
  };
}

/**
 * Checks, from its 'listening' and 'dispatch listening (h2c)' lines, that the node listens on the
 * ports the redirects were set up for: a node elsewhere would bypass the relay unnoticed.
 */
export async function assertListensOnRelayedPorts(node: CapturedDaemon, links: RelayedLinks): Promise<void> {
  const api = Number(new URL(node.url).port);
  const h2c = await waitFor(`${node.name}'s 'dispatch listening (h2c)' line`, 10_000, async () => {
    const line = node.lines.find((l) => l.json?.msg === 'dispatch listening (h2c)');
    return line === undefined ? undefined : Number(line.json?.port);
  });
  if (api !== links.nodePort || h2c !== links.dispatchPort) {
    throw new Error(
      `${node.name} listens on ${api} and ${h2c} (h2c), the relay redirects ${links.nodePort} and ${links.dispatchPort}`,
    );
  }
}
