// Test setup (vitest setupFiles): the network tools the lab drives, found and installed.
import { ensureDebianPackage } from '@llama-orch/daemon-support';

// root's tools (iptables, tc) live in sbin, which a non-login PATH (a CI runner's, a service's) often
// lacks; `ip netns exec` finds them through PATH, so without this a lab test skips as "no iptables".
const path = (process.env.PATH ?? '').split(':').filter((d) => d !== '');
for (const dir of ['/usr/local/sbin', '/usr/sbin', '/sbin']) if (!path.includes(dir)) path.push(dir);
process.env.PATH = path.join(':');

// As root (the only way these tests run), Debian's packages are installed when missing, as the
// browser tests install chromium; a kernel without netns or netfilter still skips, with its reason.
if (process.getuid?.() === 0) {
  await ensureDebianPackage({ pkg: 'iproute2', path: '/usr/sbin/tc', who: 'partition tests' });
  await ensureDebianPackage({ pkg: 'iptables', path: '/usr/sbin/iptables', who: 'partition tests' });
}
