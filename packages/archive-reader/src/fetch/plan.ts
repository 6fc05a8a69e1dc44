import {
  ARTIFACT_MANIFEST,
  STAGED_RECORD,
  formatIterDir,
  parseIterDir,
  type StagedRecord,
  type StagedSource,
} from "@ckpt/manifest";
import { ArchiveReaderError } from "../errors.js";
import type { StagedFile } from "./remote.js";

/** Suffix of a file being downloaded; renamed to its final name once verified. */
export const PART_SUFFIX = ".part";

/** The archive a fetch stages, reduced to what the plan needs. */
export interface FetchTarget {
  readonly source: StagedSource;
  readonly iteration: number;
  /** Payloads to stage, then the native manifest last. */
  readonly payloads: readonly StagedFile[];
  readonly manifest: StagedFile;
}

/** One entry below the staging directory: its size, and its digest when the executor hashed it. */
export interface LocalEntry {
  readonly size: number;
  /** False for anything that is not a regular file (a directory is not listed, a symlink is). */
  readonly regular: boolean;
  readonly sha256?: string;
}

/** What is on disk in `<dst>/iter_*` before the fetch, `.staged.json` aside. */
export interface LocalStageState {
  readonly stagedDir: string;
  /** Every non-directory entry below the staging directory by relative path, the record excluded. */
  readonly entries: ReadonlyMap<string, LocalEntry>;
  /** The ownership record, when there is one. */
  readonly record: StagedRecord | undefined;
}

export interface PlannedDownload extends StagedFile {
  /** Bytes of `<path>.part` already downloaded by an earlier run, kept and continued by a ranged GET. */
  readonly resumeFrom: number;
}

/** What a fetch will do, decided before anything on disk changes. */
export interface FetchPlan {
  readonly stagedDir: string;
  /** The record written (complete=false) before the first download, naming every file this fetch owns. */
  readonly record: StagedRecord;
  /** The existing record belongs to another source: only the files it names are removed. */
  readonly replacing: boolean;
  /** Files (and their `.part`s) the existing record names that go before downloading. */
  readonly remove: readonly string[];
  /** Staged files that still match (resume): not downloaded again. */
  readonly keep: readonly StagedFile[];
  readonly download: readonly PlannedDownload[];
  /** Whether the native manifest is (re)written last; false only when it is kept and nothing is downloaded. */
  readonly writeManifest: boolean;
  /** A complete staging of the same source whose files all still match: nothing to do. */
  readonly upToDate: boolean;
}

/** Same archive contents: the manifest and the declaration (or its absence) are the same bytes. */
export function sameSource(a: StagedSource, b: StagedSource): boolean {
  return a.manifest_sha256 === b.manifest_sha256 && a.declaration_sha256 === b.declaration_sha256;
}

function foreign(stagedDir: string, detail: string): ArchiveReaderError {
  return new ArchiveReaderError(
    "READER_STAGE_FOREIGN",
    `fetch into ${stagedDir}: ${detail} ckpt never replaces or deletes files it did not stage; choose another --dst or move them away.`,
    { kind: "refused", subject: stagedDir },
  );
}

/**
 * What a staging record proves ckpt wrote below its directory, and so the only paths a fetch (or
 * `ckpt gc`) may remove there: every file it names and that file's `.part`. Pure.
 */
export function ownedStagePaths(record: StagedRecord | undefined): Set<string> {
  const owned = new Set<string>();
  for (const f of record?.files ?? []) {
    owned.add(f.path);
    owned.add(`${f.path}${PART_SUFFIX}`);
  }
  return owned;
}

/**
 * The owned files whose digest decides whether they can be kept: same source, listed in the
 * record, a regular file of the expected size. The executor hashes exactly these. Pure.
 */
export function filesToHash(target: FetchTarget, local: LocalStageState): string[] {
  const record = local.record;
  if (record === undefined || !sameSource(record.source, target.source)) return [];
  const owned = new Set(record.files.map((f) => f.path));
  return [...target.payloads, target.manifest]
    .filter((f) => {
      const entry = local.entries.get(f.path);
      return owned.has(f.path) && entry?.regular === true && entry.size === f.size;
    })
    .map((f) => f.path);
}

