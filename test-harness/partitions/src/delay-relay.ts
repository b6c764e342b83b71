import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * The fixture program (plain JS: it runs under `ip netns exec`, outside vitest). Resolved from the
 * package root, so the path holds from `src/` and from `dist/` alike.
 */
const RELAY_FIXTURE = fileURLToPath(new URL('../src/fixtures/delay-relay.mjs', import.meta.url));
const PDEATHSIG: readonly string[] = ['/usr/bin/setpriv', '/bin/setpriv'].some((p) => existsSync(p))
  ? ['setpriv', '--pdeathsig', 'SIGKILL', '--']
  : [];

/** One listener of the relay: what it accepts on and where it connects for each accepted socket. */
export interface RelayMap {
  /** `host:port`; port 0 = a free port (see {@link DelayRelay.ports}). */
  listen: string;
  /** `host:port`. */
  upstream: string;
}

export interface DelayRelayOptions {
  maps: readonly RelayMap[];
  /** Delay each way, ms; changed at run time with {@link DelayRelay.setDelay}. @default 0 */
  delayMs?: number;
  /** Command prefix it runs under, e.g. `lab.wrap(host)`; it must exec in place. @default none */
  wrap?: readonly string[];
  /** @default 10000 */
  timeoutMs?: number;
}

/** A running delay relay (FIXTURE, `src/fixtures/delay-relay.mjs`): TCP, a fixed delay each way. */
export interface DelayRelay {
  /** The port each map listens on, in the order of the maps. */
  readonly ports: readonly number[];
  readonly delayMs: number;
  /** Output lines (its JSON lines and any error). */
  readonly lines: readonly string[];
  /** Sets the delay for chunks that arrive from now on; resolves once the relay confirmed it. */
  setDelay(ms: number): Promise<void>;
  /** Closes its stdin (it exits, dropping its connections); SIGKILL after 2 s. Idempotent. */
  stop(): Promise<void>;
}

/** Starts the relay fixture and resolves once every map listens. */
export async function startDelayRelay(opts: DelayRelayOptions): Promise<DelayRelay> {
  const [file = process.execPath, ...prefix] = [...(opts.wrap ?? []), ...PDEATHSIG, process.execPath];
  const args = [
    ...prefix,
    RELAY_FIXTURE,
    '--delay-ms',
    String(opts.delayMs ?? 0),
    ...opts.maps.flatMap((m) => ['--map', `${m.listen}=${m.upstream}`]),
  ];
  const child: ChildProcess = spawn(file, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiters = new Set<{ test: (msg: Record<string, unknown>) => boolean; resolve: () => void }>();
  const ports: number[] = [];
  let delayMs = opts.delayMs ?? 0;
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  // a write to a relay that already exited fails with EPIPE: `exit` reports that (setDelay rejects)
  child.stdin?.on('error', () => undefined);
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (l) => lines.push(l));
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (l) => {
    lines.push(l);
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(l) as Record<string, unknown>;
    } catch {
      return;
    }
    if (msg.msg === 'relay listening' && typeof msg.port === 'number') ports.push(msg.port);
    for (const w of waiters) {
      if (w.test(msg)) {
        waiters.delete(w);
        w.resolve();
      }
    }
  });
  const tail = (): string => lines.slice(-20).join('\n');
  const expectLine = (
    what: string,
    test: (msg: Record<string, unknown>) => boolean,
    timeoutMs: number,
  ): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(w);
        reject(new Error(`delay relay: no ${what} within ${timeoutMs} ms:\n${tail()}`));
      }, timeoutMs);
      const w = {
        test,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      waiters.add(w);
      void exit.then(() => {
        if (!waiters.delete(w)) return;
        clearTimeout(timer);
        reject(new Error(`delay relay exited before ${what}:\n${tail()}`));
      });
    });
  let stopping: Promise<void> | undefined;
  const relay: DelayRelay = {
    ports,
    get delayMs() {
      return delayMs;
    },
    lines,
    async setDelay(ms) {
      const acked = expectLine(`ack of delay ${ms}`, (m) => m.msg === 'delay set' && m.delay_ms === ms, 5000);
      child.stdin?.write(`delay ${ms}\n`);
      await acked;
      delayMs = ms;
    },
    stop() {
      stopping ??= (async () => {
        if (exited) return;
        child.stdin?.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
        await exit;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
  try {
    await expectLine('ready line', (m) => m.msg === 'relay ready', opts.timeoutMs ?? 10_000);
  } catch (err) {
    await relay.stop();
    throw err;
  }
  return relay;
}
