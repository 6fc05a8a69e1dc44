import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { openStore } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

let dir = "";
beforeEach(async () => {
  dir = await testdir("ckpt-cli-store-");
});
const bytes = (s: string) => new TextEncoder().encode(s);

describe("ckpt store download / copy", () => {
  it("downloads a prefix, then skips what is already there", async () => {
    const src = await openStore("memory://cli-store-dl/run/iter_000000100");
    await src.put("model.pt", bytes("weights"));
    await src.put("optim/__0_0.distcp", bytes("shard"));
    const local = join(dir, "out");
    const c = captureIo();
    expect(await runCli(["store", "download", src.uri, local], c.io)).toBe(0);
    expect(c.out()).toBe(`${local}\n`);
    expect(c.err()).toContain("2 downloaded");
    expect(await readFile(join(local, "optim", "__0_0.distcp"), "utf8")).toBe("shard");
    const again = captureIo();
    expect(await runCli(["store", "download", src.uri, local, "--json"], again.io)).toBe(0);
    expect(JSON.parse(again.out())).toMatchObject({
      ok: true,
      transferred: [],
      skipped: [{ key: "model.pt" }, { key: "optim/__0_0.distcp" }],
    });
  });

  it("skips a same-size local file only on a digest match when the store records one; replaces it otherwise", async () => {
    const src = await openStore("memory://cli-store-dl-digest/run/iter_000000100");
    const sha = (s: string) => createHash("sha256").update(s).digest("hex");
    await src.put("model.pt", bytes("weights"), { sha256: sha("weights") });
    await src.put("kept.pt", bytes("kept"), { sha256: sha("kept") });
    await src.put("undigested.bin", bytes("plain"));
    const local = join(dir, "out");
    expect(await runCli(["store", "download", src.uri, local, "--quiet"], captureIo().io)).toBe(0);
    await writeFile(join(local, "model.pt"), "WEIGHTS");
    await writeFile(join(local, "undigested.bin"), "PLAIN");
    const again = captureIo();
    expect(await runCli(["store", "download", src.uri, local, "--json"], again.io)).toBe(0);
    expect(JSON.parse(again.out())).toMatchObject({
      transferred: [{ key: "model.pt" }],
      replaced: [{ key: "model.pt" }],
      skipped: [{ key: "kept.pt" }, { key: "undigested.bin" }],
    });
    expect(await readFile(join(local, "model.pt"), "utf8")).toBe("weights");
    await writeFile(join(local, "model.pt"), "WEIGHTS");
    const human = captureIo();
    expect(await runCli(["store", "download", src.uri, local], human.io)).toBe(0);
    expect(human.err()).toContain("1 replaced (same size, different digest)");
  });

  it("copies a prefix between stores", async () => {
    const src = await openStore("memory://cli-store-cp-src/run/iter_000000100");
    await src.put("model.pt", bytes("weights"));
    const dstUri = `file://${join(dir, "permanent")}`;
    const c = captureIo();
    expect(await runCli(["store", "copy", src.uri, dstUri, "--json"], c.io)).toBe(0);
    expect(JSON.parse(c.out())).toMatchObject({
      ok: true,
      transferred: [{ key: "model.pt", size: 7 }],
      bytes: 7,
    });
    expect(await readFile(join(dir, "permanent", "model.pt"), "utf8")).toBe("weights");
  });

  it("exits 2 for a bad URI and lists examples in --help", async () => {
    const c = captureIo();
    expect(await runCli(["store", "copy", "nowhere", `file://${dir}`], c.io)).toBe(2);
    const help = captureIo();
    expect(await runCli(["store", "download", "--help"], help.io)).toBe(0);
    expect(help.out()).toContain("Examples:");
  });
});
