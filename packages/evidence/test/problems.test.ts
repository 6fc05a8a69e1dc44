// The closed set of problems: every code a package below the bundle declares maps onto it, found
// the same way tools/docs/error-codes.mjs finds codes (the packages' code unions and _CODES lists).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { collectCodeUses, documentedCodes, ROOT, sourceUnits } from "../../../tools/docs/error-codes.mjs";
import { explainProblem, mappedLibraryCodes, PROBLEM_CODES, PROBLEMS, problemCodeOf } from "../src/index.js";

type Units = ReturnType<typeof sourceUnits>;

/** The workspace packages a unit depends on, transitively: every library whose errors can reach it. */
function below(units: Units, name: string): Set<string> {
  const found = new Set<string>();
  const visit = (unit: string) => {
    for (const dep of units.find((u) => u.unit === unit)?.dependsOn ?? [])
      if (!found.has(dep)) {
        found.add(dep);
        visit(dep);
      }
  };
  visit(name);
  return found;
}

/** The codes the given packages declare that have no problem mapped (the exhaustive check). */
function unmapped(
  uses: ReturnType<typeof collectCodeUses>,
  packages: Set<string>,
  mapped: readonly string[],
) {
  const known = new Set(mapped);
  return [...uses]
    .filter(([code, { declared }]) => [...declared].some((u) => packages.has(u)) && !known.has(code))
    .map(([code]) => code)
    .sort();
}

describe("problem codes", () => {
  const units = sourceUnits();
  const uses = collectCodeUses();
  const libraries = below(units, "@ckpt/evidence");
  const libraryCodes = [...uses]
    .filter(([, { declared }]) => [...declared].some((u) => libraries.has(u)))
    .map(([code]) => code);

  it("every error code a package below the bundle declares maps onto a problem", () => {
    expect(libraries.has("@ckpt/trainer-checkpoint-manager") && libraries.has("@ckpt/tensors")).toBe(true);
    expect(libraryCodes.length).toBeGreaterThan(300);
    expect(
      unmapped(uses, libraries, mappedLibraryCodes()),
      "map these in packages/evidence/src/problems.ts",
    ).toEqual([]);
    for (const code of libraryCodes) expect(PROBLEM_CODES).toContain(problemCodeOf(code));
  }, 120_000);

  it("the check fails on a code without a mapping, and the map names no code nobody declares", () => {
    expect(
      unmapped(
        uses,
        libraries,
        mappedLibraryCodes().filter((c) => c !== "VERIFY_DIGEST_MISMATCH"),
      ),
    ).toEqual(["VERIFY_DIGEST_MISMATCH"]);
    const declared = new Set(libraryCodes);
    expect(mappedLibraryCodes().filter((code) => !declared.has(code))).toEqual([]);
  }, 120_000);

  it("only INTERNAL maps to INTERNAL_FAILURE; an unknown code is one", () => {
    expect(libraryCodes.filter((code) => problemCodeOf(code) === "INTERNAL_FAILURE")).toEqual(["INTERNAL"]);
    expect(problemCodeOf("NO_SUCH_CODE_ANYWHERE")).toBe("INTERNAL_FAILURE");
    expect(problemCodeOf("ELOOP")).toBe("SYMLINK_LOOP");
  });

  it("problem codes are their own vocabulary: none is also a library code", () => {
    const all = new Set(uses.keys());
    const evidenceOnly = PROBLEM_CODES.filter((code) => {
      const use = uses.get(code);
      return use === undefined || [...use.declared, ...use.raised].every((u) => u === "@ckpt/evidence");
    });
    expect(evidenceOnly).toEqual([...PROBLEM_CODES]);
    expect(PROBLEM_CODES.every((code) => all.has(code))).toBe(true);
  });

  it("each problem has a meaning and a remedy, is explained, and is documented in docs/troubleshooting.md", () => {
    const documented = documentedCodes(readFileSync(join(ROOT, "docs", "troubleshooting.md"), "utf8"));
    for (const code of PROBLEM_CODES) {
      expect(PROBLEMS[code].meaning.length).toBeGreaterThan(20);
      expect(PROBLEMS[code].remedy.length).toBeGreaterThan(10);
      expect(explainProblem(code)).toEqual({ code, ...PROBLEMS[code] });
      expect(documented.has(code), `${code} in docs/troubleshooting.md`).toBe(true);
    }
    expect(explainProblem("VERIFY_DIGEST_MISMATCH")).toBeUndefined();
  });
});
