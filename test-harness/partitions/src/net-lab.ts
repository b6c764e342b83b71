import { randomBytes } from 'node:crypto';
import { execa } from 'execa';

/** A network namespace joined to the lab's bridge by a veth pair. */
export interface LabHost {
  /** Short name given by the test (`node-a`, `redis` …). */
  readonly name: string;
  /** Namespace name (unique per run). */
  readonly ns: string;
  /** The host's address inside its namespace. */
  readonly addr: string;
  /** Root-namespace end of its veth pair (a bridge port): down = the host's link is cut. */
  readonly rootIf: string;
  /** Namespace end of its veth pair. */
  readonly nsIf: string;
}

async function ip(args: readonly string[]): Promise<void> {
  await execa('ip', args, { stdin: 'ignore' });
}

/**
 * Why network namespaces cannot be used here, or undefined when they can: root, `ip`, and a
 * namespace + veth pair + bridge actually created (and removed) with the names of a throw-away run.
 */
export async function netnsUnavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'network namespaces need root (ip netns add); run the suite as root';
  const id = randomBytes(3).toString('hex');
  const ns = `llorch-probe-${id}`;
  const br = `lpb${id}`;
  try {
    await ip(['netns', 'add', ns]);
    await ip(['link', 'add', `lpv${id}`, 'type', 'veth', 'peer', 'name', `lpp${id}`, 'netns', ns]);
    await ip(['link', 'add', br, 'type', 'bridge']);
    return undefined;
  } catch (err) {
    return `cannot create a network namespace, veth pair and bridge: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`;
  } finally {
    await ip(['link', 'del', br]).catch(() => undefined);
    await ip(['link', 'del', `lpv${id}`]).catch(() => undefined);
    await ip(['netns', 'del', ns]).catch(() => undefined);
  }
}

/** Why `tc qdisc … netem` cannot be used here (tried on a throw-away dummy link), or undefined. */
export async function netemUnavailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'tc netem needs root';
  const id = randomBytes(3).toString('hex');
  const ns = `llorch-probe-${id}`;
  try {
    await ip(['netns', 'add', ns]);
    await execa(
      'ip',
      ['netns', 'exec', ns, 'tc', 'qdisc', 'add', 'dev', 'lo', 'root', 'netem', 'delay', '200ms', 'loss', '5%'],
      { stdin: 'ignore' },
    );
    return undefined;
  } catch (err) {
    return `tc qdisc netem is unavailable: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message} (the kernel has no sch_netem)`;
  } finally {
    await ip(['netns', 'del', ns]).catch(() => undefined);
  }
}

/**
 * Why iptables cannot drop packets in a namespace here (a DROP rule added in a throw-away
 * namespace), or undefined. A missing binary is installed with apt-get when we are root, as the
 * store tests install redis-server.
 */
export async function iptablesUnavailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'iptables needs root';
  const which = await execa('sh', ['-c', 'command -v iptables'], { reject: false });
  if (which.exitCode !== 0) {
    const install = await execa(
      'sh',
      ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables'],
      { reject: false, timeout: 300_000 },
    );
    if (install.exitCode !== 0)
      return `iptables is not installed and apt-get could not install it: ${install.stderr.trim().split('\n').at(-1) ?? ''}`;
  }
  const id = randomBytes(3).toString('hex');
  const ns = `llorch-probe-${id}`;
  try {
    await ip(['netns', 'add', ns]);
    await execa('ip', ['netns', 'exec', ns, 'iptables', '-A', 'INPUT', '-p', 'tcp', '--dport', '9', '-j', 'DROP'], {
      stdin: 'ignore',
    });
    return undefined;
  } catch (err) {
    return `iptables cannot add a DROP rule (no netfilter in this kernel?): ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`;
  } finally {
    await ip(['netns', 'del', ns]).catch(() => undefined);
  }
}

/**
 * Why iptables' nat table cannot redirect in a namespace here (a REDIRECT rule added in a throw-away
 * namespace), or undefined: the delay relay's redirects need it.
 */
export async function natRedirectUnavailable(): Promise<string | undefined> {
  const base = await iptablesUnavailable();
  if (base !== undefined) return base;
  const id = randomBytes(3).toString('hex');
  const ns = `llorch-probe-${id}`;
  try {
    await ip(['netns', 'add', ns]);
    await execa(
      'ip',
      [
        'netns',
        'exec',
        ns,
        'iptables',
        '-t',
        'nat',
        '-A',
        'PREROUTING',
        '-p',
        'tcp',
        '--dport',
        '9',
        '-j',
        'REDIRECT',
        '--to-ports',
        '10',
      ],
      { stdin: 'ignore' },
    );
    return undefined;
  } catch (err) {
    return `iptables cannot add a nat REDIRECT rule (no nat table in this kernel?): ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`;
  } finally {
    await ip(['netns', 'del', ns]).catch(() => undefined);
  }
}

/** A direct veth link between two namespaces (its own /30, apart from the bridge). */
export interface LabLink {
  readonly a: LabHost;
  readonly b: LabHost;
  /** `a`'s address on the link (what `b` dials). */
  readonly aAddr: string;
  /** `b`'s address on the link (what `a` dials). */
  readonly bAddr: string;
  readonly aIf: string;
  readonly bIf: string;
}

/**
 * A bridge in the root namespace (the test, the replicas, the clients) and one namespace per host
 * that must be cut off, each joined to the bridge by a veth pair. Names carry a random run id, so a
 * crashed run's leftovers never collide with the next run; {@link NetLab.close} removes everything
 * (call it in afterAll: it is idempotent and never throws).
 */
