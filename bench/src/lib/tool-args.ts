/** `--name=<number>` from a diagnostic's arguments, else `fallback`. */
export function numberOption(args: readonly string[], name: string, fallback: number): number {
  return Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
}
