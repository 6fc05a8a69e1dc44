import type { CliIo } from "./io.js";

// Human renderings shared by every command: aligned tables, byte counts, coloured verdicts.

const COLORS = { red: 31, green: 32, yellow: 33 } as const;

/** `text` in a colour when the terminal allows it (see CliIo.color), else unchanged. */
export function paint(io: Pick<CliIo, "color">, color: keyof typeof COLORS, text: string): string {
  return io.color ? `\x1b[${COLORS[color]}m${text}\x1b[0m` : text;
}

export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * Aligned columns separated by two spaces. Columns in `rightAligned` are padded on the left (for
 * numbers); the last column is never padded so long details do not drag trailing spaces.
 */
export function table(
  header: string[],
  rows: string[][],
  rightAligned: ReadonlySet<number> = new Set(),
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) =>
        rightAligned.has(i) ? c.padStart(widths[i]!) : i === cells.length - 1 ? c : c.padEnd(widths[i]!),
      )
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}
