import { describe, expect, it } from 'vitest';
import { isLoopbackHost, splitHostPort } from './address.js';

// The rules both daemons apply before they open an API without a token (issue 24 settled the two
// copies' drift at the edges: case, brackets, malformed octets, other IPv6 spellings).
describe('isLoopbackHost', () => {
  it('accepts every spelling of this machine', () => {
    for (const h of [
      '127.0.0.1',
      '127.1.2.3',
      '127.255.255.255',
      'localhost',
      'LOCALHOST',
      'LocalHost',
      '::1',
      '[::1]',
      '0:0:0:0:0:0:0:1',
      '::ffff:127.0.0.1',
    ]) {
      expect(isLoopbackHost(h), h).toBe(true);
    }
  });

  it('refuses wildcards, other hosts, look-alikes and malformed addresses', () => {
    for (const h of [
      '0.0.0.0',
      '::',
      '[::]',
      '10.0.0.1',
      '128.0.0.1',
      'example.com',
      '127.0.0.1.example.com',
      'localhost.example.com',
      '127.0.0.256',
      '127.1',
      '[::1',
      '::1]',
      '::2',
      '::ffff:10.0.0.1',
      '',
    ]) {
      expect(isLoopbackHost(h), h).toBe(false);
    }
  });
});

describe('splitHostPort', () => {
  it('splits host:port and [v6]:port, brackets stripped', () => {
    expect(splitHostPort('127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(splitHostPort('[::1]:9200')).toEqual({ host: '::1', port: 9200 });
    expect(splitHostPort('0.0.0.0:0')).toEqual({ host: '0.0.0.0', port: 0 });
    expect(splitHostPort(':8080')).toEqual({ host: '', port: 8080 });
  });

  it('a port that is not all digits is NaN (never a prefix of it)', () => {
    expect(splitHostPort('h:12a').port).toBeNaN();
    expect(splitHostPort('h:').port).toBeNaN();
    expect(splitHostPort('h').port).toBeNaN();
  });
});
