/** Edits (insert, delete, substitute, swap two neighbours) turning `a` into `b`. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(
        d[i - 1]![j]! + 1,
        row[j - 1]! + 1,
        d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `word` (a typo of it: at most a third of its letters wrong, and at most
 * 3), or undefined when none is that close.
 */
export function closestMatch(word: string, candidates: readonly string[]): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate);
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

/**
 * One "did you mean" line per `--flag` in `argv` that is not a known option but is close to one
 * (`--josn` -> `--json`); `--no-x` counts as `--x`. Empty when every flag is known or none is close.
 */
export function flagSuggestions(argv: readonly string[], known: readonly string[]): string[] {
  const knownSet = new Set(known);
  const lines: string[] = [];
  for (const token of argv) {
    if (token === "--") break;
    if (!token.startsWith("--")) continue;
    const name = token.slice(2).split("=")[0]!;
    const bare = name.startsWith("no-") ? name.slice(3) : name;
    if (knownSet.has(name) || knownSet.has(bare)) continue;
    const match = closestMatch(bare, known);
    if (match !== undefined) lines.push(`Unknown option --${name}: did you mean --${match}?`);
  }
  return lines;
}
