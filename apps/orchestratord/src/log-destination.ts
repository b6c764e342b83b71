import { destination, type DestinationStream } from 'pino';

export interface LogDestination extends DestinationStream {
  write(line: string): void;
  /** Writes whatever is buffered, synchronously (shutdown, fatal paths); a write already in flight lands on its own. */
  flushSync(): void;
}

/**
 * orchestratord's log sink: pino's sonic-boom destination, asynchronous, buffering lines until
 * 4 KB are waiting or `flushMs` passed (at thousands of admissions a second, one write(2) per line
 * cost as much as the HTTP responses). pino flushes what is left on exit.
 *
 * In buffer mode, each line encoded once on arrival: in its default utf8 mode sonic-boom appends
 * every line to one growing string and takes that string's UTF-8 length on each write, which
 * copies the whole buffer per line. Measured under the admission benchmark: ~8 KB of garbage per
 * admitted+cancelled task and about a fifth of orchestratord's CPU.
 */
export function bufferedLogDestination(fd: number, flushMs: number): LogDestination {
  const boom = destination({ dest: fd, sync: false, minLength: 4096, contentMode: 'buffer', periodicFlush: flushMs });
  // sonic-boom's types only know its utf8 mode's string writes.
  const writeBuffer = boom.write.bind(boom) as unknown as (chunk: Buffer) => boolean;
  return {
    write(line: string): void {
      writeBuffer(Buffer.from(line, 'utf8'));
    },
    flushSync(): void {
      boom.flushSync();
    },
  };
}
