import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * Whether a bind host only accepts connections from this machine: `localhost` (any case), an IPv4
 * address in 127.0.0.0/8, or IPv6 loopback in any spelling (`::1`, `0:0:0:0:0:0:0:1`, bracketed
 * `[::1]`, IPv4-mapped `::ffff:127.0.0.1`). Anything else — wildcards (`0.0.0.0`, `::`), names
 * that merely start like one (`127.0.0.1.example.com`), malformed octets (`127.0.0.256`) — is not,
 * so a daemon refuses to open it without a token.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (h.toLowerCase() === 'localhost') return true;
  const family = isIPv4(h) ? 'ipv4' : isIPv6(h) ? 'ipv6' : undefined;
  if (family === undefined) return false;
  // Built per call: it is read only at start-up, and a module-level list would be shared state.
  const loopback = new BlockList();
  loopback.addSubnet('127.0.0.0', 8, 'ipv4');
  loopback.addAddress('::1', 'ipv6');
  return loopback.check(h, family);
}

/**
 * Host and port of a `host:port` listen address (`[v6]:port` for IPv6 literals, brackets
 * stripped). The port is `NaN` unless it is all digits; callers validate the address's format
 * (contracts' `HostPortSchema`) and its range.
 */
export function splitHostPort(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const rawHost = i < 0 ? addr : addr.slice(0, i);
  const rawPort = i < 0 ? '' : addr.slice(i + 1);
  const host = rawHost.startsWith('[') && rawHost.endsWith(']') ? rawHost.slice(1, -1) : rawHost;
  return { host, port: /^\d+$/.test(rawPort) ? Number(rawPort) : Number.NaN };
}
