import type { Logger } from 'pino';
import { Agent, request, type Dispatcher } from 'undici';
import {
  HeartbeatRequestSchema,
  NodeAckSchema,
  NodeRegisterRequestSchema,
  type NodeAck,
  type NodeMemory,
  type NodeRegisterRequest,
  type PoolSnapshot,
} from '@llama-orch/contracts';
import { NodeRegistrationError } from '../errors.js';
import { BackoffPolicy } from '../supervision/backoff.js';
import type { NodeCapabilities } from './capabilities.js';
import { nodeMemory } from './node-memory.js';

export type NodeClientState = 'idle' | 'registering' | 'online' | 'closing' | 'closed';

export interface NodeClientOptions {
  /** Base URL of orchestratord. */
  orchestratorUrl: string;
  nodeId: string;
  machineId: string;
  /** URL orchestratord uses to reach this pool-managerd. */
  address: string;
  /** URL of the h2c dispatch listener, registered as `dispatch_h2c`; absent = HTTP/1.1 only. */
  dispatchH2c?: string | undefined;
  version: string;
  capabilities: NodeCapabilities;
  /** Bearer token for orchestratord. */
  apiToken?: string;
  /** Heartbeat period, ms (orchestratord's ack may ask for sooner). */
  heartbeatIntervalMs: number;
  /** What the pool table knows right now, every pool. */
  snapshots: () => PoolSnapshot[];
  /**
   * The on-demand memory budget (`on_demand.memory_budget_bytes`): registration and heartbeats then
   * carry `memory` {budget, what the pools in the same message take}. Absent: no `memory` (the node
   * loads nothing on request).
   */
  memoryBudgetBytes?: number | undefined;
  logger: Logger;
  /** @default a private Agent, destroyed by close() */
  dispatcher?: Dispatcher;
  /** Register retry backoff. @default 500 ms doubling to 30 s, ±10 % */
  backoff?: BackoffPolicy;
  /** Per-request timeout, ms. @default 5000 */
  requestTimeoutMs?: number;
}

const NUDGE_DEBOUNCE_MS = 50;
/** The retry after a failed heartbeat; through a balancer it most likely reaches another replica. */
const HEARTBEAT_RETRY_MS = 200;
/** Failed heartbeats in a row retried after {@link HEARTBEAT_RETRY_MS}; later ones wait for the cadence. */
const HEARTBEAT_QUICK_RETRIES = 3;
/** A heartbeat's own time limit never goes below this, however short the interval. */
const HEARTBEAT_TIMEOUT_FLOOR_MS = 500;

class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Registers the node with orchestratord (retrying with backoff while it is down), heartbeats every
 * pool's snapshot from the registry, re-registers when a heartbeat gets 404 (orchestratord forgot
 * the node), and deregisters on close. `nudge()` sends a heartbeat soon after a pool changed, so
 * readiness reaches orchestratord without waiting for the period.
 *
 * Heartbeats keep their cadence from when each was sent, and one may take at most half an interval
 * (500 ms at least): orchestratord marks a node offline after 3 intervals of silence, and behind a
 * load balancer one slow, stopped or leaving replica must not hold the next heartbeat back (on a
 * loaded machine that can cost a rolling restart requests answered 503). A failed heartbeat is
 * retried after 200 ms up to 3 times in a row, then every interval: with one replica SIGSTOPped
 * behind HAProxy (which still connects to it until its checks fail), a heartbeat and a single retry
 * can both land there, and the node would go offline.
 */
export class NodeClient {
  #state: NodeClientState = 'idle';
  readonly #orchestratorUrl: string;
  readonly #nodeId: string;
  readonly #machineId: string;
  readonly #address: string;
  readonly #dispatchH2c: string | undefined;
  readonly #version: string;
  readonly #capabilities: NodeCapabilities;
  readonly #apiToken: string | undefined;
  readonly #heartbeatIntervalMs: number;
  readonly #snapshots: () => PoolSnapshot[];
  readonly #memoryBudgetBytes: number | undefined;
  readonly #log: Logger;
  readonly #requestTimeoutMs: number;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  readonly #backoff: BackoffPolicy;
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  #nudged = false;
  #registered = false;
  #loop: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  #heartbeats = 0;
  #registrations = 0;

