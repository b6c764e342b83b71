// Test setup (vitest setupFiles): the network tools the lab drives, found and installed.
import { access, constants } from 'node:fs/promises';
import { execa } from 'execa';

// root's tools (iptables, tc) live in sbin, which a non-login PATH (a CI runner's, a service's) often
// lacks; `ip netns exec` finds them through PATH, so without this a lab test skips as "no iptables".
const path = (process.env.PATH ?? '').split(':').filter((d) => d !== '');
for (const dir of ['/usr/local/sbin', '/usr/sbin', '/sbin']) if (!path.includes(dir)) path.push(dir);
process.env.PATH = path.join(':');

const TOOLS = [
  ['iproute2', '/usr/sbin/tc'],
  ['iptables', '/usr/sbin/iptables'],
] as const;

const present = (file: string): Promise<boolean> =>
  access(file, constants.X_OK).then(
    () => true,
    () => false,
  );

// As root (the only way these tests run), Debian's packages are installed when missing, as the
// browser tests install chromium (waiting for another suite's apt lock). A failed install, or a
// kernel without netns or netfilter, still only skips the tests, each with its reason printed.
const missing = [];
for (const [pkg, file] of TOOLS) if (!(await present(file))) missing.push(pkg);
if (missing.length > 0 && process.getuid?.() === 0) {
  const apt = (args: string[]) =>
    execa('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args], {
      stdin: 'ignore',
      reject: false,
      env: { DEBIAN_FRONTEND: 'noninteractive' },
    });
  process.stderr.write(`partition tests: installing Debian's ${missing.join(', ')}\n`);
  if ((await apt(['install', '-y', '--no-install-recommends', ...missing])).exitCode !== 0) {
    await apt(['update']);
    await apt(['install', '-y', '--no-install-recommends', ...missing]);
  }
}