/**
 * Decides a fetch into `local.stagedDir`. Pure.
 *
 * - No record and no files: download everything.
 * - Files but no record: someone else's directory, refused (`READER_STAGE_FOREIGN`).
 * - A record of the same source: keep the owned files whose digest still matches, continue an
 *   owned `.part` no longer than its file, download the rest.
 * - A record of another source: remove only the files that record names (and their `.part`s),
 *   then download everything; a file it does not name at a path this fetch needs is refused.
 */
export function planFetch(target: FetchTarget, local: LocalStageState): FetchPlan {
  const { stagedDir, entries, record } = local;
  const files = [...target.payloads, target.manifest];
  const newRecord: StagedRecord = {
    schema: "posttrain.staged-fetch.v1",
    source: target.source,
    iteration: target.iteration,
    files: files.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
    complete: false,
  };
  if (record === undefined) {
    if (entries.size > 0) {
      const first = [...entries.keys()].sort()[0];
      throw foreign(
        stagedDir,
        `the directory holds files (${first}, ...) but no ${STAGED_RECORD.fileName} ownership record.`,
      );
    }
  }
  const owned = ownedStagePaths(record);
  const replacing = record !== undefined && !sameSource(record.source, target.source);
  const remove = replacing ? [...owned].filter((p) => entries.has(p)).sort() : [];
  const remaining = new Map([...entries].filter(([p]) => !remove.includes(p)));

  for (const f of files) {
    for (const path of [f.path, `${f.path}${PART_SUFFIX}`]) {
      if (remaining.has(path) && !owned.has(path)) {
        throw foreign(
          stagedDir,
          `${path} is in the way and ${STAGED_RECORD.fileName} does not name it as staged by ckpt.`,
        );
      }
    }
  }

  const keep: StagedFile[] = [];
  const download: PlannedDownload[] = [];
  for (const f of target.payloads) {
    const entry = remaining.get(f.path);
    if (entry?.regular && entry.size === f.size && entry.sha256 === f.sha256) {
      keep.push(f);
      continue;
    }
    const part = remaining.get(`${f.path}${PART_SUFFIX}`);
    const resumeFrom = part?.regular && part.size <= f.size ? part.size : 0;
    download.push({ ...f, resumeFrom });
  }
  const manifestEntry = remaining.get(target.manifest.path);
  const manifestMatches =
    manifestEntry?.regular === true &&
    manifestEntry.size === target.manifest.size &&
    manifestEntry.sha256 === target.manifest.sha256;
  const writeManifest = download.length > 0 || !manifestMatches;
  // Payloads come before the native manifest: a manifest still on disk while payloads are missing goes first.
  const staleManifest =
    writeManifest && manifestEntry !== undefined && !replacing ? [ARTIFACT_MANIFEST.fileName] : [];
  const upToDate = record?.complete === true && !replacing && !writeManifest;
  return {
    stagedDir,
    record: newRecord,
    replacing,
    remove: [...remove, ...staleManifest],
    keep,
    download,
    writeManifest,
    upToDate,
  };
}

/**
 * The staged directory's name: the archive prefix's last segment when it is an `iter_*` name of
 * the manifest's iteration (kept verbatim, e.g. `iter_000300`), else `formatIterDir(iteration)`.
 * A prefix naming another iteration than the manifest contradicts it and is refused. Pure.
 */
export function stagedDirName(lastSegment: string, iteration: number, uri: string): string {
  const named = parseIterDir(lastSegment);
  if (named === undefined) return formatIterDir(iteration);
  if (named !== iteration) {
    throw new ArchiveReaderError(
      "READER_REMOTE_RECORD_INVALID",
      `fetch ${uri}: the prefix names ${lastSegment} but ${ARTIFACT_MANIFEST.fileName} records iteration ${iteration}. The archive is misplaced; check the URI.`,
      { kind: "refused", subject: ARTIFACT_MANIFEST.fileName },
    );
  }
  return lastSegment;
}
