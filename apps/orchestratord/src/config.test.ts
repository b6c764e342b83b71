import { describe, expect, it } from 'vitest';
import { isLoopbackHost } from '@llama-orch/daemon-support';
import { loadConfig } from './config.js';
import { ConfigError } from './errors.js';

describe('loadConfig', () => {
  it('applies defaults and is frozen', () => {
    const c = loadConfig({ env: {} });
    expect(c).toMatchObject({
      addr: '127.0.0.1:8080',
      admission_capacity: 1024,
      admission_policy: 'reject',
      placement_strategy: 'cache-aware',
      heartbeat_interval_ms: 5000,
      sse_keepalive_ms: 15000,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads the known variables and coerces numbers; empty values count as unset', () => {
    const c = loadConfig({
      env: {
        ORCHD_ADDR: '0.0.0.0:0',
        LLORCH_API_TOKEN: 'a-token-of-16-chars!',
        ORCHD_ADMISSION_CAPACITY: '8',
        ORCHD_ADMISSION_POLICY: 'drop-lru',
        ORCHESTRATORD_PLACEMENT_STRATEGY: 'round-robin',
        ORCHD_NODE_HEARTBEAT_MS: '100',
        ORCHD_PUBLIC_URL: '',
        UNRELATED: 'x',
      },
    });
    expect(c).toMatchObject({
      addr: '0.0.0.0:0',
      admission_capacity: 8,
      admission_policy: 'drop-lru',
      placement_strategy: 'round-robin',
      heartbeat_interval_ms: 100,
    });
    expect(c.public_url).toBeUndefined();
  });

  it('takes a Redis/Valkey store URL and key prefix; a malformed URL is a clear start-up error that never echoes the password', () => {
    expect(loadConfig({ env: {} })).toMatchObject({ redis_prefix: 'llorch:' });
    expect(loadConfig({ env: {} }).redis_url).toBeUndefined();
    for (const url of [
      'redis://127.0.0.1:6379/0',
      'rediss://cache.internal:6380/3',
      'redis://user:s3cret@h',
      'redis://h:6379',
      'redis://[::1]:6379/',
    ]) {
      expect(loadConfig({ env: { ORCHD_REDIS_URL: url, ORCHD_REDIS_PREFIX: 'prod-a:' } })).toMatchObject({
        redis_url: url,
        redis_prefix: 'prod-a:',
      });
    }
    for (const [url, why] of [
      ['http://h:6379', /scheme http: is not redis: or rediss:/],
      ['redis://h:6379/zero', /path \/zero is not a database number/],
      ['localhost:6379', /scheme localhost: is not redis:|not a URL/],
      ['redis://h:99999', /not a URL|out of range/],
      ['redis://h/0?tls=1', /query strings/],
    ] as const) {
      let err: unknown;
      try {
        loadConfig({ env: { ORCHD_REDIS_URL: url } });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).message).toMatch(/ORCHD_REDIS_URL/);
      expect((err as ConfigError).message).toMatch(why);
      expect((err as ConfigError).message).toMatch(/expected redis:\/\/host:port\/db/);
    }
    expect(() => loadConfig({ env: { ORCHD_REDIS_URL: 'redis://u:hunter2@h:1/x' } })).toThrow(/^(?![\s\S]*hunter2)/);
    expect(() => loadConfig({ env: { ORCHD_REDIS_PREFIX: 'has space' } })).toThrow(/ORCHD_REDIS_PREFIX/);
  });

  it('refuses a non-loopback bind without a token', () => {
    expect(() => loadConfig({ env: { ORCHD_ADDR: '0.0.0.0:8080' } })).toThrow(/requires LLORCH_API_TOKEN/);
    expect(() => loadConfig({ env: { ORCHD_ADDR: '[::]:8080' } })).toThrow(/requires LLORCH_API_TOKEN/);
    expect(loadConfig({ env: { ORCHD_ADDR: '[::1]:8080' } }).addr).toBe('[::1]:8080');
    expect(loadConfig({ env: { ORCHD_ADDR: 'localhost:0' } }).addr).toBe('localhost:0');
  });

  it('reports every problem at once, naming the variables', () => {
    let err: unknown;
    try {
      loadConfig({
        env: {
          ORCHD_ADDR: '10.0.0.1:99999',
          ORCHD_ADMISSION_CAPACITY: 'lots',
          ORCHD_ADMISSION_POLICY: 'maybe',
          LLORCH_API_TOKEN: 'short',
        },
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems.join('\n');
    expect(problems).toMatch(/ORCHD_ADMISSION_CAPACITY/);
    expect(problems).toMatch(/ORCHD_ADMISSION_POLICY/);
    expect(problems).toMatch(/LLORCH_API_TOKEN/);
    expect(problems).toMatch(/port 99999 is out of range/);
    expect((err as ConfigError).problems.length).toBeGreaterThanOrEqual(4);
  });

  it('knows loopback hosts', () => {
    expect(['127.0.0.1', '127.1.2.3', '::1', 'localhost', 'LOCALHOST'].every(isLoopbackHost)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.1', 'example.com', '127.0.0.1.example.com'].some(isLoopbackHost)).toBe(false);
  });
});
