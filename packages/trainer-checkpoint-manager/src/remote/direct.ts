import { randomBytes } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  CHECKPOINT_DESCRIPTION,
  CONTROL_MANIFEST,
  LATEST_POINTER,
  type ArtifactManifest,
  type ControlManifest,
  controlGenerationDir,
  DCP_COMPONENTS,
  type DcpComponent,
  type FileEntry,
  formatIterDir,
  LOGICAL_COMPONENTS,
  type LogicalComponent,
  type PhysicalComponent,
  parseIterDir,
  sha256Hex,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { ManagerError, messageOf } from "../errors.js";
import { entryKind, removeOwned } from "../internal/fs.js";
import { readSmallObject, storeFailure } from "../internal/store.js";
import type { CommitRecord } from "../local/commit.js";
import { type FullCommit, type Primary, UPLOAD_DISABLED } from "../primary.js";
import { VALIDATION_STATE_SCHEMA, validationPublicationName, validationRecord } from "../records.js";
import type { PointerState } from "../resume/decide.js";
import type { CommitOptions, ManagerEvent, SaveSession, UploadOutcome, ValidationState } from "../types.js";
import { bindDcpFiles, type ListedComponent } from "./bind.js";
import type { WriterLease } from "./lease.js";
import {
  controlProblems,
  generationDescriptionKey,
  head,
  keyIn,
  MAX_CONTROL_BYTES,
  probeRemote,
  readControl,
  remoteInvalid,
} from "./probe.js";

/** The DCP components of an iteration that hold their `.metadata` (written last by the DCP writer). */
async function presentComponents(store: ObjectStore, iterKey: string): Promise<DcpComponent[]> {
  const present: DcpComponent[] = [];
  for (const c of DCP_COMPONENTS)
    if ((await head(store, keyIn(iterKey, `${c}/.metadata`))) !== undefined) present.push(c);
  return present;
}

/** A DCP component's objects, paths relative to the component. */
async function listComponent(store: ObjectStore, iterKey: string, c: DcpComponent): Promise<ListedComponent> {
  const prefix = `${iterKey}/${c}/`;
  const files: Array<{ path: string; size: number }> = [];
  try {
    for await (const info of store.list(prefix))
      files.push({ path: info.key.slice(prefix.length), size: info.size });
  } catch (error) {
    throw storeFailure("list", `${store.uri}/${prefix}`, error);
  }
  return { name: c, files };
}

async function readControlFile(path: string, what: string): Promise<Uint8Array> {
  const info = await entryKind(path);
  if (info !== "file") {
    throw new ManagerError(
      "MANAGER_COMPONENT_MISSING",
      `commit: ${what} ${path} was not written. Write it before committing.`,
      {
        kind: "refused",
        subject: path,
      },
    );
  }
  const bytes = await readFile(path);
  if (bytes.byteLength > MAX_CONTROL_BYTES) {
    throw new ManagerError(
      "MANAGER_SAVE_REFUSED",
      `commit: ${path} is ${bytes.byteLength} bytes; control files are at most ${MAX_CONTROL_BYTES}.`,
      {
        kind: "refused",
        subject: path,
      },
    );
  }
  return new Uint8Array(bytes);
}

interface DirectCommit {
  readonly uri: string;
  readonly manifestSha256: string;
  /** The iteration was already committed by an earlier try: only the pointer was confirmed. */
  readonly confirmed: boolean;
}

/**
 * A direct object-store primary: DCP components are written in place by the trainer's ranks;
 * the manager appends a control generation (trainer.pt, data.pt), creates the control manifest
 * (the first valid one makes the iteration immutable) and then writes `latest_checkpoint.txt`.
 */
export interface DirectPrimaryInit {
  /** Rooted at the checkpoints prefix. */
  readonly root: ObjectStore;
  /** Rooted at the sibling checkpoint_artifacts prefix (absent when the prefix is not a checkpoints root). */
  readonly artifacts: ObjectStore | undefined;
  /** Where the trainer writes trainer.pt / data.pt for upload. */
  readonly stagingDir: string;
  /** Where control files are copied for a resume. */
  readonly cacheDir: string;
  readonly clock: () => Date;
  readonly producer: string;
  /** Rank 0's writer lease on the root; other ranks hold none. */
  readonly lease: WriterLease | undefined;
  readonly emit: (event: ManagerEvent) => void;
}