  constructor({
    orchestratorUrl,
    nodeId,
    machineId,
    address,
    dispatchH2c,
    version,
    capabilities,
    apiToken,
    heartbeatIntervalMs,
    snapshots,
    memoryBudgetBytes,
    logger,
    dispatcher,
    backoff,
    requestTimeoutMs = 5000,
  }: NodeClientOptions) {
    this.#orchestratorUrl = orchestratorUrl;
    this.#nodeId = nodeId;
    this.#machineId = machineId;
    this.#address = address;
    this.#dispatchH2c = dispatchH2c;
    this.#version = version;
    this.#capabilities = capabilities;
    this.#apiToken = apiToken;
    this.#heartbeatIntervalMs = heartbeatIntervalMs;
    this.#snapshots = snapshots;
    this.#memoryBudgetBytes = memoryBudgetBytes;
    this.#log = logger;
    this.#requestTimeoutMs = requestTimeoutMs;
    this.#ownsDispatcher = dispatcher === undefined;
    this.#dispatcher = dispatcher ?? new Agent({ connections: 4 });
    this.#backoff = backoff ?? new BackoffPolicy({ baseMs: 500, maxMs: 30_000 });
  }

  get state(): NodeClientState {
    return this.#state;
  }

  /** Heartbeats acknowledged so far. */
  get heartbeats(): number {
    return this.#heartbeats;
  }

  /** Successful registrations so far (re-registrations included). */
  get registrations(): number {
    return this.#registrations;
  }

  start(): void {
    if (this.#state !== 'idle') return;
    this.#state = 'registering';
    this.#loop = this.#run().catch((err: unknown) => this.#log.error({ err }, 'node client loop failed'));
  }

  /** Heartbeat as soon as possible (debounced: many changes → one heartbeat). */
  nudge(): void {
    if (this.#state !== 'online' && this.#state !== 'registering') return;
    if (this.#wake !== undefined) this.#wake();
    else this.#nudged = true;
  }

  async #run(): Promise<void> {
    const log = this.#log;
    const signal = this.#stop.signal;
    let failures = 0;
    while (!signal.aborted) {
      if (!this.#registered) {
        this.#state = 'registering';
        try {
          const ack = await this.#register();
          this.#registered = true;
          this.#registrations += 1;
          this.#backoff.reset();
          this.#state = 'online';
          log.info(
            { orchestrator: this.#orchestratorUrl, human: `node ${this.#nodeId} registered with orchestratord` },
            'node registered',
          );
          await this.#sleep(this.#nextDelay(ack));
        } catch (err) {
          if (signal.aborted) break;
          const delay = this.#backoff.next();
          log.warn(
            { err: err instanceof Error ? { message: err.message } : err, retry_in_ms: delay },
            'registration failed; retrying',
          );
          await this.#sleep(delay, false);
        }
        continue;
      }
      const sentAt = performance.now();
      try {
        const ack = await this.#heartbeat();
        this.#heartbeats += 1;
        failures = 0;
        await this.#sleep(this.#nextDelay(ack) - (performance.now() - sentAt));
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof HttpStatusError && err.status === 404) {
          log.warn('orchestratord does not know this node (404); registering again');
          this.#registered = false;
          continue;
        }
        failures += 1;
        log.warn({ err: err instanceof Error ? { message: err.message } : err, failures }, 'heartbeat failed');
        await this.#sleep(
          failures <= HEARTBEAT_QUICK_RETRIES
            ? Math.min(HEARTBEAT_RETRY_MS, this.#heartbeatIntervalMs)
            : this.#heartbeatIntervalMs - (performance.now() - sentAt),
        );
      }
    }
  }

  #nextDelay(ack: NodeAck): number {
    return Math.max(50, Math.min(this.#heartbeatIntervalMs, ack.next_heartbeat_ms));
  }

  /** Sleeps `ms`, woken early by close() or (when `nudgeable`) cut to 50 ms by a nudge. */
  async #sleep(ms: number, nudgeable = true): Promise<void> {
    if (this.#stop.signal.aborted) return;
    if (nudgeable && this.#nudged) ms = Math.min(ms, NUDGE_DEBOUNCE_MS);
    this.#nudged = false;
    await new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout;
      const done = (): void => {
        clearTimeout(timer);
        this.#stop.signal.removeEventListener('abort', done);
        this.#wake = undefined;
        resolve();
      };
      const arm = (delay: number): void => {
        timer = setTimeout(done, delay);
        timer.unref();
      };
      arm(ms);
      this.#stop.signal.addEventListener('abort', done, { once: true });
      if (nudgeable) {
        // Debounce: a burst of registry changes becomes one heartbeat.
        this.#wake = () => {
          clearTimeout(timer);
          arm(NUDGE_DEBOUNCE_MS);
          this.#wake = undefined;
        };
      }
    });
  }

  /** The pools now, with the node's memory when it loads models on request (both from one read). */
  #poolsAndMemory(): { pools: PoolSnapshot[]; memory?: NodeMemory } {
    const pools = this.#snapshots();
    const budget = this.#memoryBudgetBytes;
    return budget === undefined ? { pools } : { pools, memory: nodeMemory(budget, pools) };
  }

