#!/usr/bin/env node
import { readFileSync } from 'node:fs';

/**
 * `node bench/dist/tools/cpuprofile-top.js <file.cpuprofile> [N]`: self and inclusive time per
 * function of a V8 CPU profile (what `pnpm bench --cpu-prof` leaves in bench/.work/<run>/), the
 * N largest of each, so a missed target can be traced to the code that costs the time.
 */
interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  startTime: number;
  endTime: number;
}

function key(n: ProfileNode): string {
  const url = n.callFrame.url
    .replace(/^.*node_modules\//, 'nm:')
    .replace(/^file:\/\/.*?\/(apps|packages|bench)\//, '$1/');
  return `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
}

export function topFunctions(
  profile: CpuProfile,
  n: number,
): { total: number; self: Array<[string, number]>; inclusive: Array<[string, number]> } {
  const byId = new Map(profile.nodes.map((x) => [x.id, x] as const));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
  const ticks = new Map<number, number>();
  for (const s of profile.samples) ticks.set(s, (ticks.get(s) ?? 0) + 1);
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  for (const [id, t] of ticks) {
    const node = byId.get(id);
    if (node === undefined) continue;
    self.set(key(node), (self.get(key(node)) ?? 0) + t);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const k = key(byId.get(cur) as ProfileNode);
      if (seen.has(k)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + t);
    }
  }
  const top = (m: Map<string, number>): Array<[string, number]> => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  return { total: profile.samples.length, self: top(self), inclusive: top(incl) };
}

const [file, count] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: cpuprofile-top <file.cpuprofile> [N]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const t = topFunctions(profile, Number(count ?? 30));
const pct = (x: number): string => `${((100 * x) / t.total).toFixed(1)}%`.padStart(6);
const out = [`samples ${t.total}, ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s`, '--- self'];
for (const [k, v] of t.self) out.push(`${pct(v)} ${k}`);
out.push('--- inclusive');
for (const [k, v] of t.inclusive) out.push(`${pct(v)} ${k}`);
process.stdout.write(`${out.join('\n')}\n`);