export class DirectPrimary implements Primary {
  readonly root: ObjectStore;
  readonly artifacts: ObjectStore | undefined;
  readonly stagingDir: string;
  readonly cacheDir: string;
  readonly checkpointsRoot: string;
  readonly targetOptions;
  readonly commitsInBackground = false;
  private readonly clock: () => Date;
  private readonly producer: string;
  private readonly lease: WriterLease | undefined;
  private readonly emit: (event: ManagerEvent) => void;

  constructor(init: DirectPrimaryInit) {
    this.root = init.root;
    this.artifacts = init.artifacts;
    this.stagingDir = init.stagingDir;
    this.cacheDir = init.cacheDir;
    this.clock = init.clock;
    this.producer = init.producer;
    this.lease = init.lease;
    this.emit = init.emit;
    this.checkpointsRoot = init.root.uri;
    this.targetOptions = { remote: { checkpointsUri: init.root.uri, stagingDir: init.stagingDir } };
  }

  stagedDir(kind: "full" | "artifact", iteration: number): string {
    return join(
      this.stagingDir,
      kind === "full" ? "checkpoints" : "checkpoint_artifacts",
      formatIterDir(iteration),
    );
  }

  /** The iteration's committed control manifest, if any. */
  committed(iteration: number) {
    return readControl(this.root, formatIterDir(iteration));
  }

  private async putPointer(iteration: number): Promise<void> {
    try {
      await this.root.put(LATEST_POINTER.fileName, LATEST_POINTER.serialize(iteration));
    } catch (error) {
      throw storeFailure("write", `${this.root.uri}/${LATEST_POINTER.fileName}`, error);
    }
  }

  private async create(store: ObjectStore, key: string, bytes: Uint8Array): Promise<"created" | "exists"> {
    try {
      const result = await store.createIfAbsent(key, bytes, { sha256: sha256Hex(bytes) });
      return result.status;
    } catch (error) {
      throw storeFailure("create", `${store.uri}/${key}`, error);
    }
  }

  /** Same-iteration retry under a visible manifest: validate it and what it references, then confirm the pointer. */
  private async confirm(iteration: number): Promise<DirectCommit> {
    const iterKey = formatIterDir(iteration);
    const found = await this.committed(iteration);
    if (found === undefined) {
      throw new ManagerError(
        "MANAGER_SESSION_INVALID",
        `confirm ${this.root.uri}/${iterKey}: it holds no control manifest.`,
        {
          kind: "refused",
          subject: `${this.root.uri}/${iterKey}`,
        },
      );
    }
    const subject = `${this.root.uri}/${iterKey}/${CONTROL_MANIFEST.fileName}`;
    if (found.manifest.iteration !== iteration) {
      throw new ManagerError(
        "MANAGER_PLAN_DRIFT",
        `confirm ${subject}: it records iteration ${found.manifest.iteration}, not ${iteration}. Fails closed.`,
        {
          kind: "refused",
          subject,
        },
      );
    }
    const problems = await controlProblems(this.root, iterKey, found.manifest);
    if (problems.length > 0)
      throw remoteInvalid(
        subject,
        `confirm ${subject}: ${problems.join("; ")}. Fails closed; the pointer is not moved.`,
      );
    await this.lease?.check();
    await this.putPointer(iteration);
    return { uri: `${this.root.uri}/${iterKey}`, manifestSha256: sha256Hex(found.bytes), confirmed: true };
  }

