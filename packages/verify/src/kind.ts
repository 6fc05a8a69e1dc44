import { lstat, open } from "node:fs/promises";
import { basename, dirname, extname, join } from "node:path";
import { ARTIFACT_MANIFEST, CONTROL_MANIFEST, MULTI_ROLE_SUCCESS, STAGED_RECORD } from "@ckpt/manifest";
import { VerifyError } from "./errors.js";

/** What `verifyPath` can judge. */
export const VERIFY_KINDS = ["checkpoint", "artifact", "stage", "dcp", "hf", "torch", "safetensors"] as const;
export type VerifyKind = (typeof VERIFY_KINDS)[number];

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/** A torch.save zip (`PK`) or a legacy pickle (protocol 2) by its first bytes. */
async function startsLikeTorch(path: string): Promise<boolean> {
  const handle = await open(path, "r");
  try {
    const head = new Uint8Array(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return (
      (bytesRead === 4 && head[0] === 0x50 && head[1] === 0x4b) || (head[0] === 0x80 && head[1] === 0x02)
    );
  } finally {
    await handle.close();
  }
}

/**
 * What a path is, from its name and the records in it (first match wins): a file by extension or
 * signature; a directory with `.staged.json` (stage), the artifact manifest or an `iter_*` under
 * `checkpoint_artifacts/` (artifact), `_SUCCESS` / `.posttrain-manifest.json` / `model.pt` /
 * `trainer.pt` / an `iter_*` name (full checkpoint), `.metadata` (DCP), `model.safetensors[.index.json]` (HF).
 * Throws `VERIFY_PATH_MISSING` or `VERIFY_UNKNOWN_KIND` (kind `input`).
 */
export async function detectVerifyKind(path: string): Promise<VerifyKind> {
  let info: Awaited<ReturnType<typeof lstat>>;
  try {
    info = await lstat(path);
  } catch (cause) {
    throw new VerifyError(
      "VERIFY_PATH_MISSING",
      `verify ${path}: no such file or directory. Check the path.`,
      {
        kind: "input",
        subject: path,
        cause,
      },
    );
  }
  if (info.isFile()) {
    const ext = extname(path);
    if (ext === ".safetensors") return "safetensors";
    if ([".pt", ".pth", ".bin"].includes(ext) || (await startsLikeTorch(path))) return "torch";
  } else if (info.isDirectory()) {
    const has = (name: string) => exists(join(path, name));
    const iterName = /^iter_\d+$/.test(basename(path));
    if (await has(STAGED_RECORD.fileName)) return "stage";
    if (
      (await has(ARTIFACT_MANIFEST.fileName)) ||
      (iterName && basename(dirname(path)) === "checkpoint_artifacts")
    )
      return "artifact";
    if ((await has(MULTI_ROLE_SUCCESS.fileName)) || (await has(CONTROL_MANIFEST.fileName)))
      return "checkpoint";
    if ((await has("model.pt")) || (await has("trainer.pt"))) return "checkpoint";
    if (await has(".metadata")) return "dcp";
    if ((await has("model.safetensors.index.json")) || (await has("model.safetensors"))) return "hf";
    if (iterName) return "checkpoint";
  }
  throw new VerifyError(
    "VERIFY_UNKNOWN_KIND",
    `verify ${path}: not a checkpoint ckpt can judge (a .pt/.safetensors file, an iter_* checkpoint or artifact, ` +
      "a fetched stage, a DCP directory with .metadata, a Hugging Face directory). Pass --kind to say what it is.",
    { kind: "input", subject: path },
  );
}