export class NetLab {
  readonly id: string;
  /** The bridge's address: where hosts in namespaces reach the root namespace. */
  readonly hostAddr: string;
  readonly #bridge: string;
  readonly #prefix: string;
  readonly #hosts: LabHost[] = [];
  readonly #links: LabLink[] = [];
  #closing: Promise<void> | undefined;

  private constructor(id: string, prefix: string) {
    this.id = id;
    this.#prefix = prefix;
    this.#bridge = `lpb${id}`;
    this.hostAddr = `${prefix}.1`;
  }

  /** Creates the bridge (address `<subnet>.1/24`, a random 10.x.y.0/24). */
  static async create(): Promise<NetLab> {
    const r = randomBytes(5);
    const lab = new NetLab(r.subarray(0, 3).toString('hex'), `10.${200 + ((r[3] ?? 0) % 50)}.${r[4] ?? 0}`);
    try {
      await ip(['link', 'add', lab.#bridge, 'type', 'bridge']);
      await ip(['addr', 'add', `${lab.hostAddr}/24`, 'dev', lab.#bridge]);
      await ip(['link', 'set', lab.#bridge, 'up']);
    } catch (err) {
      await lab.close();
      throw err;
    }
    return lab;
  }

  get hosts(): readonly LabHost[] {
    return this.#hosts;
  }

  /** A new namespace `llorch-<id>-<name>` on the bridge, with loopback up and a route to the bridge. */
  async addHost(name: string): Promise<LabHost> {
    const k = this.#hosts.length + 2;
    const host: LabHost = {
      name,
      ns: `llorch-${this.id}-${name}`,
      addr: `${this.#prefix}.${k}`,
      rootIf: `lpv${this.id}${k}`,
      nsIf: `lpn${this.id}${k}`,
    };
    this.#hosts.push(host);
    await ip(['netns', 'add', host.ns]);
    await ip(['link', 'add', host.rootIf, 'type', 'veth', 'peer', 'name', host.nsIf, 'netns', host.ns]);
    await ip(['link', 'set', host.rootIf, 'master', this.#bridge, 'up']);
    await this.inNs(host, ['ip', 'addr', 'add', `${host.addr}/24`, 'dev', host.nsIf]);
    await this.inNs(host, ['ip', 'link', 'set', host.nsIf, 'up']);
    await this.inNs(host, ['ip', 'link', 'set', 'lo', 'up']);
    return host;
  }

  /**
   * A direct link between two hosts (e.g. a replica and Redis), on `10.S.(T+1).4k/30` beside the
   * bridge's `10.S.T.0/24`: traffic between them takes it, so cutting it cuts only that path.
   */
  async link(a: LabHost, b: LabHost): Promise<LabLink> {
    const k = this.#links.length;
    const [s, t] = this.#prefix.split('.').slice(1).map(Number) as [number, number];
    const net = `10.${s}.${(t + 1) % 256}`;
    const link: LabLink = {
      a,
      b,
      aAddr: `${net}.${4 * k + 1}`,
      bAddr: `${net}.${4 * k + 2}`,
      aIf: `lxa${this.id}${k}`,
      bIf: `lxb${this.id}${k}`,
    };
    this.#links.push(link);
    await ip(['link', 'add', link.aIf, 'netns', a.ns, 'type', 'veth', 'peer', 'name', link.bIf, 'netns', b.ns]);
    await this.inNs(a, ['ip', 'addr', 'add', `${link.aAddr}/30`, 'dev', link.aIf]);
    await this.inNs(b, ['ip', 'addr', 'add', `${link.bAddr}/30`, 'dev', link.bIf]);
    await this.inNs(a, ['ip', 'link', 'set', link.aIf, 'up']);
    await this.inNs(b, ['ip', 'link', 'set', link.bIf, 'up']);
    return link;
  }

  /** Cuts a direct link (its `a` end goes down: packets both ways are dropped silently). */
  async cutLink(link: LabLink): Promise<void> {
    await this.inNs(link.a, ['ip', 'link', 'set', link.aIf, 'down']);
  }

  /** Brings a direct link back up. */
  async restoreLink(link: LabLink): Promise<void> {
    await this.inNs(link.a, ['ip', 'link', 'set', link.aIf, 'up']);
  }

  /** The command prefix that runs a program inside the host's namespace (it execs in place). */
  wrap(host: LabHost): string[] {
    return ['ip', 'netns', 'exec', host.ns];
  }

  /** Runs a command inside the host's namespace; rejects with its stderr on failure. */
  async inNs(host: LabHost, argv: readonly string[]): Promise<string> {
    const r = await execa('ip', ['netns', 'exec', host.ns, ...argv], { stdin: 'ignore' });
    return r.stdout;
  }

  /** Cuts the host off: its bridge port goes down (packets both ways are dropped silently). */
  async cut(host: LabHost): Promise<void> {
    await ip(['link', 'set', host.rootIf, 'down']);
  }

  /** Gives the host its link back. */
  async restore(host: LabHost): Promise<void> {
    await ip(['link', 'set', host.rootIf, 'up']);
  }

  /** Removes every namespace, veth pair and the bridge. Idempotent; never throws. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const host of this.#hosts) {
        // a veth pair goes with either end; the namespace goes once its last process left
        await ip(['link', 'del', host.rootIf]).catch(() => undefined);
        await ip(['netns', 'del', host.ns]).catch(() => undefined);
      }
      await ip(['link', 'del', this.#bridge]).catch(() => undefined);
    })();
    return this.#closing;
  }
}
