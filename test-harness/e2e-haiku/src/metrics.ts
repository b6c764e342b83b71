import { request } from 'undici';

/** Scrapes a Prometheus endpoint and returns its text. */
export async function scrape(baseUrl: string): Promise<string> {
  const res = await request(new URL('/metrics', baseUrl));
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}`);
  return text;
}

/** Sum of every sample of a metric family (all label sets), 0 when absent. */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m && m[1] === name) sum += Number(m[3]);
  }
  return sum;
}
