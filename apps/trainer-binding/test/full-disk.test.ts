// Issue 16: a save whose disk fills, over the sidecar: the trainer gets the manager's coded error
// on the wire, the pointer stays on the previous checkpoint, and the same step saves once space is
// freed. The output root is a real tmpfs mounted for the test (the suite runs as root).
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeTorchFile } from "@ckpt/tensors";
import { fillDisk, smallDisk } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { toWireError } from "../src/protocol/connection.js";
import { parseRequest, type Request } from "../src/protocol/messages.js";
import { SidecarSession } from "../src/session.js";

const MiB = 1024 * 1024;

let nextId = 1;
function req(op: string, args: Record<string, unknown> = {}): Request {
  const parsed = parseRequest(JSON.stringify({ id: nextId++, op, args }));
  if ("error" in parsed) throw parsed.error;
  return parsed;
}

type Save = { id: string; step: number; dir: string; components: Array<{ name: string; path: string }> };

async function beginAndWrite(session: SidecarSession, step: number): Promise<Save> {
  const save = (await session.handle(req("begin_save", { step }))).result as { save: Save };
  for (const c of save.save.components) {
    if (!["model", "optim", "trainer"].includes(c.name)) continue;
    await writeTorchFile(c.path, {
      tree: { step, [c.name]: { dtype: "U8", shape: [4] } },
      provideTensor: () => new Uint8Array(4),
      sync: false,
    });
  }
  return save.save;
}

describe("a sidecar save on a full disk", () => {
  it("answers commit with MANAGER_NO_SPACE, keeps the pointer, and commits the same step once space is freed", async () => {
    const disk = await smallDisk(4 * MiB);
    const session = new SidecarSession({ log: () => {}, serverVersion: "test" });
    await session.handle(req("hello", { protocol: [1] }));
    await session.handle(
      req("open", {
        config: { save_every: 2, save_async: false },
        output_root: disk,
        project: "p",
        group: "g",
        name: "n",
      }),
    );
    const first = await beginAndWrite(session, 2);
    await session.handle(req("commit", { save_id: first.id }));
    const pointer = join(first.dir, "..", "latest_checkpoint.txt");
    const committed = await readFile(pointer, "utf8");

    const second = await beginAndWrite(session, 4);
    const filler = await fillDisk(disk, 0);
    const error = await session.handle(req("commit", { save_id: second.id })).catch((e: unknown) => e);
    expect(toWireError(error)).toMatchObject({ code: "MANAGER_NO_SPACE", kind: "failed", source: "manager" });
    expect(toWireError(error).message).toContain("free space and run again");
    expect(await readFile(pointer, "utf8")).toBe(committed);
    await rm(filler);

    const again = await beginAndWrite(session, 4);
    await session.handle(req("commit", { save_id: again.id }));
    expect(await readFile(pointer, "utf8")).not.toBe(committed);
    await session.handle(req("finalize"));
  });
});
