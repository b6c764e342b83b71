import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DaemonStartError, daemonArgv, launchDaemon, runToExit, type LaunchedDaemon } from './daemon-launcher.js';

// One fixture daemon, its behaviour chosen by argv[2]:
//   listen       logs `listening` (and what it was started with), a stderr line, `stopped` on SIGTERM
//   exit-early   writes to stderr and exits 3 before listening
//   ignore-term  logs `listening`, ignores SIGTERM
//   silent       never logs `listening`
//   late-line    exits at once, leaving its stdout to a shell that writes a line 300 ms later
//   held-pipe    exits at once, leaving its stdout to a shell that holds it for 5 s
const FIXTURE = `
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
const mode = process.argv[2];
const log = (o) => process.stdout.write(JSON.stringify({ time: Date.now(), ...o }) + '\\n');
const keepAlive = setInterval(() => {}, 1000);
if (mode === 'exit-early') {
  process.stderr.write('boom: config refused\\n');
  process.exit(3);
}
if (mode === 'late-line' || mode === 'held-pipe') {
  const sh = mode === 'late-line' ? 'sleep 0.3; echo late line' : 'echo holding; sleep 5';
  spawn('sh', ['-c', sh], { stdio: ['ignore', 'inherit', 'inherit'], detached: true }).unref();
  process.exit(0);
}
if (mode === 'ignore-term') process.on('SIGTERM', () => log({ msg: 'ignoring SIGTERM' }));
if (mode === 'listen') {
  process.on('SIGTERM', () => {
    log({ msg: 'stopped' });
    clearInterval(keepAlive);
  });
}
if (mode !== 'silent') {
  const nofile = /Max open files\\s+(\\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
  log({
    msg: 'started',
    pid: process.pid,
    cwd: process.cwd(),
    env: Object.keys(process.env).sort(),
    wrapped: process.env.WRAPPED,
    exec_argv: process.execArgv,
    nofile: Number(nofile),
  });
  process.stderr.write('a plain stderr line\\n');
  log({ msg: 'listening', url: 'http://127.0.0.1:1' });
}
`;

