import { basename, join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  type ArtifactManifest,
  type CheckpointFormat,
  commitLast,
  fsyncDirectory,
  LOGICAL_COMPONENTS,
  logicalComponentName,
  type LogicalComponent,
  logicalComponentOf,
  PHYSICAL_COMPONENTS,
  type PhysicalComponent,
  type PhysicalComponentName,
  physicalComponentPath,
} from "@ckpt/manifest";
import { ArchivePublisherError, kindOf, messageOf } from "./errors.js";
import { entryKind, type HashEvent, hashLocal, iterDirOf } from "./internal/local.js";
import { localNoSpace } from "./internal/space.js";
import { drain, withEvents } from "@ckpt/progress";

export interface CommitArtifactOptions {
  /** Must equal the iteration in the directory name when given. */
  iteration?: number;
  format: CheckpointFormat;
  /** The logical plan; default the full plan `[model, optimizer, training_state]`. */
  components?: readonly LogicalComponent[];
  /** Recorded as `producer`, e.g. `ckpt-trainer/0.1.0`. */
  producer?: string;
  signal?: AbortSignal;
}

/** What `commitArtifact` wrote. */
export interface CommitArtifactResult {
  /** Absolute path of the written `.posttrain-checkpoint-artifact.json`. */
  manifestPath: string;
  manifest: ArtifactManifest;
  /** Payload bytes described by the manifest. */
  bytes: number;
  /** Component payloads found on disk but outside the plan, left out of the manifest. */
  ignored: string[];
}

export type CommitEvent = HashEvent | { type: "committed"; path: string };

/** Where a physical component is expected on disk, as decided from the plan and the directory listing. */
export interface ComponentLayout {
  name: PhysicalComponentName;
  kind: "file" | "dir";
  path: string;
}

type Presence = Record<PhysicalComponentName, { file: boolean; dir: boolean }>;

const REQUIRED: ReadonlySet<PhysicalComponentName> = new Set(["model", "optim", "trainer"]);
const ALWAYS_FILE: ReadonlySet<PhysicalComponentName> = new Set(["trainer", "data"]);

/** The kinds a component may take under a format (optim may be sharded under consolidated). */
function allowedKinds(name: PhysicalComponentName, format: CheckpointFormat): Array<"file" | "dir"> {
  if (ALWAYS_FILE.has(name)) return ["file"];
  if (format === "dcp") return ["dir"];
  return name === "optim" ? ["file", "dir"] : ["file"];
}

/** Checks a logical plan: non-empty, known names, each once. Returns it in canonical order. Pure. */
export function normalizeComponents(typed: readonly string[]): LogicalComponent[] {
  const components = typed.map(logicalComponentName);
  const problem =
    components.length === 0
      ? "the plan is empty"
      : components.find((c) => !(LOGICAL_COMPONENTS as readonly string[]).includes(c)) !== undefined
        ? `unknown component ${JSON.stringify(components.find((c) => !(LOGICAL_COMPONENTS as readonly string[]).includes(c)))}`
        : new Set(components).size !== components.length
          ? "a component is listed twice"
          : undefined;
  if (problem !== undefined) {
    throw new ArchivePublisherError(
      "COMMIT_BAD_COMPONENTS",
      `commit artifact: ${problem}. Components are a non-empty subset of ${LOGICAL_COMPONENTS.join(", ")}.`,
      { kind: "input" },
    );
  }
  return LOGICAL_COMPONENTS.filter((c) => components.includes(c));
}

/**
 * Decides which physical components the manifest describes and where they are, from the plan
 * and what exists on disk. Every listed logical component needs its main payload; optional
 * ones (data, old, ref) are described when present; payloads of unlisted components are
 * ignored and returned as such. Pure.
 */
