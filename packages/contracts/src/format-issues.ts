import type { z } from 'zod';

/** `a.b[2].c: message` for every issue, one per line: config errors report everything at once. */
export function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => {
      const path = i.path.reduce<string>((acc, seg) => (typeof seg === 'number' ? `${acc}[${seg}]` : acc ? `${acc}.${String(seg)}` : String(seg)), '');
      return `${path || '(root)'}: ${i.message}`;
    })
    .join('\n');
}