let dir: string;
let script: string;
const launched: LaunchedDaemon[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'daemon-launcher-'));
  script = join(dir, 'fixture-daemon.mjs');
  await writeFile(script, FIXTURE);
});
afterEach(async () => {
  await Promise.all(launched.splice(0).map((d) => d.stop('SIGKILL')));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function started(d: LaunchedDaemon): Record<string, unknown> {
  const line = d.logs().find((l) => l.msg === 'started');
  if (line === undefined) throw new Error(`no 'started' line:\n${d.tail()}`);
  return line;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('launchDaemon, captured output', () => {
  it('resolves at the listening line with its URL, every line captured with its stream, and stops on SIGTERM', async () => {
    const d = await launchDaemon({ name: 'cap', script, args: ['listen'], output: 'capture' }, { timeoutMs: 10_000 });
    launched.push(d);
    expect(d.url).toBe('http://127.0.0.1:1');
    expect(d.state).toBe('running');
    expect(d.alive()).toBe(true);
    // the pid is the daemon's own: nothing (setpriv, a wrap) stays in between
    expect(started(d).pid).toBe(d.pid);
    const listening = d.lines.find((l) => l.json?.msg === 'listening');
    expect(listening).toMatchObject({ source: 'cap', stream: 'stdout' });
    expect(typeof listening?.at).toBe('number');
    const plain = d.lines.find((l) => l.text === 'a plain stderr line');
    expect(plain).toMatchObject({ source: 'cap', stream: 'stderr', json: undefined });

    const first = d.stop();
    expect(d.stop('SIGKILL')).toBe(first);
    expect(await first).toEqual({ code: 0, signal: undefined });
    expect(d.state).toBe('exited');
    expect(d.alive()).toBe(false);
    expect(d.logs().at(-1)?.msg).toBe('stopped');
  });

  it('inherits the environment by default, sets env over it, and runs in cwd', async () => {
    const d = await launchDaemon(
      { name: 'env', script, args: ['listen'], output: 'capture', env: { EXTRA: '1' }, cwd: dir },
      { timeoutMs: 10_000 },
    );
    launched.push(d);
    const env = started(d).env as string[];
    expect(env).toContain('EXTRA');
    expect(env.length).toBeGreaterThan(3);
    expect(started(d).cwd).toBe(dir);
  });

  it('runs under a wrap command that execs in place', async () => {
    const d = await launchDaemon(
      { name: 'wrapped', script, args: ['listen'], output: 'capture', wrap: ['env', 'WRAPPED=yes'] },
      { timeoutMs: 10_000 },
    );
    launched.push(d);
    expect(started(d)).toMatchObject({ wrapped: 'yes', pid: d.pid });
  });

  it('rejects with the output tail and the exit when the daemon exits before listening', async () => {
    const err = await launchDaemon({ name: 'early', script, args: ['exit-early'], output: 'capture' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DaemonStartError);
    const e = err as DaemonStartError;
    expect(e.exit).toEqual({ code: 3, signal: undefined });
    expect(e.tail).toContain('boom: config refused');
    expect(e.message).toMatch(/^early exited \(3\) before listening/);
  });

  it('SIGKILLs a daemon that does not listen in time and says so', async () => {
    const err = await launchDaemon(
      { name: 'mute', script, args: ['silent'], output: 'capture' },
      { timeoutMs: 300 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DaemonStartError);
    expect((err as Error).message).toMatch(/did not log 'listening' within 300 ms/);
  });

  it('does not wait with waitListening: false', async () => {
    const d = await launchDaemon(
      { name: 'mute', script, args: ['silent'], output: 'capture' },
      { waitListening: false },
    );
    launched.push(d);
    expect(d.url).toBe('');
    expect(d.alive()).toBe(true);
    expect(await d.stop()).toEqual({ code: undefined, signal: 'SIGTERM' });
  });

  it('rejects when the command cannot be spawned', async () => {
    const err = await launchDaemon({
      name: 'nowhere',
      script,
      args: ['listen'],
      output: 'capture',
      cwd: join(dir, 'no-such-dir'),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DaemonStartError);
    expect((err as Error).message).toMatch(/could not be spawned/);
  });
});

describe('stop', () => {
  it('escalates to SIGKILL after the grace when SIGTERM is ignored', async () => {
    const d = await launchDaemon({ name: 'stubborn', script, args: ['ignore-term'], output: 'capture' });
    launched.push(d);
    const t0 = performance.now();
    expect(await d.stop('SIGTERM', 300)).toEqual({ code: undefined, signal: 'SIGKILL' });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    expect(d.logs().some((l) => l.msg === 'ignoring SIGTERM')).toBe(true);
    expect(pidAlive(d.pid)).toBe(false);
  });

  it('continues a SIGSTOPped daemon so that it can act on SIGTERM', async () => {
    const d = await launchDaemon({ name: 'paused', script, args: ['listen'], output: 'capture' });
    launched.push(d);
    d.signal('SIGSTOP');
    expect(await d.stop('SIGTERM', 5000)).toEqual({ code: 0, signal: undefined });
  });
});

describe('launchDaemon, output to a file', () => {
  it('appends both streams to the file, reads it back on demand, with a minimal env and node flags', async () => {
    const logFile = join(dir, 'file-mode.log');
    const d = await launchDaemon(
      {
        name: 'filed',
        script,
        args: ['listen'],
        output: { file: logFile },
        envMode: 'minimal',
        env: { EXTRA: '1' },
        nodeFlags: ['--max-old-space-size=64'],
      },
      { timeoutMs: 10_000 },
    );
    launched.push(d);
    expect(d.url).toBe('http://127.0.0.1:1');
    expect(d.logFile).toBe(logFile);
    expect('lines' in d).toBe(false);
    expect(started(d)).toMatchObject({
      pid: d.pid,
      env: ['EXTRA', 'HOME', 'PATH'],
      exec_argv: ['--max-old-space-size=64'],
    });
    const text = await readFile(logFile, 'utf8');
    expect(text).toContain('a plain stderr line');
    expect(text).toContain('"msg":"listening"');
    expect(d.tail(2)).toContain('"msg":"listening"');
    expect(await d.stop()).toEqual({ code: 0, signal: undefined });
    expect(d.logs().at(-1)?.msg).toBe('stopped');
  });
});

describe('nofile', () => {
  it("sets the open-file limit through bash, yet the pid is node's (exec)", async () => {
    const d = await launchDaemon(
      { name: 'limited', script, args: ['listen'], output: 'capture', nofile: 1000, nodeFlags: ['--no-warnings'] },
      { timeoutMs: 10_000 },
    );
    launched.push(d);
    expect(started(d)).toMatchObject({ pid: d.pid, nofile: 1000, exec_argv: ['--no-warnings'] });
  });
});

describe('runToExit', () => {
  it('resolves with the exit and every line of a daemon that refuses to start', async () => {
    const r = await runToExit(
      { name: 'refuser', script, args: ['exit-early'], output: 'capture' },
      { timeoutMs: 10_000 },
    );
    expect(r.exit).toEqual({ code: 3, signal: undefined });
    expect(r.listened).toBe(false);
    expect(r.lines.map((l) => l.text)).toEqual(['boom: config refused']);
  });

  it('SIGKILLs one that keeps running past the timeout, and reports that it listened', async () => {
    const r = await runToExit({ name: 'stayer', script, args: ['listen'], output: 'capture' }, { timeoutMs: 500 });
    expect(r.exit).toEqual({ code: undefined, signal: 'SIGKILL' });
    expect(r.listened).toBe(true);
  });
});

describe('exited', () => {
  it('waits for lines still in the pipe after the exit (a grandchild writing to it)', async () => {
    const r = await runToExit({ name: 'late', script, args: ['late-line'], output: 'capture' }, { timeoutMs: 10_000 });
    expect(r.exit).toEqual({ code: 0, signal: undefined });
    expect(r.lines.map((l) => l.text)).toContain('late line');
  });

  it('waits a bounded time for a pipe a grandchild keeps open', async () => {
    const t0 = performance.now();
    const r = await runToExit({ name: 'held', script, args: ['held-pipe'], output: 'capture' }, { timeoutMs: 10_000 });
    expect(r.lines.map((l) => l.text)).toContain('holding');
    expect(performance.now() - t0).toBeLessThan(4000);
  });
});

describe('daemonArgv', () => {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

  it('puts the wrap first, then setpriv --pdeathsig SIGKILL when it exists, then node', () => {
    const argv = daemonArgv({
      name: 'x',
      script: 's.js',
      args: ['a'],
      output: 'capture',
      wrap: ['ip', 'netns', 'exec', 'n'],
    });
    const guard = setpriv === undefined ? [] : [setpriv, '--pdeathsig', 'SIGKILL', '--'];
    expect(argv).toEqual(['ip', 'netns', 'exec', 'n', ...guard, process.execPath, 's.js', 'a']);
  });

  it('leaves setpriv out with pdeathsig: false', () => {
    expect(daemonArgv({ name: 'x', script: 's.js', output: 'capture', pdeathsig: false })).toEqual([
      process.execPath,
      's.js',
    ]);
  });
});
