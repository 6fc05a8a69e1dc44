// `ckpt resumable`, `ckpt run status`, `ckpt evidence` and `ckpt verify` on the same damaged run
// attempts (written by the demo trainer through the checkpoint manager): they never disagree, and
// each names the file. The manager's own resume refuses the same trees with its code. Their JSON
// carries the ckpt.evidence.v2 parts (problems, the attempt and its checkpoints, with `ckpt doctor
// volume` the volume's tier), each parsing with the schema @ckpt/evidence exports for it.
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  attemptSchema,
  type Evidence,
  type EvidenceAttempt,
  type EvidenceProblem,
  evidenceSchema,
  problemSchema,
  storageSchema,
} from "@ckpt/evidence";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { train } from "../src/demo/train.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

async function json(args: string[]): Promise<{ code: number; text: string }> {
  const io = captureIo();
  const code = await runCli([...args, "--json"], io.io);
  return { code, text: io.out() };
}

const damages: Array<[string, (iterDir: string) => Promise<void>, readonly string[], string]> = [
  [
    "a flipped byte in model.pt (same size)",
    async (dir) => {
      const bytes = await readFile(join(dir, "model.pt"));
      bytes[bytes.length >> 1]! ^= 0x01; // inside the tensor data
      await writeFile(join(dir, "model.pt"), bytes);
    },
    ["VERIFY_DIGEST_MISMATCH", "model.pt"],
    "MANAGER_RESUME_IDENTITY_MISMATCH",
  ],
  [
    "a removed trainer.pt",
    (dir) => rm(join(dir, "trainer.pt")),
    ["VERIFY_FILE_MISSING", "trainer.pt"],
    "MANAGER_RESUME_INCOMPLETE",
  ],
  [
    // Not retention state: retention never releases the newest checkpoint's optimizer.
    "a removed optim.pt in the only checkpoint",
    (dir) => rm(join(dir, "optim.pt")),
    ["VERIFY_FILE_MISSING", "optim.pt"],
    "MANAGER_RESUME_INCOMPLETE",
  ],
];

describe("the operator commands and resume agree on a damaged checkpoint", () => {
  for (const [what, damage, named, refusal] of damages) {
    it(`${what}: all four say no, naming it; resume refuses with ${refusal}`, async () => {
      const outputRoot = await testdir("ckpt-cli-agree-");
      const common = {
        outputRoot,
        name: "agree",
        steps: 10,
        saveEvery: 10,
        keepOptimLast: 0,
        keepModelLast: 0,
        initSeed: 1,
        taskSeed: 2,
        dataSeed: 3,
      };
      const run = await train(common);
      const iterDir = join(run.attemptDir, "checkpoints", "iter_000000010");
      expect((await json(["verify", iterDir])).code).toBe(0);
      await damage(iterDir);
      const verdicts = {
        verify: await json(["verify", iterDir]),
        resumable: await json(["resumable", iterDir]),
        status: await json(["run", "status", run.attemptDir]),
        evidence: await json(["evidence", run.attemptDir]),
      };
      for (const [command, verdict] of Object.entries(verdicts)) {
        expect(verdict.code, command).not.toBe(0);
        expect(JSON.parse(verdict.text).ok, command).toBe(false);
        for (const word of named) expect(verdict.text, command).toContain(word);
      }
      expect(verdicts.resumable.text).toContain(refusal);
      expect(verdicts.status.text).toContain(refusal);
      expect(verdicts.evidence.text).toContain(refusal);

      // The v2 parts: every command's problems are of the closed set and hold an error; status's
      // attempt is the evidence bundle's, and both say the damaged checkpoint is not resumable.
      const { ok: _ok, ...bundle } = JSON.parse(verdicts.evidence.text) as Evidence & { ok: boolean };
      expect(evidenceSchema.parse(bundle)).toEqual(bundle);
      const status = JSON.parse(verdicts.status.text) as {
        attempt: EvidenceAttempt;
        problems: EvidenceProblem[];
      };
      expect(attemptSchema.parse(status.attempt)).toEqual(bundle.attempts[0]);
      expect(status.attempt.checkpoints[0]).toMatchObject({ iteration: 10, resume: { resumable: false } });
      const problems = {
        verify: (JSON.parse(verdicts.verify.text) as { evidence_problems: EvidenceProblem[] })
          .evidence_problems,
        resumable: (JSON.parse(verdicts.resumable.text) as { evidence_problems: EvidenceProblem[] })
          .evidence_problems,
        status: status.problems,
        evidence: bundle.problems,
      };
      for (const [command, list] of Object.entries(problems)) {
        for (const p of list) expect(problemSchema.parse(p), command).toEqual(p);
        expect(
          list.some((p) => p.severity === "error"),
          command,
        ).toBe(true);
      }
      expect(problems.verify.map((p) => p.cause)).toContain(named[0]);
      expect(problems.resumable).toMatchObject([{ cause: refusal, severity: "error" }]);
      // doctor volume judges the volume the bundle classified.
      const doctor = await json(["doctor", "volume", run.attemptDir]);
      const storage = storageSchema.parse(JSON.parse(doctor.text).storage);
      expect(storage).toMatchObject({
        tier: bundle.storage?.tier,
        filesystem: bundle.storage?.filesystem,
        probed: true,
      });
      await expect(train({ ...common, steps: 20 })).rejects.toMatchObject({ code: refusal });
    }, 120_000);
  }
});
