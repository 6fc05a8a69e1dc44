import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  CLI_REFERENCE,
  loadBuiltCli,
  REMEDY,
  recordBuilder,
  renderCliReference,
} from "../../tools/docs/gen-cli-reference.mjs";

describe("docs/cli.md", () => {
  it("is what the generator makes from the built CLI's yargs definitions (fails when stale)", async () => {
    const expected = await renderCliReference(await loadBuiltCli());
    const current = readFileSync(CLI_REFERENCE, "utf8");
    expect(
      current === expected,
      `docs/cli.md is stale: run \`${REMEDY}\` (after building the CLI) and commit it`,
    ).toBe(true);
  });

  it("the generator records positionals, options and examples however a builder chains them", () => {
    const recorded = recordBuilder(((y: {
      positional: (...a: unknown[]) => typeof y;
      option: (...a: unknown[]) => typeof y;
      options: (...a: unknown[]) => typeof y;
      example: (...a: unknown[]) => typeof y;
      check: (...a: unknown[]) => typeof y;
    }) =>
      y
        .positional("dir", { type: "string", describe: "where" })
        .check(() => true)
        .option("fast", { type: "boolean", default: false })
        .options({ n: { type: "number" } })
        .example("ckpt x a", "one")
        .example([["ckpt x b", "two"]])) as never);
    expect(recorded.positionals.map((p) => p.name)).toEqual(["dir"]);
    expect(recorded.options.map((o) => o.name)).toEqual(["fast", "n"]);
    expect(recorded.examples).toEqual([
      { command: "ckpt x a", description: "one" },
      { command: "ckpt x b", description: "two" },
    ]);
  });
});