export function planCommit(
  dir: string,
  format: CheckpointFormat,
  plan: readonly LogicalComponent[],
  presence: Presence,
): { components: ComponentLayout[]; ignored: string[] } {
  const components: ComponentLayout[] = [];
  const ignored: string[] = [];
  for (const name of PHYSICAL_COMPONENTS) {
    const found = presence[name];
    const present = (["file", "dir"] as const).filter((k) => found[k]);
    if (!plan.includes(logicalComponentOf(name))) {
      ignored.push(...present.map((k) => physicalComponentPath(name, k)));
      continue;
    }
    const allowed = allowedKinds(name, format);
    const usable = present.filter((k) => allowed.includes(k));
    const wrong = present.filter((k) => !allowed.includes(k));
    const expected = allowed.map((k) => physicalComponentPath(name, k)).join(" or ");
    if (usable.length > 1) {
      throw new ArchivePublisherError(
        "COMMIT_COMPONENT_CONFLICT",
        `commit ${dir}: both ${name}.pt and ${name}/ exist; the manifest can describe only one. Remove the stale one.`,
        { kind: "refused", subject: join(dir, name) },
      );
    }
    if (wrong.length > 0) {
      throw new ArchivePublisherError(
        "COMMIT_COMPONENT_CONFLICT",
        `commit ${dir}: found ${physicalComponentPath(name, wrong[0]!)}, but format ${format} stores ${name} as ${expected}. ` +
          "Pass the format the trainer wrote, or remove the stale payload.",
        { kind: "refused", subject: join(dir, physicalComponentPath(name, wrong[0]!)) },
      );
    }
    if (usable.length === 0) {
      if (REQUIRED.has(name)) {
        throw new ArchivePublisherError(
          "COMMIT_COMPONENT_MISSING",
          `commit ${dir}: the plan lists ${logicalComponentOf(name)}, but ${expected} is missing. ` +
            "Write the payload first, or commit with the components that were saved.",
          { kind: "refused", subject: join(dir, expected) },
        );
      }
      continue;
    }
    components.push({ name, kind: usable[0]!, path: physicalComponentPath(name, usable[0]!) });
  }
  return { components, ignored };
}

async function probePresence(dir: string): Promise<Presence> {
  const presence = {} as Presence;
  for (const name of PHYSICAL_COMPONENTS) {
    const file = await entryKind(join(dir, physicalComponentPath(name, "file")));
    const asDir = await entryKind(join(dir, physicalComponentPath(name, "dir")));
    for (const [path, kind] of [
      [physicalComponentPath(name, "file"), file],
      [physicalComponentPath(name, "dir"), asDir],
    ] as const) {
      if (kind === "other") {
        throw new ArchivePublisherError(
          "COMMIT_COMPONENT_CONFLICT",
          `commit ${dir}: ${path} is neither a regular file nor a directory (a symbolic link?). Replace it with the payload itself.`,
          { kind: "refused", subject: join(dir, path) },
        );
      }
    }
    presence[name] = { file: file === "file", dir: asDir === "dir" };
  }
  return presence;
}

/** Refuses when the directory is already committed (anything at the manifest's name counts). */
async function refuseIfCommitted(dir: string): Promise<void> {
  if ((await entryKind(join(dir, ARTIFACT_MANIFEST.fileName))) !== "absent") {
    throw new ArchivePublisherError(
      "PUBLISH_ALREADY_COMMITTED",
      `commit ${dir}: it already holds ${ARTIFACT_MANIFEST.fileName}; a committed artifact is never committed again. ` +
        "Publish it as it is, or save the step into a new iteration directory.",
      { kind: "refused", subject: join(dir, ARTIFACT_MANIFEST.fileName) },
    );
  }
}

/**
 * Commits an `iter_*` artifact directory whose payloads are written: describes the planned
 * components (sizes and SHA-256), fsyncs them, and writes `.posttrain-checkpoint-artifact.json`
 * last and atomically. A directory already committed is refused before anything is read.
 */
