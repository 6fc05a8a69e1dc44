import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

const PREFIX = "vlm/grpo/run-a/20260901120000/checkpoints";

/** A committed artifact published to a file:// archive with the real commit and publish commands. */
async function published(iteration = 300): Promise<{ root: string; dir: string; env: NodeJS.ProcessEnv }> {
  const root = await testdir("ckpt-cli-prune-");
  const dir = join(root, "run", "checkpoint_artifacts", `iter_${String(iteration).padStart(9, "0")}`);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "model.pt"), "w".repeat(2048));
  const env = { HOME: root };
  const quiet = { env };
  expect(
    await runCli(["artifact", "commit", dir, "--components", "model", "--quiet"], captureIo(quiet).io),
  ).toBe(0);
  const publish = ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX];
  expect(
    await runCli([...publish, "--bucket", `file://${root}/archive`, "--quiet"], captureIo(quiet).io),
  ).toBe(0);
  return { root, dir, env };
}

describe("ckpt artifact prune-verified", () => {
  it("end to end: commit, publish, prune: exit 0 and a JSON report of what was freed", async () => {
    const { dir, env } = await published();
    const c = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified", "--paths", dir, "--json"], c.io)).toBe(0);
    expect(JSON.parse(c.out())).toEqual({
      ok: true,
      removed: [{ path: dir, artifact_dir: dir, files: ["model.pt"], bytes: 2048 }],
      kept: [],
      freed_bytes: 2048,
      errors: [],
    });
    expect((await readdir(dir)).sort()).toEqual([".posttrain-checkpoint-artifact.json", ".uploaded"]);
  });

  it("prints a table for humans; a kept path is not a failure but is not released either (exit 3)", async () => {
    const { root, dir, env } = await published();
    const fullCheckpoint = join(root, "run", "checkpoints", "iter_000000100");
    await mkdir(fullCheckpoint, { recursive: true });
    const c = captureIo({ env });
    expect(
      await runCli(["artifact", "prune-verified", "--paths", `${dir}/model.pt,${fullCheckpoint}`], c.io),
    ).toBe(3);
    const lines = c.out().trimEnd().split("\n");
    expect(lines[0]).toMatch(/^path\s+outcome\s+freed\s+detail$/);
    expect(lines[1]).toMatch(new RegExp(`^${dir}/model\\.pt\\s+removed\\s+2\\.0 KiB\\s+model\\.pt$`));
    expect(lines[2]).toMatch(/iter_000000100\s+PRUNE_NOT_AN_ARTIFACT\s+-\s+.*retention policies/);
    expect(lines.at(-1)).toBe("released 1 artifact (2.0 KiB freed), kept 1; 1 path not released");
  });

  it("keeps an artifact with an extra local file and a legacy receipt, naming the reason", async () => {
    const first = await published(300);
    await writeFile(join(first.dir, "notes.txt"), "not archived");
    const second = await published(400);
    await writeFile(join(second.dir, ".uploaded"), "uploaded\n");
    const c = captureIo({ env: first.env });
    expect(
      await runCli(["artifact", "prune-verified", "--paths", `${first.dir},${second.dir}`, "--json"], c.io),
    ).toBe(3);
    const report = JSON.parse(c.out());
    expect(report.kept).toMatchObject([
      { path: first.dir, code: "PRUNE_UNCOVERED_LOCAL_FILE", reason: expect.stringContaining("notes.txt") },
      { path: second.dir, code: "PRUNE_LEGACY_RECEIPT" },
    ]);
    expect(report.freed_bytes).toBe(0);
  });

  it("exits 1 when an artifact errors (the destination cannot be reached), after handling the others", async () => {
    const { dir, root, env } = await published();
    const unreachable = join(root, "run", "checkpoint_artifacts", "iter_000000500");
    await mkdir(unreachable, { recursive: true });
    await writeFile(join(unreachable, "model.pt"), "x");
    expect(
      await runCli(
        ["artifact", "commit", unreachable, "--components", "model", "--quiet"],
        captureIo({ env }).io,
      ),
    ).toBe(0);
    const bytes = await readFile(join(unreachable, ".posttrain-checkpoint-artifact.json"));
    const sha = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");
    await writeFile(
      join(unreachable, ".uploaded"),
      JSON.stringify({
        schema: "posttrain.archive-marker.v1",
        kind: "artifact",
        iteration: 500,
        destination: {
          scheme: "s3",
          endpoint: "127.0.0.1:9",
          bucket: "ckpt-bkt",
          prefix: "p/iter_000000500",
        },
        files: [
          { path: ".posttrain-checkpoint-artifact.json", size: bytes.length, sha256: sha(bytes) },
          { path: "model.pt", size: 1, sha256: sha("x") },
        ],
      }),
    );
    const creds = join(root, "creds.json");
    await writeFile(
      creds,
      JSON.stringify({
        aws_access_key_id: "AKIDEXAMPLE",
        aws_secret_access_key: "do-not-print-me",
        endpoint_url: "http://127.0.0.1:9",
      }),
    );
    const c = captureIo({ env });
    const code = await runCli(
      ["artifact", "prune-verified", "--paths", `${unreachable},${dir}`, "--credentials", creds, "--json"],
      c.io,
    );
    expect(code).toBe(1);
    const report = JSON.parse(c.out());
    expect(report.ok).toBe(false);
    expect(report.errors).toMatchObject([{ path: unreachable, code: "PRUNE_REMOTE_UNREACHABLE" }]);
    expect(report.removed).toMatchObject([{ path: dir }]);
    expect(c.out()).not.toContain("do-not-print-me");
  }, 60_000);

  it("exits 2 for bad usage: no --paths, an empty list, an unreadable credentials file", async () => {
    const { env, root } = await published();
    const none = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified"], none.io)).toBe(2);
    expect(none.err()).toContain("paths");
    const empty = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified", "--paths", " , "], empty.io)).toBe(2);
    expect(empty.err()).toContain("--paths names no path");
    const creds = captureIo({ env });
    expect(
      await runCli(
        ["artifact", "prune-verified", "--paths", root, "--credentials", join(root, "nope.json")],
        creds.io,
      ),
    ).toBe(2);
  });

  it("exits 3 for a mistyped path and for an artifact kept because its archive is broken; the JSON is unchanged", async () => {
    const { root, dir, env } = await published();
    await rm(
      join(
        root,
        "archive",
        PREFIX.replace(/checkpoints$/, "checkpoint_artifacts"),
        "iter_000000300",
        "model.pt",
      ),
    );
    const mistyped = join(root, "run", "checkpoint_artifacts", "iter_000000301");
    const c = captureIo({ env });
    expect(
      await runCli(["artifact", "prune-verified", "--paths", `${mistyped},${dir}`, "--json"], c.io),
    ).toBe(3);
    const report = JSON.parse(c.out());
    expect(Object.keys(report)).toEqual(["ok", "removed", "kept", "freed_bytes", "errors"]);
    expect(report.kept).toMatchObject([
      { path: mistyped, code: "PRUNE_NOT_FOUND" },
      { path: dir, code: "PRUNE_REMOTE_MISSING" },
    ]);
    expect(report.errors).toEqual([]);
    expect((await readdir(dir)).sort()).toContain("model.pt");
    const human = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified", "--paths", mistyped], human.io)).toBe(3);
    expect(human.out()).toContain("1 path not released");
  });

  it("the advice for a damaged archive works: publish --repair re-uploads the missing object, then prune releases", async () => {
    const { root, dir, env } = await published();
    const archived = join(
      root,
      "archive",
      PREFIX.replace(/checkpoints$/, "checkpoint_artifacts"),
      "iter_000000300",
    );
    await rm(join(archived, "model.pt"));
    const kept = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified", "--paths", dir, "--json"], kept.io)).toBe(3);
    const reason: string = JSON.parse(kept.out()).kept[0].reason;
    expect(reason).toContain("ckpt artifact publish --repair");
    const publish = ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX];
    const bucket = ["--bucket", `file://${root}/archive`];
    const again = captureIo({ env });
    expect(await runCli([...publish, ...bucket], again.io)).toBe(1);
    expect(again.err()).toContain("ckpt artifact publish --repair");
    const dry = captureIo({ env });
    expect(await runCli([...publish, ...bucket, "--repair", "--dry-run"], dry.io)).toBe(0);
    expect(dry.out()).toMatch(
      /^dry run: nothing was uploaded, written or released; .* would re-upload 1 of \d+ objects: model\.pt \(missing\)\n$/,
    );
    await expect(stat(join(archived, "model.pt"))).rejects.toMatchObject({ code: "ENOENT" });
    const repair = captureIo({ env });
    expect(await runCli([...publish, ...bucket, "--repair", "--json"], repair.io)).toBe(0);
    expect(JSON.parse(repair.out())).toMatchObject({
      ok: true,
      status: "repaired",
      repaired: [{ path: "model.pt", status: "missing" }],
    });
    expect(await readFile(join(archived, "model.pt"))).toEqual(await readFile(join(dir, "model.pt")));
    expect(
      await runCli(["artifact", "prune-verified", "--paths", dir, "--quiet"], captureIo({ env }).io),
    ).toBe(0);
    expect(await readdir(dir)).not.toContain("model.pt");
  });

  it("publish --repair refuses an archive of other bytes, naming the first file, and overwrites nothing", async () => {
    const { root, dir, env } = await published();
    const archived = join(
      root,
      "archive",
      PREFIX.replace(/checkpoints$/, "checkpoint_artifacts"),
      "iter_000000300",
    );
    await writeFile(join(archived, "model.pt"), "x".repeat(2048));
    // The local artifact is committed again with other bytes: it is not what the archive declares.
    for (const record of [".posttrain-checkpoint-artifact.json", ".uploaded"]) await rm(join(dir, record));
    await writeFile(join(dir, "model.pt"), "v".repeat(2048));
    const commit = ["artifact", "commit", dir, "--components", "model", "--quiet"];
    expect(await runCli(commit, captureIo({ env }).io)).toBe(0);
    const c = captureIo({ env });
    const publish = ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX];
    expect(await runCli([...publish, "--bucket", `file://${root}/archive`, "--repair", "--json"], c.io)).toBe(
      1,
    );
    expect(JSON.parse(c.out()).error).toMatchObject({
      code: "PUBLISH_REPAIR_MISMATCH",
      message: expect.stringContaining(": model.pt is 2048 bytes with sha256 "),
    });
    expect(await readFile(join(archived, "model.pt"), "utf8")).toBe("x".repeat(2048));
  });

  it("an already released artifact counts as released: a second prune exits 0", async () => {
    const { dir, env } = await published();
    expect(
      await runCli(["artifact", "prune-verified", "--paths", dir, "--quiet"], captureIo({ env }).io),
    ).toBe(0);
    const again = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified", "--paths", dir, "--json"], again.io)).toBe(0);
    expect(JSON.parse(again.out()).kept).toMatchObject([{ code: "PRUNE_ALREADY_RELEASED" }]);
  });

  it("--dry-run decides the same, removes nothing, and says what would go and why", async () => {
    const { root, dir, env } = await published();
    const mistyped = join(root, "run", "checkpoint_artifacts", "iter_000000301");
    const c = captureIo({ env });
    expect(
      await runCli(
        ["artifact", "prune-verified", "--paths", `${dir},${mistyped}`, "--dry-run", "--json"],
        c.io,
      ),
    ).toBe(3);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({
      dry_run: true,
      removed: [],
      would_remove: [{ path: dir, artifact_dir: dir, files: ["model.pt"], bytes: 2048 }],
      kept: [{ path: mistyped, code: "PRUNE_NOT_FOUND" }],
      freed_bytes: 0,
    });
    expect(report.would_remove[0].reason).toMatch(/receipt/);
    expect(await readdir(dir)).toContain("model.pt");
    const human = captureIo({ env });
    expect(await runCli(["artifact", "prune-verified", "--paths", dir, "--dry-run"], human.io)).toBe(0);
    expect(human.out()).toMatch(/would remove/);
    expect(human.out()).toMatch(/dry run: nothing was removed/);
    expect(await readdir(dir)).toContain("model.pt");
  });

  it("--help explains the command with an example", async () => {
    const c = captureIo();
    expect(await runCli(["artifact", "prune-verified", "--help"], c.io)).toBe(0);
    expect(c.out()).toContain("--paths");
    expect(c.out()).toContain("Examples:");
    expect(c.out()).toContain("ckpt artifact prune-verified --paths");
    expect(c.out()).toMatch(/Exit codes: 0 .*released.*1 .*failed.*2 .*usage.*3 .*not released/s);
  });
});
