import type { Bench } from '../lib/context.js';
import { admissionBench } from './admission.js';
import { cancelBench } from './cancel.js';
import { chatBench } from './chat.js';
import { chatReplicasBench } from './chat-replicas.js';
import { failoverBench } from './failover.js';
import { floodBench } from './flood.js';
import { lifecycleBench } from './lifecycle.js';
import { placementBench } from './placement.js';
import { poolStartBench } from './pool-start.js';
import { prefixBench } from './prefix.js';
import { relayBench } from './relay.js';
import { replicasBench } from './replicas.js';
import { streamsBench } from './streams.js';

/** Run order as in the issues (issue 17 added `chat`, issue 25 `flood`, `replicas` and `chat-replicas`, issue 40 `lifecycle`, issue 41 `prefix`); `relay` goes first, so a cold cache builds llama-server once there. */
export const BENCH_ORDER: readonly string[] = [
  'relay',
  'admission',
  'streams',
  'failover',
  'cancel',
  'placement',
  'pool-start',
  'chat',
  'chat-replicas',
  'flood',
  'replicas',
  'lifecycle',
  'prefix',
];

export const BENCHES: Readonly<Record<string, Bench>> = {
  relay: relayBench,
  admission: admissionBench,
  streams: streamsBench,
  failover: failoverBench,
  cancel: cancelBench,
  placement: placementBench,
  'pool-start': poolStartBench,
  chat: chatBench,
  'chat-replicas': chatReplicasBench,
  replicas: replicasBench,
  flood: floodBench,
  lifecycle: lifecycleBench,
  prefix: prefixBench,
};
