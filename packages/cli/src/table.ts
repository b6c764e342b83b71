/** Styles one padded cell (colour); gets the column and row index (row 0 is the header). */
export type CellStyle = (cell: string, col: number, row: number) => string;

/** Renders rows as an aligned text table (first row is the header); `style` sees padded cells. */
export function renderTable(rows: ReadonlyArray<ReadonlyArray<string>>, style?: CellStyle): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => (r[col] ?? '').length)));
  const line = (r: ReadonlyArray<string>, row: number): string =>
    r
      .map((cell, i) => {
        const padded = i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0);
        return style === undefined ? padded : style(padded, i, row);
      })
      .join('  ')
      .trimEnd();
  return [
    line(rows[0]!, 0),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.slice(1).map((r, i) => line(r, i + 1)),
  ].join('\n');
}
