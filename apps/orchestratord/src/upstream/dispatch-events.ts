import { DispatchEventSchema, type DispatchEvent } from '@llama-orch/contracts';
import type { Readable } from 'node:stream';
import { UpstreamStreamError } from './upstream-errors.js';

/**
 * Reads a node's NDJSON event stream with push callbacks: `onEvent` gets every parsed event in
 * order and returns false to stop reading (the body is destroyed, which closes the upstream
 * request). Resolves when the body ended or reading stopped; rejects with
 * {@link UpstreamStreamError} when the stream breaks or carries something that is not a
 * DispatchEvent. Push callbacks rather than an async iterator: nothing is allocated per event
 * beyond the parsed event itself (no promise, no iterator result).
 */
export function readDispatchEvents(body: Readable, onEvent: (ev: DispatchEvent) => boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const decoder = new TextDecoder();
    let buffered = '';
    let settled = false;
    const settle = (err?: UpstreamStreamError): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      body.off('close', onClose);
      if (err === undefined) resolve();
      else reject(err);
    };
    const stop = (err?: UpstreamStreamError): void => {
      settle(err);
      body.on('error', () => undefined); // destroy() may still report the abort
      body.destroy();
    };
    const line = (text: string): boolean => {
      const trimmed = text.trim();
      if (trimmed === '') return true;
      let json: unknown;
      try {
        json = JSON.parse(trimmed);
      } catch (err) {
        stop(new UpstreamStreamError('node sent a line that is not JSON', { cause: err }));
        return false;
      }
      const parsed = DispatchEventSchema.safeParse(json);
      if (!parsed.success) {
        stop(
          new UpstreamStreamError(
            `node sent an invalid dispatch event: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
          ),
        );
        return false;
      }
      if (!onEvent(parsed.data)) {
        stop();
        return false;
      }
      return true;
    };
    const onData = (chunk: Buffer | string): void => {
      buffered += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
      let start = 0;
      let nl = buffered.indexOf('\n');
      while (nl >= 0) {
        if (!line(buffered.slice(start, nl))) return;
        start = nl + 1;
        nl = buffered.indexOf('\n', start);
      }
      buffered = start === 0 ? buffered : buffered.slice(start);
    };
    const onEnd = (): void => {
      const rest = buffered + decoder.decode();
      if (rest.trim() !== '' && !line(rest)) return;
      settle();
    };
    const onError = (err: Error): void =>
      settle(new UpstreamStreamError('event stream from node broke', { cause: err }));
    // Destroyed without an error (and without its end): broken all the same.
    const onClose = (): void => settle(new UpstreamStreamError('event stream from node closed before its end'));
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('error', onError);
    body.on('close', onClose);
  });
}
