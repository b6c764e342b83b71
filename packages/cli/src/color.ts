/** ANSI styles `llorch` uses; identity functions when colour is off. */
export interface Paint {
  readonly enabled: boolean;
  red(text: string): string;
  yellow(text: string): string;
  green(text: string): string;
  dim(text: string): string;
}

/**
 * Colour only on a terminal and never with `NO_COLOR` set to anything non-empty (no-color.org):
 * piped output, files and CI logs stay plain text.
 */
export function paintFor(stream: { isTTY?: boolean }, env: Readonly<Record<string, string | undefined>>): Paint {
  const enabled = stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === '');
  const style =
    (open: number, close: number) =>
    (text: string): string =>
      enabled ? `\u001b[${open}m${text}\u001b[${close}m` : text;
  return { enabled, red: style(31, 39), yellow: style(33, 39), green: style(32, 39), dim: style(2, 22) };
}

/** No colour at all (tests, JSON output). */
export const PLAIN: Paint = paintFor({}, {});
