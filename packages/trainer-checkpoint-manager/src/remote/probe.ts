// Read-only view of a direct primary's iteration: its control manifest, the objects that manifest
// references, and the control files copied to a local cache for a resume.
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import {
  type ArtifactManifest,
  CHECKPOINT_DESCRIPTION,
  CONTROL_MANIFEST,
  controlGenerationDir,
  type ControlManifest,
  MAX_RECORD_BYTES,
  parseIterDir,
  sha256Hex,
  writeFileAtomic,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { ManagerError, messageOf } from "../errors.js";
import { readSmallObject, storeFailure } from "../internal/store.js";
import type { ComponentTargets } from "../layout.js";
import { type ValidationRecord, validationRecord } from "../records.js";
import type { ProbedCheckpoint } from "../resume/decide.js";
import type { ValidationState } from "../types.js";

/** Largest control file (trainer.pt / data.pt) moved through memory: they hold clocks, RNG and cursors. */
export const MAX_CONTROL_BYTES = MAX_RECORD_BYTES;

/** The record of a control generation's files: a full checkpoint's description, beside trainer.pt. */
export const generationDescriptionKey = (generation: string) =>
  `${controlGenerationDir(generation)}/${CHECKPOINT_DESCRIPTION.fileName}`;

export const keyIn = (iterKey: string, name: string) => (iterKey === "" ? name : `${iterKey}/${name}`);

export function remoteInvalid(subject: string, message: string, cause?: unknown): ManagerError {
  return new ManagerError("MANAGER_REMOTE_INVALID", message, {
    kind: "refused",
    subject,
    ...(cause === undefined ? {} : { cause }),
  });
}

/** Reads and validates the control manifest of an iteration; undefined when absent. */
export async function readControl(
  store: ObjectStore,
  iterKey: string,
): Promise<{ manifest: ControlManifest; bytes: Uint8Array } | undefined> {
  const key = keyIn(iterKey, CONTROL_MANIFEST.fileName);
  const bytes = await readSmallObject(store, key);
  if (bytes === undefined) return undefined;
  try {
    return { manifest: CONTROL_MANIFEST.parse(bytes, `${store.uri}/${key}`), bytes };
  } catch (error) {
    throw remoteInvalid(
      `${store.uri}/${key}`,
      `${messageOf(error)} A manifest that does not validate fails closed; nothing is written beneath it.`,
      error,
    );
  }
}

export async function head(store: ObjectStore, key: string) {
  try {
    return await store.head(key);
  } catch (error) {
    throw storeFailure("inspect", `${store.uri}/${key}`, error);
  }
}

/** Problems of a committed iteration: each listed component's `.metadata`, each control file with its descriptor. */
export async function controlProblems(
  store: ObjectStore,
  iterKey: string,
  manifest: ControlManifest,
): Promise<string[]> {
  const problems: string[] = [];
  for (const c of manifest.components) {
    if ((await head(store, keyIn(iterKey, `${c}/.metadata`))) === undefined)
      problems.push(`${c}/.metadata is missing`);
  }
  for (const entry of [manifest.control.trainer, manifest.control.data]) {
    if (entry === null) continue;
    const info = await head(store, keyIn(iterKey, entry.path));
    if (info === undefined) problems.push(`${entry.path} is missing`);
    else if (info.size !== entry.size || (info.sha256 !== undefined && info.sha256 !== entry.sha256)) {
      problems.push(`${entry.path} does not match its descriptor`);
    }
  }
  return problems;
}

/**
 * The description a control generation holds (written before its manifest by a sidecar that
 * records digests); undefined for a generation written without one, a problem when unreadable.
 */
async function readDescription(
  store: ObjectStore,
  iterKey: string,
  manifest: ControlManifest,
): Promise<{ description: ArtifactManifest; bytes: Uint8Array } | string | undefined> {
  const key = keyIn(iterKey, generationDescriptionKey(manifest.control_generation));
  const bytes = await readSmallObject(store, key);
  if (bytes === undefined) return undefined;
  try {
    return { description: CHECKPOINT_DESCRIPTION.parse(bytes, `${store.uri}/${key}`), bytes };
  } catch (error) {
    return messageOf(error);
  }
}

/**
 * What the store lacks of a description: every described DCP file present with its size (the
 * digests are checked by the reader as it streams each file), and the control files the ones the
 * manifest names.
 */
async function describedProblems(
  store: ObjectStore,
  iterKey: string,
  manifest: ControlManifest,
  description: ArtifactManifest,
): Promise<string[]> {
  const problems: string[] = [];
  for (const c of description.physical_components) {
    if (c.kind === "file") {
      const control = manifest.control[c.name === "data" ? "data" : "trainer"];
      if (control === null || control.sha256 !== c.sha256 || control.size !== c.size)
        problems.push(`${c.path} is described otherwise than the control manifest records it`);
      continue;
    }
    const prefix = keyIn(iterKey, `${c.path}/`);
    const sizes = new Map<string, number>();
    try {
      for await (const info of store.list(prefix)) sizes.set(info.key.slice(prefix.length), info.size);
    } catch (error) {
      throw storeFailure("list", `${store.uri}/${prefix}`, error);
    }
    for (const f of c.files) {
      const size = sizes.get(f.path);
      if (size === undefined) problems.push(`${c.path}/${f.path} is missing`);
      else if (size !== f.size) problems.push(`${c.path}/${f.path} has ${size} bytes, described ${f.size}`);
    }
  }
  return problems;
}

/**
 * Probes a remote iteration (`iterKey` below the store; "" when the store is rooted at it): the
 * control manifest, each component's `.metadata`, and the control files, copied to `cacheDir`
 * and checked against their descriptors. DCP components are handed out as URIs.
 */
export async function probeRemote(
  store: ObjectStore,
  iterKey: string,
  cacheDir: string,
): Promise<ProbedCheckpoint> {
  const iterUri = iterKey === "" ? store.uri : `${store.uri}/${iterKey}`;
  const iteration = parseIterDir(iterUri.slice(iterUri.lastIndexOf("/") + 1));
  const problems: string[] = [];
  let found: Awaited<ReturnType<typeof readControl>>;
  try {
    found = await readControl(store, iterKey);
  } catch (error) {
    return { iterDir: iterUri, iteration, format: "dcp", components: {}, problems: [messageOf(error)] };
  }
  if (found === undefined) {
    return {
      iterDir: iterUri,
      iteration,
      format: "dcp",
      components: {},
      problems: [`${CONTROL_MANIFEST.fileName} is missing (a half-written iteration)`],
    };
  }
  const { manifest } = found;
  problems.push(...(await controlProblems(store, iterKey, manifest)));
  const components: ComponentTargets = {};
  for (const c of manifest.components) components[c] = `${iterUri}/${c}/`;
  const local = join(cacheDir, iterKey === "" ? "explicit" : iterKey, manifest.control_generation);
  const described = await readDescription(store, iterKey, manifest);
  if (typeof described === "string") problems.push(described);
  else if (described !== undefined) {
    problems.push(...(await describedProblems(store, iterKey, manifest, described.description)));
    if (problems.length === 0) {
      await mkdir(local, { recursive: true });
      await writeFileAtomic(join(local, CHECKPOINT_DESCRIPTION.fileName), described.bytes);
    }
  }
  for (const role of ["trainer", "data"] as const) {
    const entry = manifest.control[role];
    if (entry === null || problems.length > 0) continue;
    const bytes = await readSmallObject(store, keyIn(iterKey, entry.path), MAX_CONTROL_BYTES);
    if (bytes === undefined || bytes.byteLength !== entry.size || sha256Hex(bytes) !== entry.sha256) {
      problems.push(`${entry.path} does not match its descriptor`);
      continue;
    }
    await mkdir(local, { recursive: true });
    const path = join(local, `${role}.pt`);
    await writeFileAtomic(path, bytes);
    components[role] = path;
  }
  let validation: ValidationState | undefined;
  if (manifest.validation_publication !== null) {
    const key = keyIn(iterKey, manifest.validation_publication);
    const bytes = await readSmallObject(store, key);
    if (bytes === undefined) problems.push(`${manifest.validation_publication} is missing`);
    else {
      try {
        validation = (validationRecord.parse(bytes, `${store.uri}/${key}`) as ValidationRecord).state;
      } catch (error) {
        problems.push(messageOf(error));
      }
    }
  }
  return {
    iterDir: iterUri,
    iteration: iteration ?? manifest.iteration,
    format: "dcp",
    components,
    manifestSha256: sha256Hex(found.bytes),
    ...(validation === undefined ? {} : { validation }),
    problems,
  };
}