  async #register(): Promise<NodeAck> {
    const body: NodeRegisterRequest = NodeRegisterRequestSchema.parse({
      node_id: this.#nodeId,
      machine_id: this.#machineId,
      address: this.#address,
      ...(this.#dispatchH2c !== undefined ? { dispatch_h2c: this.#dispatchH2c } : {}),
      ...this.#poolsAndMemory(),
      capabilities: this.#capabilities,
      version: this.#version,
    });
    try {
      return await this.#post('/v2/nodes/register', body);
    } catch (err) {
      if (
        err instanceof HttpStatusError &&
        err.status >= 400 &&
        err.status < 500 &&
        err.status !== 404 &&
        err.status !== 429
      ) {
        throw new NodeRegistrationError(
          `orchestratord refused registration: ${err.message}`,
          { status: err.status },
          { cause: err },
        );
      }
      throw err;
    }
  }

  async #heartbeat(): Promise<NodeAck> {
    const body = HeartbeatRequestSchema.parse({ timestamp: new Date().toISOString(), ...this.#poolsAndMemory() });
    const timeoutMs = Math.min(
      this.#requestTimeoutMs,
      Math.max(HEARTBEAT_TIMEOUT_FLOOR_MS, this.#heartbeatIntervalMs / 2),
    );
    return this.#post(`/v2/nodes/${encodeURIComponent(this.#nodeId)}/heartbeat`, body, timeoutMs);
  }

  async #post(path: string, body: unknown, timeoutMs = this.#requestTimeoutMs): Promise<NodeAck> {
    const res = await request(new URL(path, this.#orchestratorUrl), {
      method: 'POST',
      dispatcher: this.#dispatcher,
      headers: { 'content-type': 'application/json', ...this.#auth() },
      body: JSON.stringify(body),
      signal: AbortSignal.any([this.#stop.signal, AbortSignal.timeout(timeoutMs)]),
    });
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300)
      throw new HttpStatusError(res.statusCode, `${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
    return NodeAckSchema.parse(JSON.parse(text));
  }

  #auth(): Record<string, string> {
    return this.#apiToken !== undefined ? { authorization: `Bearer ${this.#apiToken}` } : {};
  }

  /** Stops heartbeats and deregisters (`DELETE /v2/nodes/{id}`, bounded by `timeoutMs`). Idempotent. */
  close(timeoutMs = 3000): Promise<void> {
    this.#closing ??= (async () => {
      const wasRegistered = this.#registered;
      this.#state = 'closing';
      this.#stop.abort();
      await this.#loop;
      if (wasRegistered) {
        try {
          const res = await request(new URL(`/v2/nodes/${encodeURIComponent(this.#nodeId)}`, this.#orchestratorUrl), {
            method: 'DELETE',
            dispatcher: this.#dispatcher,
            headers: this.#auth(),
            signal: AbortSignal.timeout(timeoutMs),
          });
          await res.body.dump();
          this.#log.info({ status: res.statusCode, human: `node ${this.#nodeId} deregistered` }, 'node deregistered');
        } catch (err) {
          this.#log.warn({ err: err instanceof Error ? { message: err.message } : err }, 'deregistration failed');
        }
      }
      if (this.#ownsDispatcher) await this.#dispatcher.destroy().catch(() => undefined);
      this.#state = 'closed';
    })();
    return this.#closing;
  }
}
