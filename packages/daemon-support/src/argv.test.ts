import { describe, expect, it } from 'vitest';
import { parseDaemonArgv, type DaemonArgvSpec } from './argv.js';

const plain: DaemonArgvSpec = { name: 'd', usage: 'USAGE', version: () => '1.2.3' };
const withConfig: DaemonArgvSpec = { ...plain, required: { name: 'config', short: 'c', placeholder: '<file.yaml>' } };

describe('parseDaemonArgv', () => {
  it('--help and --version exit 0 whatever else is given', () => {
    expect(parseDaemonArgv(['-h'], plain)).toEqual({ action: 'exit', code: 0, stdout: 'USAGE\n' });
    expect(parseDaemonArgv(['--version'], withConfig)).toEqual({ action: 'exit', code: 0, stdout: 'd 1.2.3\n' });
    expect(parseDaemonArgv(['-c', 'x.yaml', '-V'], withConfig)).toMatchObject({ action: 'exit', code: 0 });
  });

  it("runs with the required option's value", () => {
    expect(parseDaemonArgv([], plain)).toEqual({ action: 'run' });
    expect(parseDaemonArgv(['--config', 'a.yaml'], withConfig)).toEqual({ action: 'run', value: 'a.yaml' });
    expect(parseDaemonArgv(['--config=b.yaml'], withConfig)).toEqual({ action: 'run', value: 'b.yaml' });
    expect(parseDaemonArgv(['-c', 'c.yaml'], withConfig)).toEqual({ action: 'run', value: 'c.yaml' });
  });

  it('usage errors: one line naming the problem, then the usage, exit 2', () => {
    const line = (args: string[], spec: DaemonArgvSpec): string | undefined => {
      const r = parseDaemonArgv(args, spec);
      expect(r).toMatchObject({ action: 'exit', code: 2 });
      return r.action === 'exit' ? r.stderr?.split('\n\n')[0] : undefined;
    };
    expect(line(['--port', '1'], plain)).toBe("d: unknown option '--port'");
    expect(line(['-x'], plain)).toBe("d: unknown option '-x'");
    expect(line(['serve'], plain)).toBe("d: unexpected argument 'serve'");
    expect(line(['--config'], withConfig)).toBe('d: --config needs a value');
    expect(line([], withConfig)).toBe('d: missing --config <file.yaml>');
    expect(line(['--config', ''], withConfig)).toBe('d: missing --config <file.yaml>');
  });
});
