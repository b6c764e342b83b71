const ONES = [
  'zero',
  'one',
  'two',
  'three',
  'four',
  'five',
  'six',
  'seven',
  'eight',
  'nine',
  'ten',
  'eleven',
  'twelve',
  'thirteen',
  'fourteen',
  'fifteen',
  'sixteen',
  'seventeen',
  'eighteen',
  'nineteen',
];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty'];

/** The minute (0–59) spelled out in English: 0 → "zero", 42 → "forty-two". */
export function minuteWord(minute: number): string {
  if (!Number.isInteger(minute) || minute < 0 || minute > 59) throw new RangeError(`minute out of range: ${minute}`);
  if (minute < 20) return ONES[minute]!;
  const tens = TENS[Math.floor(minute / 10)]!;
  return minute % 10 === 0 ? tens : `${tens}-${ONES[minute % 10]}`;
}

/** Counts whole-word occurrences, case-insensitive (so "twenty" does not match inside "twenty-one"). */
export function countWord(text: string, word: string): number {
  const escaped = word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return (text.match(new RegExp(`(?<![\\w-])${escaped}(?![\\w-])`, 'gi')) ?? []).length;
}
