import sonicBoom from 'sonic-boom';

declare module 'sonic-boom' {
  /** What sonic-boom 5 has and its types leave out. */
  interface SonicBoom {
    /** In `contentMode: 'buffer'` it writes Buffers. */
    write(chunk: Buffer): boolean;
    /** Retries of a write the pipe refuses as full before a synchronous write gives up (0: no bound). */
    maxWriteRetries: number;
  }
}

// CommonJS: `module.exports` is the class, with itself as its `SonicBoom` property.
const { SonicBoom } = sonicBoom;

/** A pino destination that never blocks the process and never throws. */
export interface LogDestination {
  write(line: string): void;
  /** Writes what is buffered, synchronously and bounded (shutdown, fatal paths). */
  flushSync(): void;
  /** True once a write failed (reader gone, pipe full past the bound); later lines are dropped. */
  readonly failed: boolean;
}

export interface LogDestinationOptions {
  /** Buffer lines until this many bytes wait (0: write each line at once). @default 4096 */
  minLength?: number;
  /** Longest a buffered line waits, ms (timed from the first line not yet written). @default 100 */
  flushMs?: number;
  /** Most bytes held while the reader is slow; past it lines are dropped, not queued. @default 16 MiB */
  maxBufferedBytes?: number;
  /**
   * Retries (100 ms apart) of a write the pipe refuses as full before `flushSync` gives up. Writes
   * in the background retry without limit: a slow reader delays lines, it does not lose them.
   * @default 5
   */
  flushRetries?: number;
}

/**
 * Makes writes to stdout/stderr non-blocking when they are a pipe or a socket (how a supervisor,
 * journald or a parent process reads a daemon), so a reader that stops reading can only make
 * writes fail with EAGAIN — never park the main thread inside write(2). Node's own stream for the
 * fd does it: creating it opens the fd through libuv, which sets O_NONBLOCK on pipes and sockets
 * (files never block; a terminal is reopened by libuv and left as it is).
 */
function makeNonBlocking(fd: number): void {
  if (fd === 1) void process.stdout;
  else if (fd === 2) void process.stderr;
}

/**
 * A daemon's log sink: sonic-boom, asynchronous and buffered (at thousands of lines a second one
 * write(2) per line costs as much as the HTTP work), each line encoded once (`contentMode:
 * 'buffer'`: the utf8 mode re-measures one growing string per line).
 *
 * A log destination must never stop or block the daemon. sonic-boom 4 (pino's own) retries every
 * failed synchronous write forever, so a daemon whose stdout reader went away spun on EPIPE in its
 * last `flushSync` and could only be SIGKILLed. sonic-boom 5 throws instead; here the first failure
 * (an `error` event or a throwing flush) marks the sink failed and every later line is dropped.
 */
export function logDestination(fd: number, options: LogDestinationOptions = {}): LogDestination {
  const { minLength = 4096, flushMs = 100, maxBufferedBytes = 16 * 1024 * 1024, flushRetries = 5 } = options;
  makeNonBlocking(fd);
  const boom = new SonicBoom({
    fd,
    sync: false,
    minLength,
    maxLength: maxBufferedBytes,
    contentMode: 'buffer',
  });
  let failed = false;
  // Bytes handed to sonic-boom and not yet reported written by its `write` events.
  let unwritten = 0;
  // The flush is armed by a line, not by the clock: sonic-boom's own `periodicFlush` writes its
  // (empty) buffer every period, ten write(2) calls a second from an idle daemon.
  let flushTimer: NodeJS.Timeout | undefined;
  const armFlush = (): void => {
    if (flushTimer !== undefined || minLength <= 0) return;
    flushTimer = setTimeout(flushDue, flushMs);
    flushTimer.unref();
  };
  const flushDue = (): void => {
    flushTimer = undefined;
    if (failed) return;
    try {
      // No callback: with one, sonic-boom fsyncs the file after the write, a disk flush (and two
      // thread-pool round trips) every `flushMs` of a busy daemon. Lines that arrive while a write
      // is in flight are left buffered by a bare flush; the `write` listener re-arms the timer.
      boom.flush();
    } catch {
      fail();
    }
  };
  const fail = (): void => {
    if (failed) return;
    failed = true;
    clearTimeout(flushTimer);
    try {
      boom.destroy();
    } catch {
      // Already torn down by the failure itself.
    }
  };
  boom.on('error', fail);
  boom.on('write', (n: number) => {
    unwritten = Math.max(0, unwritten - n);
    if (unwritten > 0) armFlush();
  });
  // Past `maxBufferedBytes` sonic-boom drops a line instead of queueing it: it will never be written.
  boom.on('drop', (data: Buffer | string) => {
    unwritten = Math.max(0, unwritten - (typeof data === 'string' ? Buffer.byteLength(data) : data.length));
  });
  return {
    get failed() {
      return failed;
    },
    write(line: string): void {
      if (failed) return;
      const chunk = Buffer.from(line, 'utf8');
      try {
        boom.write(chunk);
      } catch {
        fail();
        return;
      }
      unwritten += chunk.length;
      armFlush();
    },
    flushSync(): void {
      if (failed) return;
      clearTimeout(flushTimer);
      flushTimer = undefined;
      try {
        // The bound applies to this flush (and the sink's last writes), not to background writes.
        boom.maxWriteRetries = flushRetries;
        boom.flushSync();
      } catch {
        fail();
      }
    },
  };
}