  /** A manifest is visible: confirm it when it records the components this save wrote, else fail closed. */
  private async confirmSamePlan(
    iteration: number,
    components: readonly DcpComponent[],
  ): Promise<DirectCommit> {
    const existing = await this.committed(iteration);
    if (existing === undefined || existing.manifest.components.join(",") !== components.join(",")) {
      const iterUri = `${this.root.uri}/${formatIterDir(iteration)}`;
      throw new ManagerError(
        "MANAGER_PLAN_DRIFT",
        `commit ${iterUri}: its control manifest records components [${existing?.manifest.components.join(", ") ?? "?"}] ` +
          `but this save wrote [${components.join(", ")}]. The first valid manifest keeps the iteration; this save fails closed ` +
          "(nothing is rewritten beneath it). Resume from the latest checkpoint and save a later iteration.",
        { kind: "refused", subject: `${iterUri}/${CONTROL_MANIFEST.fileName}` },
      );
    }
    return this.confirm(iteration);
  }

  /**
   * Commits a full checkpoint: DCP components present (model and optim at least), a new control
   * generation with the staged trainer.pt (and data.pt), the validation record when pending, the
   * control manifest by conditional create, then the pointer. A manifest that appeared meanwhile
   * is confirmed when it records the same plan and refused as plan drift otherwise.
   */
  private async commitControl(
    iteration: number,
    pending: boolean,
    inventory: CommitOptions["inventory"],
  ): Promise<DirectCommit> {
    const iterKey = formatIterDir(iteration);
    const iterUri = `${this.root.uri}/${iterKey}`;
    await this.lease?.check();
    const components = await presentComponents(this.root, iterKey);
    // A manifest that became visible after this save began: the first one keeps the iteration.
    if ((await this.committed(iteration)) !== undefined) return this.confirmSamePlan(iteration, components);
    for (const required of ["model", "optim"] as const) {
      if (!components.includes(required)) {
        throw new ManagerError(
          "MANAGER_COMPONENT_MISSING",
          `commit ${iterUri}: ${required}/.metadata is missing, so the ${required} DCP component is not finalized. ` +
            "Every rank's DCP save of it must finish before the commit.",
          { kind: "refused", subject: `${iterUri}/${required}/.metadata` },
        );
      }
    }
    const staged = this.stagedDir("full", iteration);
    const trainer = await readControlFile(join(staged, "trainer.pt"), "trainer.pt");
    const data =
      (await entryKind(join(staged, "data.pt"))) === "file"
        ? await readControlFile(join(staged, "data.pt"), "data.pt")
        : undefined;
    const generation = `g${this.clock().getTime()}-${randomBytes(4).toString("hex")}`;
    const genDir = controlGenerationDir(generation);
    const entry = (name: string, bytes: Uint8Array): FileEntry => ({
      path: `${genDir}/${name}`,
      size: bytes.byteLength,
      sha256: sha256Hex(bytes),
    });
    const control = {
      trainer: entry("trainer.pt", trainer),
      data: data === undefined ? null : entry("data.pt", data),
    };
    const listed = await Promise.all(components.map((c) => listComponent(this.root, iterKey, c)));
    const bound = bindDcpFiles(iterUri, listed, inventory ?? []);
    const description = CHECKPOINT_DESCRIPTION.serialize({
      schema: CHECKPOINT_DESCRIPTION.version,
      iteration,
      format: "dcp",
      logical_components: [...LOGICAL_COMPONENTS],
      physical_components: [
        ...components.map(
          (c): PhysicalComponent => ({ name: c, kind: "dir", path: c, files: bound.get(c)! }),
        ),
        ...(["trainer", "data"] as const).flatMap((name): PhysicalComponent[] => {
          const e = control[name];
          return e === null
            ? []
            : [{ name, kind: "file", path: `${name}.pt`, size: e.size, sha256: e.sha256 }];
        }),
      ],
      producer: this.producer,
    });
    await this.create(this.root, keyIn(iterKey, control.trainer.path), trainer);
    if (data !== undefined && control.data !== null)
      await this.create(this.root, keyIn(iterKey, control.data.path), data);
    // Before the manifest, in the generation it names: a retry's new generation never races it.
    await this.create(this.root, keyIn(iterKey, generationDescriptionKey(generation)), description);
    let validation: string | null = null;
    if (pending) {
      validation = validationPublicationName(1, "evaluation_pending");
      await this.create(
        this.root,
        keyIn(iterKey, validation),
        validationRecord.serialize({
          schema: VALIDATION_STATE_SCHEMA,
          iteration,
          state: "evaluation_pending",
        }),
      );
    }
    const manifest: ControlManifest = {
      schema: CONTROL_MANIFEST.version,
      iteration,
      components,
      control_generation: generation,
      control,
      validation_publication: validation,
    };
    const bytes = CONTROL_MANIFEST.serialize(manifest);
    await this.lease?.check();
    if ((await this.create(this.root, keyIn(iterKey, CONTROL_MANIFEST.fileName), bytes)) === "exists") {
      return this.confirmSamePlan(iteration, components);
    }
    await this.putPointer(iteration);
    await removeOwned(staged);
    return { uri: iterUri, manifestSha256: sha256Hex(bytes), confirmed: false };
  }

