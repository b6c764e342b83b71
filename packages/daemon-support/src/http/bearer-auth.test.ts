import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bearerAuthOptions,
  bearerAuthPlugin,
  bearerToken,
  credentialLookup,
  sha256,
  tokenMatches,
} from './bearer-auth.js';
import { correlationPlugin } from './correlation.js';

class Refused extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

describe('bearer tokens', () => {
  it('parses the one header form both daemons accept', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer   abc  ')).toBe('abc');
    expect(bearerToken('BEARER\tabc')).toBe('abc');
    for (const bad of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      'Basic abc',
      'Bearer a b',
      'Bearerabc',
      `Bearer ${'x'.repeat(8200)}`,
    ]) {
      expect(bearerToken(bad), String(bad).slice(0, 20)).toBeUndefined();
    }
  });

  it('matches by SHA-256 digest (timingSafeEqual; timing itself is not measured); the first of two credentials with one key wins', () => {
    expect(tokenMatches('secret', 'secret')).toBe(true);
    expect(tokenMatches('', 'secret')).toBe(false);
    const lookup = credentialLookup([
      { name: 'a', digest: sha256('k1') },
      { name: 'b', digest: sha256('k1') },
      { name: 'c', digest: sha256('k2') },
    ]);
    expect(lookup('k1')?.name).toBe('a');
    expect(lookup('k2')?.name).toBe('c');
    expect(lookup('k3')).toBeUndefined();
  });
});

describe('bearerAuthPlugin', () => {
  let app: FastifyInstance;
  afterEach(async () => app.close());

  async function build(credentials: { name: string; digest: Buffer }[]): Promise<FastifyInstance> {
    app = Fastify();
    await app.register(correlationPlugin);
    await app.register(
      bearerAuthPlugin,
      bearerAuthOptions({
        credentials,
        isOpen: (req) => req.routeOptions.url === '/open',
        unauthorized: (reason) => new Refused(401, reason),
        admit: (req, c) =>
          req.url === '/admin' && c.name !== 'admin' ? new Refused(403, `${c.name} is no admin`) : undefined,
      }),
    );
    for (const url of ['/open', '/closed', '/admin']) app.get(url, async () => ({ ok: true }));
    return app;
  }

  it('lets open routes and known tokens through; 401 missing/invalid, admit refuses', async () => {
    await build([
      { name: 'user', digest: sha256('user-key') },
      { name: 'admin', digest: sha256('admin-key') },
    ]);
    const get = async (url: string, token?: string) => {
      const r = await app.inject({ url, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
      return [r.statusCode, r.statusCode === 200 ? '' : (r.json() as { message: string }).message];
    };
    expect(await get('/open')).toEqual([200, '']);
    expect(await get('/closed')).toEqual([401, 'missing']);
    expect(await get('/closed', 'nope')).toEqual([401, 'invalid']);
    expect(await get('/closed', 'user-key')).toEqual([200, '']);
    expect(await get('/admin', 'user-key')).toEqual([403, 'user is no admin']);
    expect(await get('/admin', 'admin-key')).toEqual([200, '']);
  });

  it('no credentials: auth off', async () => {
    await build([]);
    expect((await app.inject('/closed')).statusCode).toBe(200);
  });
});
