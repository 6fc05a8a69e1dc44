import type { SourceFile } from "@ckpt/manifest";
import { mapEvents } from "@ckpt/progress";
import { type HfConversionError, refusal } from "../errors.js";
import { describeArchivedModel, removeCreated, stageArchivedArtifact } from "../source/archive.js";
import { type ExpectedSource, type OpenedSource, openSource, readArtifactModel } from "../source/open.js";
import type { MaterializeEvent, MaterializeSource, Options } from "./options.js";

/** The source of a run: identity first (cheap where possible), bytes when a build needs them. */
export class SourceSession {
  private opened: OpenedSource | undefined;
  private expected: ExpectedSource | undefined;
  private descriptor: SourceFile | undefined;
  readonly stagingCreated: string[] = [];
  stagingDir: string | undefined;

  constructor(
    private readonly source: MaterializeSource,
    private readonly options: Options,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** Under the lock: a local model.pt is opened (and starts hashing); an archive's descriptor is read. */
  async start(): Promise<void> {
    if (this.source.kind === "local") {
      const model = await readArtifactModel(this.source.ckptDir);
      this.expected = model.expected;
      this.opened = await openSource(model.path, model.path, {
        size: model.expected.size,
        recordedBy: "its artifact manifest",
      });
      // Hash on a worker thread while the run inspects the output (and converts, if it builds).
      this.opened.sha256().catch(() => {});
    } else {
      const model = await describeArchivedModel(this.source.store, this.source.uri, this.signal);
      this.expected = { size: model.size, sha256: model.sha256 };
      this.descriptor = { source: this.source.uri, size: model.size, sha256: model.sha256 };
    }
  }

  private mismatch(what: string): HfConversionError {
    const path = this.opened?.path ?? "model.pt";
    return refusal(
      "MATERIALIZE_SOURCE_MISMATCH",
      `${path} ${what}`,
      "the output would have been labelled with an identity its bytes do not have",
      "The artifact was changed after it was committed; restore it or materialize another one.",
      { file: path },
    );
  }

  /** The identity without hashing: known for an archive (its descriptor), or once a local hash is done. */
  get quickIdentity(): SourceFile | undefined {
    return this.descriptor;
  }

  /** The identity of record (hashes a local model.pt if not done). */
  async identity(): Promise<SourceFile> {
    if (this.descriptor) return this.descriptor;
    const opened = this.opened!;
    const sha256 = await opened.sha256();
    if (this.expected?.sha256 !== undefined && this.expected.sha256 !== sha256) {
      throw this.mismatch(`has sha256 ${sha256}, but its artifact manifest records ${this.expected.sha256}`);
    }
    this.descriptor = { source: opened.label, size: opened.size, sha256 };
    return this.descriptor;
  }

  /** The opened model.pt; an archive is fetched (digest-checked) into the staging directory first. */
  async *bytes(): AsyncGenerator<MaterializeEvent, OpenedSource> {
    if (this.opened) return this.opened;
    if (this.source.kind !== "archive") throw new Error("a local source is opened at start");
    const staged = yield* mapEvents(
      stageArchivedArtifact(
        this.source.store,
        this.source.uri,
        this.options.stageRoot,
        this.stagingCreated,
        this.signal,
      ),
      (event): MaterializeEvent => ({ type: "fetch", event }),
    );
    this.stagingDir = staged.report.stagedDir;
    this.opened = await openSource(staged.modelPath, this.source.uri, {
      size: this.expected!.size,
      recordedBy: "the archive",
    });
    this.opened.sha256().catch(() => {});
    return this.opened;
  }

  /** After a build read it: the digest of the bytes read equals the identity, and the file did not change. */
  async confirm(): Promise<SourceFile> {
    const opened = this.opened!;
    const sha256 = await opened.sha256();
    await opened.assertUnchanged();
    if (this.expected?.sha256 !== undefined && this.expected.sha256 !== sha256) {
      throw this.mismatch(
        `has sha256 ${sha256}, but ${this.source.kind === "archive" ? "the archive" : "its artifact manifest"} records ${this.expected.sha256}`,
      );
    }
    const identity = await this.identity();
    if (identity.sha256 !== sha256)
      throw this.mismatch(`has sha256 ${sha256}, not the ${identity.sha256} the decision used`);
    return identity;
  }

  async close(): Promise<string[]> {
    await this.opened?.close().catch(() => {});
    if (this.options.keepStaged) return [];
    await removeCreated(this.stagingCreated);
    return [...this.stagingCreated];
  }
}