  /** Moves a committed iteration's validation transaction on: a new append-only record, then a successor manifest naming it. */
  async writeValidation(iteration: number, state: ValidationState): Promise<void> {
    const iterKey = formatIterDir(iteration);
    const found = await this.committed(iteration);
    if (found === undefined) {
      throw new ManagerError(
        "MANAGER_VALIDATION_STATE",
        `validation of ${this.root.uri}/${iterKey}: it holds no control manifest.`,
        {
          kind: "refused",
          subject: `${this.root.uri}/${iterKey}`,
        },
      );
    }
    const previous = found.manifest.validation_publication;
    const sequence =
      previous === null ? 1 : Number(/^\.validation-publication-([0-9]+)-/.exec(previous)?.[1] ?? "0") + 1;
    const name = validationPublicationName(sequence, state);
    await this.lease?.check();
    await this.create(
      this.root,
      keyIn(iterKey, name),
      validationRecord.serialize({ schema: VALIDATION_STATE_SCHEMA, iteration, state }),
    );
    const successor = CONTROL_MANIFEST.serialize({ ...found.manifest, validation_publication: name });
    try {
      await this.root.put(keyIn(iterKey, CONTROL_MANIFEST.fileName), successor, {
        sha256: sha256Hex(successor),
      });
    } catch (error) {
      throw storeFailure("write", `${this.root.uri}/${iterKey}/${CONTROL_MANIFEST.fileName}`, error);
    }
  }

