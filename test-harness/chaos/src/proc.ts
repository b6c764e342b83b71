import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Whether a process id is alive (signal 0 probe; a zombie counts as dead). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Resident set size of a process, bytes (`VmRSS` of /proc/<pid>/status); undefined when gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] === undefined ? undefined : Number(m[1]) * 1024;
  } catch {
    return undefined;
  }
}

/** argv of a process, or undefined when it is gone. */
export function cmdline(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((a) => a !== '');
  } catch {
    return undefined;
  }
}

function cwdOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return undefined;
  }
}

function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** A live `llama-server` process and why it was attributed to this suite. */
export interface EngineProcessInfo {
  pid: number;
  argv: string[];
  cwd: string | undefined;
  reason: 'cmdline' | 'cwd' | 'environ';
}

/**
 * Live `llama-server` processes that belong to this run: argv mentions one of `dirs`, the working
 * directory is inside one of them (pool-managerd is started with its runtime dir as cwd and engines
 * inherit it), or the environment carries `marker` (`NAME=value`, inherited through pool-managerd).
 */
export function enginesOf(dirs: readonly string[], marker: string): EngineProcessInfo[] {
  const out: EngineProcessInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const argv = cmdline(pid);
    if (argv === undefined || argv.length === 0) continue;
    // setpriv execs in place, so the engine's argv[0] is the binary itself
    if (!argv.some((a) => /(^|\/)llama-server$/.test(a))) continue;
    if (!pidAlive(pid)) continue;
    const cwd = cwdOf(pid);
    const inDir = (p: string): boolean => dirs.some((d) => p === d || p.startsWith(`${d}/`));
    let reason: EngineProcessInfo['reason'] | undefined;
    if (argv.some((a) => dirs.some((d) => a.includes(d)))) reason = 'cmdline';
    else if (cwd !== undefined && inDir(cwd)) reason = 'cwd';
    else if (environOf(pid).includes(marker)) reason = 'environ';
    if (reason !== undefined) out.push({ pid, argv, cwd, reason });
  }
  return out;
}

/** Socket inodes a process holds open. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return inodes;
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1] !== undefined) inodes.add(m[1]);
    } catch {
      // fd closed meanwhile
    }
  }
  return inodes;
}

function hexToIPv4(hex: string): string {
  // /proc/net/tcp stores the address little-endian
  const bytes = [6, 4, 2, 0].map((i) => Number.parseInt(hex.slice(i, i + 2), 16));
  return bytes.join('.');
}

function hexToIPv6(hex: string): string {
  const groups: string[] = [];
  for (let w = 0; w < 4; w++) {
    const word = hex.slice(w * 8, w * 8 + 8);
    const le = [6, 4, 2, 0].map((i) => word.slice(i, i + 2)).join('');
    groups.push(le.slice(0, 4), le.slice(4, 8));
  }
  return groups
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')
    .toLowerCase();
}

/** A TCP socket in LISTEN state owned by a process. */
export interface ListeningSocket {
  family: 'tcp' | 'tcp6';
  address: string;
  port: number;
}

/** TCP sockets a process listens on, from /proc/net/tcp{,6} joined with its fds' socket inodes. */
export function listeningSockets(pid: number): ListeningSocket[] {
  const inodes = socketInodes(pid);
  const out: ListeningSocket[] = [];
  for (const family of ['tcp', 'tcp6'] as const) {
    let text: string;
    try {
      text = readFileSync(`/proc/net/${family}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const [local, , state] = [cols[1] ?? '', cols[2] ?? '', cols[3] ?? ''];
      const inode = cols[9] ?? '';
      if (state !== '0A' || !inodes.has(inode)) continue; // 0A = LISTEN
      const [addrHex = '', portHex = ''] = local.split(':');
      out.push({
        family,
        address: family === 'tcp' ? hexToIPv4(addrHex) : hexToIPv6(addrHex),
        port: Number.parseInt(portHex, 16),
      });
    }
  }
  return out;
}
