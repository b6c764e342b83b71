import type { AddressInfo } from 'node:net';
import { splitHostPort } from '@llama-orch/daemon-support';

/**
 * Who this replica is among the replicas of one cluster store, and where the others reach it
 * directly (not through the load balancer). The one place that resolves both: the dashboard's
 * "replicas", the metrics leader and the cross-replica task proxy read them from here.
 */
export interface ReplicaIdentity {
  /** `replica_id` (ORCHD_REPLICA_ID), else `<hostname>-<pid>`. */
  readonly replicaId: string;
  /**
   * `advertise_url` (ORCHD_ADVERTISE_URL) without a trailing slash; else the bound address once
   * listening (`http://<bind host>:<port>`; loopback for a wildcard bind, which reaches it from this
   * host only: set ORCHD_ADVERTISE_URL across hosts); undefined before that (nothing can reach it yet).
   */
  address(): string | undefined;
  /** `http://<addr>` as configured: what announcements show before the server listens. */
  readonly configuredAddress: string;
}

export interface ReplicaIdentityInput {
  replicaId: string | undefined;
  advertiseUrl: string | undefined;
  /** The configured listen address (`host:port`). */
  addr: string;
  /** The listening server's bound address, or null before it listens. */
  boundAddress: () => AddressInfo | string | null;
  /** This host's name (os.hostname()): the default id. */
  hostname: string;
  pid: number;
}

/** `<hostname>-<pid>` within the id alphabet (`[A-Za-z0-9._-]{1,64}`): other characters become `-`, the host part is cut to fit. */
export function defaultReplicaId(hostname: string, pid: number): string {
  const tail = `-${pid}`;
  const host = hostname.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64 - tail.length);
  return `${host === '' ? 'orchestratord' : host}${tail}`;
}

export function replicaIdentity(o: ReplicaIdentityInput): ReplicaIdentity {
  const advertised = o.advertiseUrl?.replace(/\/+$/, '');
  const { host: bindHost } = splitHostPort(o.addr);
  const wildcard = bindHost === '0.0.0.0' || bindHost === '::' || bindHost === '';
  const host = wildcard ? '127.0.0.1' : bindHost;
  const hostPart = host.includes(':') ? `[${host}]` : host;
  let bound: string | undefined;
  return {
    replicaId: o.replicaId ?? defaultReplicaId(o.hostname, o.pid),
    configuredAddress: `http://${o.addr}`,
    address() {
      if (advertised !== undefined) return advertised;
      if (bound !== undefined) return bound;
      const a = o.boundAddress();
      if (a === null || typeof a === 'string') return undefined;
      bound = `http://${hostPart}:${a.port}`;
      return bound;
    },
  };
}