  /**
   * Commits a partial artifact in the sibling prefix: the planned DCP components (listed for their
   * files and sizes), the staged small files uploaded beside them, the native manifest last by
   * conditional create. A committed artifact is refused, never re-committed.
   */
  private async commitArtifactAt(
    iteration: number,
    plan: readonly LogicalComponent[],
    inventory: CommitOptions["inventory"],
  ): Promise<DirectCommit> {
    const store = this.artifacts;
    const iterKey = formatIterDir(iteration);
    if (store === undefined) {
      throw new ManagerError(
        "MANAGER_SAVE_REFUSED",
        `commit artifact ${iterKey}: checkpoint_store.prefix does not end in /checkpoints, so there is no sibling checkpoint_artifacts/ prefix.`,
        { kind: "refused", knob: "checkpoint_store.prefix" },
      );
    }
    const iterUri = `${store.uri}/${iterKey}`;
    await this.lease?.check();
    if ((await head(store, keyIn(iterKey, ARTIFACT_MANIFEST.fileName))) !== undefined) {
      throw new ManagerError(
        "MANAGER_ARTIFACT_COMMITTED",
        `commit ${iterUri}: it is already committed; a committed artifact is never committed again.`,
        {
          kind: "refused",
          subject: `${iterUri}/${ARTIFACT_MANIFEST.fileName}`,
        },
      );
    }
    const physical: PhysicalComponent[] = [];
    const dirs: DcpComponent[] = [];
    if (plan.includes("model")) dirs.push("model");
    if (plan.includes("optimizer")) dirs.push("optim");
    if (plan.includes("training_state")) dirs.push(...(["old", "ref"] as const));
    const written: ListedComponent[] = [];
    for (const c of dirs) {
      const { files } = await listComponent(store, iterKey, c);
      const required = c === "model" || c === "optim";
      if (!files.some((f) => f.path === ".metadata")) {
        if (!required && files.length === 0) continue;
        throw new ManagerError(
          "MANAGER_COMPONENT_MISSING",
          `commit ${iterUri}: ${c}/.metadata is missing; the DCP save of ${c} did not finish.`,
          {
            kind: "refused",
            subject: `${iterUri}/${c}/.metadata`,
          },
        );
      }
      written.push({ name: c, files });
    }
    const bound = bindDcpFiles(iterUri, written, inventory ?? []);
    for (const { name } of written) physical.push({ name, kind: "dir", path: name, files: bound.get(name)! });
    if (plan.includes("training_state")) {
      const staged = this.stagedDir("artifact", iteration);
      for (const name of ["trainer", "data"] as const) {
        const path = join(staged, `${name}.pt`);
        if (name === "data" && (await entryKind(path)) === "absent") continue;
        const bytes = await readControlFile(path, `${name}.pt`);
        await this.create(store, keyIn(iterKey, `${name}.pt`), bytes);
        physical.push({
          name,
          kind: "file",
          path: `${name}.pt`,
          size: bytes.byteLength,
          sha256: sha256Hex(bytes),
        });
      }
    }
    const manifest: ArtifactManifest = {
      schema: ARTIFACT_MANIFEST.version,
      iteration,
      format: "dcp",
      logical_components: [...plan],
      physical_components: physical,
      producer: this.producer,
    };
    const bytes = ARTIFACT_MANIFEST.serialize(manifest);
    await this.declare(store, iterKey, bytes, physical);
    await this.lease?.check();
    if ((await this.create(store, keyIn(iterKey, ARTIFACT_MANIFEST.fileName), bytes)) === "exists") {
      throw new ManagerError(
        "MANAGER_ARTIFACT_COMMITTED",
        `commit ${iterUri}: another commit won; a committed artifact is never committed again.`,
        {
          kind: "refused",
          subject: `${iterUri}/${ARTIFACT_MANIFEST.fileName}`,
        },
      );
    }
    await removeOwned(this.stagedDir("artifact", iteration));
    return { uri: iterUri, manifestSha256: sha256Hex(bytes), confirmed: false };
  }

  /**
   * The archive declaration a publish would write, when every file has its digest (the writer's
   * inventory): it binds the manifest's bytes, so `ckpt artifact fetch` and `materialize-hf
   * --artifact-uri` prove every shard. Written before the manifest; an earlier try's is replaced
   * (nothing committed refers to it until the manifest exists).
   */
  private async declare(
    store: ObjectStore,
    iterKey: string,
    manifestBytes: Uint8Array,
    physical: readonly PhysicalComponent[],
  ): Promise<void> {
    const files: FileEntry[] = [];
    for (const c of physical) {
      const entries =
        c.kind === "file"
          ? [{ ...c, path: c.path }]
          : c.files.map((f) => ({ ...f, path: `${c.path}/${f.path}` }));
      for (const e of entries) {
        if (e.sha256 === undefined) return;
        files.push({ path: e.path, size: e.size, sha256: e.sha256 });
      }
    }
    files.push({
      path: ARTIFACT_MANIFEST.fileName,
      size: manifestBytes.byteLength,
      sha256: sha256Hex(manifestBytes),
    });
    const declaration = ARCHIVE_DECLARATION.serialize({
      schema: ARCHIVE_DECLARATION.version,
      manifest_sha256: sha256Hex(manifestBytes),
      manifest_size: manifestBytes.byteLength,
      files,
    });
    const key = keyIn(iterKey, ARCHIVE_DECLARATION.fileName);
    try {
      await store.put(key, declaration, { sha256: sha256Hex(declaration) });
    } catch (error) {
      throw storeFailure("write", `${store.uri}/${key}`, error);
    }
  }

