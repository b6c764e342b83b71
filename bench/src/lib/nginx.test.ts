import { describe, expect, it } from 'vitest';
import { nginxConfig } from './nginx.js';

const base = { dir: '/tmp/x', name: 'lb', port: 8080, asRoot: false } as const;

describe('nginxConfig', () => {
  it('one target: a hop with 8 keepalive upstream connections', () => {
    const conf = nginxConfig({ ...base, targets: [new URL('http://127.0.0.1:1234')], upstream: 'keepalive' });
    expect(conf).toContain('upstream target { server 127.0.0.1:1234; keepalive 8; }');
    expect(conf).toContain('proxy_buffering off;');
  });
  it('several targets: a round-robin balancer over all of them, keepalive per target', () => {
    const conf = nginxConfig({
      ...base,
      targets: [new URL('http://127.0.0.1:1'), new URL('http://127.0.0.1:2')],
      upstream: 'keepalive',
    });
    expect(conf).toContain('upstream target { server 127.0.0.1:1; server 127.0.0.1:2; keepalive 16; }');
  });
  it('close upstream: no keepalive, so nginx closes each upstream connection', () => {
    const conf = nginxConfig({ ...base, targets: [new URL('http://127.0.0.1:1')], upstream: 'close' });
    expect(conf).toContain('upstream target { server 127.0.0.1:1; }');
    expect(conf).not.toContain('proxy_set_header Connection');
  });
});
