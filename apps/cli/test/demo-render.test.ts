import { describe, expect, it } from "vitest";
import { renderDemo } from "../src/commands/demo.js";
import { type DemoReport, retentionSummary } from "../src/demo/run-demo.js";

const DIR = "/home/me/ckpt-demo";
const RUN = "runs/demo/mlp/main/20261203063025";

/** A demo report as runDemo writes it, with `resume` as given. */
function report(resume: DemoReport["resume"], resumeSummary: string): DemoReport {
  const step = (id: string, summary: string) => ({
    id,
    title: `the ${id} step`,
    status: "ok" as const,
    summary,
    ms: 1,
  });
  return {
    schema: "ckpt.demo-report.v1",
    ok: true,
    complete: true,
    dir: DIR,
    fault: "short",
    steps: [
      step("train", `pid 7: full checkpoints at 20, 40; ${retentionSummary([])}`),
      step("resume", resumeSummary),
      step("publish", `published 2 files (14569 bytes) to file://${DIR}/archive/demo/iter_000000030`),
    ],
    resume,
    inventory: [
      {
        what: "latest full checkpoint (iter 80) model",
        where: `${RUN}/checkpoints/iter_000000080/model.pt`,
        bytes: 14154,
        sha256: "a".repeat(64),
        verified: "committed by the manager",
      },
      {
        what: "staged artifact model",
        where: "stage/iter_000000030/model.pt",
        bytes: 14154,
        sha256: "b".repeat(64),
        verified: "digest checked on fetch",
      },
      {
        what: "materialized HF shard",
        where: "hf-model/model-00001-of-00003.safetensors",
        bytes: 6000,
        sha256: "c".repeat(64),
        verified: "verified by the materializer",
      },
    ],
    wall_ms: 9000,
  };
}

const FAULT = {
  mode: "short" as const,
  what: `truncated model.pt (${DIR}/${RUN}/checkpoints/iter_000000040)`,
};

describe("ckpt demo's human report", () => {
  it("shows a refused resume as [no], never [ok], and counts it as refused", () => {
    const text = renderDemo(
      report(
        {
          fault: FAULT,
          decision: {
            kind: "refused",
            code: "MANAGER_RESUME_INCOMPLETE",
            reason: `${DIR}/${RUN}/checkpoints/iter_000000040 lacks model.pt`,
          },
        },
        `resume refused (MANAGER_RESUME_INCOMPLETE): ${DIR}/${RUN}/checkpoints/iter_000000040 lacks model.pt`,
      ),
    );
    expect(text).toContain("[no] the resume step\n");
    expect(text).not.toContain("[ok] the resume step");
    expect(text).toContain("2 ok, 1 refused in 9.0 s");
    expect(text).toContain(
      `resume decision: refused (MANAGER_RESUME_INCOMPLETE) — ${RUN}/checkpoints/iter_000000040 lacks model.pt`,
    );
  });

  it("writes paths relative to the demo directory, keeps retention short, and ends with what to run next", () => {
    const text = renderDemo(
      report(
        {
          fault: FAULT,
          decision: {
            kind: "checkpoint",
            iteration: 40,
            dir: `${DIR}/${RUN}/checkpoints/iter_000000040`,
            reason: `resume=auto: latest complete checkpoint of ${DIR}/${RUN} (iter 40)`,
          },
          load: { ok: true },
          continued_to: 80,
        },
        `resumed from iteration 40; saved 60, 80; ${retentionSummary(["iter_000000020/optim.pt", "iter_000000020", "iter_000000040/optim.pt"])}`,
      ),
    );
    expect(text).toContain(
      "     resumed from iteration 40; saved 60, 80; retention removed iter 20; optim.pt of iter 40\n",
    );
    expect(text).toContain("     published 2 files (14569 bytes) to archive/demo/iter_000000030\n");
    expect(text).toContain(
      `resume decision: iteration 40 — resume=auto: latest complete checkpoint of ${RUN} (iter 40)`,
    );
    // The absolute directory appears only where it anchors the relative paths.
    const absolute = text.split("\n").filter((line) => line.includes(DIR));
    expect(absolute).toEqual([
      `3 ok in 9.0 s; everything is under ${DIR}`,
      `what next (from ${DIR}):`,
      expect.stringMatching(/^ {2}ckpt demo --dir \/home\/me\/ckpt-demo --clean +# remove everything/),
    ]);
    const next = text
      .slice(text.indexOf("what next"))
      .split("\n")
      .slice(1)
      .map((l) => l.trim());
    expect(next.map((l) => l.split(/ +#/)[0]!.trim())).toEqual([
      `ckpt run status ${RUN}`,
      `ckpt verify ${RUN}/checkpoints/iter_000000080`,
      "ckpt fingerprint stage/iter_000000030",
      "ckpt inspect hf-model",
      `ckpt demo --dir ${DIR} --clean`,
    ]);
    for (const line of text.split("\n").filter((l) => l.startsWith("     ")))
      expect(line.length).toBeLessThan(100);
  });

  it("summarises retention by checkpoint, then by component file of the checkpoints that stayed", () => {
    expect(retentionSummary([])).toBe("retention removed nothing");
    expect(
      retentionSummary([
        "iter_000000020/optim.pt",
        "iter_000000020",
        "iter_000000040/optim.pt",
        "iter_000000060/optim.pt",
      ]),
    ).toBe("retention removed iter 20; optim.pt of iter 40, 60");
  });
});