  /** The newest committed artifact in the sibling prefix. */
  async newestArtifact(): Promise<{ iteration: number; dir: string } | undefined> {
    const store = this.artifacts;
    if (store === undefined) return undefined;
    let newest: number | undefined;
    try {
      for await (const info of store.list("")) {
        const [dir, name] = info.key.split("/");
        const iteration = dir === undefined ? undefined : parseIterDir(dir);
        if (
          iteration !== undefined &&
          name === ARTIFACT_MANIFEST.fileName &&
          info.key.split("/").length === 2
        ) {
          if (newest === undefined || iteration > newest) newest = iteration;
        }
      }
    } catch (error) {
      throw storeFailure("list", `${store.uri}/`, error);
    }
    return newest === undefined
      ? undefined
      : { iteration: newest, dir: `${store.uri}/${formatIterDir(newest)}` };
  }

  /** Reads the root's `latest_checkpoint.txt` and probes the iteration it names. */
  async readPointer(): Promise<PointerState> {
    const bytes = await readSmallObject(this.root, LATEST_POINTER.fileName, 1024);
    const path = `${this.root.uri}/${LATEST_POINTER.fileName}`;
    if (bytes === undefined) return { state: "absent" };
    let pointer: ReturnType<typeof LATEST_POINTER.parse>;
    try {
      pointer = LATEST_POINTER.parse(bytes, path);
    } catch (error) {
      return { state: "invalid", path, message: messageOf(error) };
    }
    const checkpoint = await probeRemote(this.root, pointer.iterDirName, this.cacheDir);
    return {
      state: "present",
      path,
      iteration: pointer.iteration,
      checkpoint: { ...checkpoint, iteration: pointer.iteration },
    };
  }

  /** Not loaded at open: the store's conditional create refuses committing an artifact twice. */
  async artifactCoverage(): Promise<[]> {
    return [];
  }

  /** No local guard: the lease is checked before each write to the store. */
  assertHeld(): void {}

  async prepareSave(save: Pick<SaveSession, "step" | "plan" | "dir">, writer: boolean): Promise<boolean> {
    const alreadyCommitted = save.plan.kind === "full" && (await this.committed(save.step)) !== undefined;
    if (writer) {
      const staged = this.stagedDir(save.plan.kind, save.step);
      await removeOwned(staged);
      await mkdir(staged, { recursive: true });
    }
    return alreadyCommitted;
  }

  async commitArtifact(session: SaveSession, options: CommitOptions): Promise<CommitRecord> {
    const done = await this.commitArtifactAt(session.step, session.plan.components, options.inventory);
    return { path: `${done.uri}/${ARTIFACT_MANIFEST.fileName}`, sha256: done.manifestSha256, bytes: 0 };
  }

  /** Commits the save's control generation, or (an earlier try committed it) only confirms the pointer. */
  async commitFull(session: SaveSession, options: CommitOptions): Promise<FullCommit> {
    const pending = session.plan.validation === "pending" && !session.alreadyCommitted;
    const done = session.alreadyCommitted
      ? await this.confirm(session.step)
      : await this.commitControl(session.step, pending, options.inventory);
    return {
      record: { path: `${done.uri}/${CONTROL_MANIFEST.fileName}`, sha256: done.manifestSha256, bytes: 0 },
      pointer: `${this.root.uri}/${LATEST_POINTER.fileName}`,
      pending,
    };
  }

  /** A direct primary is the store: there is no archive upload. */
  async archive(): Promise<UploadOutcome> {
    return UPLOAD_DISABLED;
  }

  /** Retention does not run on a direct primary. */
  async retain(): Promise<undefined> {
    return undefined;
  }

  async validationState(iteration: number): Promise<ValidationState> {
    const iterKey = formatIterDir(iteration);
    const committed = await this.committed(iteration);
    const probed = committed === undefined ? undefined : await probeRemote(this.root, iterKey, this.cacheDir);
    const state = probed?.validation;
    if (state === undefined) {
      throw new ManagerError(
        "MANAGER_VALIDATION_STATE",
        `complete validation of ${this.root.uri}/${iterKey}: it has no validation transaction.`,
        { kind: "refused", subject: `${this.root.uri}/${iterKey}` },
      );
    }
    return state;
  }

  async release(): Promise<void> {
    await this.lease
      ?.release()
      .catch((error: unknown) => this.emit({ type: "warning", message: messageOf(error) }));
  }
}