export async function* commitArtifactIter(
  dir: string,
  options: CommitArtifactOptions,
): AsyncGenerator<CommitEvent, CommitArtifactResult> {
  const { root, iteration } = iterDirOf(
    dir,
    "COMMIT_NOT_ITER_DIR",
    "commit",
    "Artifacts live in checkpoint_artifacts/iter_000000300-style directories.",
    "COMMIT_FULL_CHECKPOINT",
  );
  const name = basename(root);
  if (options.iteration !== undefined && options.iteration !== iteration) {
    throw new ArchivePublisherError(
      "COMMIT_ITERATION_MISMATCH",
      `commit ${root}: iteration ${options.iteration} was given but the directory is ${name} (iteration ${iteration}). ` +
        "Pass the matching iteration or commit the right directory.",
      { kind: "input", subject: root },
    );
  }
  const plan = normalizeComponents(options.components ?? LOGICAL_COMPONENTS);
  await refuseIfCommitted(root);
  const { components, ignored } = planCommit(root, options.format, plan, await probePresence(root));

  const fileComponents = components.filter((c) => c.kind === "file").map((c) => join(root, c.path));
  const dirComponents = components.filter((c) => c.kind === "dir").map((c) => join(root, c.path));
  const digests = yield* withEvents<CommitEvent, Awaited<ReturnType<typeof hashLocal>>>(
    (emit, signal) => hashLocal({ files: fileComponents, dirs: dirComponents }, emit, signal),
    options.signal,
  );
  const physical: PhysicalComponent[] = components.map((c): PhysicalComponent => {
    const absolute = join(root, c.path);
    if (c.kind === "file") {
      const digest = digests.files.get(absolute)!;
      return { name: c.name, kind: "file", path: c.path, size: digest.size, sha256: digest.sha256 };
    }
    const tree = digests.dirs.get(absolute)!;
    if (tree.files.length === 0) {
      throw new ArchivePublisherError(
        "COMMIT_COMPONENT_MISSING",
        `commit ${root}: ${c.path}/ is empty. Write the ${c.name} shards first.`,
        { kind: "refused", subject: absolute },
      );
    }
    return {
      name: c.name,
      kind: "dir",
      path: c.path,
      files: tree.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 })),
    };
  });
  const manifest: ArtifactManifest = {
    schema: "posttrain.checkpoint-artifact.v1",
    iteration,
    format: options.format,
    logical_components: plan,
    physical_components: physical,
    ...(options.producer === undefined ? {} : { producer: options.producer }),
  };
  let bytes: Uint8Array;
  try {
    bytes = ARTIFACT_MANIFEST.serialize(manifest);
  } catch (error) {
    throw new ArchivePublisherError(
      "COMMIT_BAD_COMPONENTS",
      `commit ${root}: the described components do not form a valid manifest: ${messageOf(error)}`,
      { kind: "input", subject: root, cause: error },
    );
  }
  // A concurrent committer may have finished while we hashed: check again right before writing.
  await refuseIfCommitted(root);
  const manifestPath = join(root, ARTIFACT_MANIFEST.fileName);
  const payloadFiles = [
    ...fileComponents,
    ...dirComponents.flatMap((d) => digests.dirs.get(d)!.files.map((f) => join(d, f.path))),
  ];
  try {
    // Component directories are entries of the root: make them durable before the commit record.
    await fsyncDirectory(root);
    await commitLast(
      payloadFiles.map((path) => ({ path, written: true as const })),
      { path: manifestPath, data: bytes },
    );
  } catch (error) {
    const full = localNoSpace(
      manifestPath,
      bytes.byteLength,
      error,
      "Nothing was committed: the artifact has no manifest and its payload is unchanged.",
    );
    if (full !== undefined) throw full;
    throw new ArchivePublisherError("PUBLISH_LOCAL_WRITE_FAILED", `commit ${root}: ${messageOf(error)}`, {
      kind: kindOf(error) === "transient" ? "transient" : "failed",
      subject: manifestPath,
      cause: error,
    });
  }
  yield { type: "committed", path: manifestPath };
  const total = physical.reduce(
    (sum, c) => sum + (c.kind === "file" ? c.size : c.files.reduce((s, f) => s + f.size, 0)),
    0,
  );
  return { manifestPath, manifest, bytes: total, ignored };
}

/** {@link commitArtifactIter} without the events. */
export function commitArtifact(
  dir: string,
  options: CommitArtifactOptions,
  onEvent?: (event: CommitEvent) => void,
): Promise<CommitArtifactResult> {
  return drain(commitArtifactIter(dir, options), onEvent);
}
