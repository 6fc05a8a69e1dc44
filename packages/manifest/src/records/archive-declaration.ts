import { z } from "zod";
import {
  codedIssue,
  fileEntrySchema,
  inventorySchema,
  recordApi,
  sha256Schema,
  sizeSchema,
  sortByPath,
} from "./common.js";
import { ARCHIVE_DECLARATION_FILE, ARTIFACT_MANIFEST_FILE, UPLOADED_MARKER_FILE } from "./names.js";

export const ARCHIVE_DECLARATION_VERSION = "posttrain.artifact-archive.v1";

/** Files that describe an archive and therefore can never be among the files it declares. */
const NEVER_DECLARED: ReadonlySet<string> = new Set([ARCHIVE_DECLARATION_FILE, UPLOADED_MARKER_FILE]);

const archiveDeclarationSchema = z
  .strictObject({
    schema: z.literal(ARCHIVE_DECLARATION_VERSION),
    /** SHA-256 and size of the native manifest's bytes, the completion record uploaded last. */
    manifest_sha256: sha256Schema,
    manifest_size: sizeSchema,
    /** Every archived file relative to the artifact directory, the native manifest included. */
    files: inventorySchema(fileEntrySchema).min(1),
  })
  .superRefine((d, ctx) => {
    const index = d.files.findIndex((f) => f.path === ARTIFACT_MANIFEST_FILE);
    if (index < 0) {
      codedIssue(ctx, "RECORD_INCONSISTENT", `the inventory must include ${ARTIFACT_MANIFEST_FILE}`, [
        "files",
      ]);
      return;
    }
    const entry = d.files[index]!;
    if (entry.sha256 !== d.manifest_sha256 || entry.size !== d.manifest_size) {
      codedIssue(
        ctx,
        "RECORD_INCONSISTENT",
        `the inventory entry of ${ARTIFACT_MANIFEST_FILE} disagrees with manifest_sha256/manifest_size`,
        ["files", index],
      );
    }
    d.files.forEach((f, i) => {
      if (NEVER_DECLARED.has(f.path)) {
        codedIssue(ctx, "RECORD_INCONSISTENT", `${f.path} is bookkeeping and cannot be archived`, [
          "files",
          i,
          "path",
        ]);
      }
    });
  });

/**
 * `.posttrain-archive.json`: created once in the destination before the payloads, it fixes the
 * full inventory so a later publish of different contents can be stopped before it writes.
 */
export type ArchiveDeclaration = z.infer<typeof archiveDeclarationSchema>;

export const ARCHIVE_DECLARATION = recordApi<ArchiveDeclaration, typeof ARCHIVE_DECLARATION_VERSION>({
  title: "archive declaration",
  fileName: ARCHIVE_DECLARATION_FILE,
  versionField: "schema",
  versions: [ARCHIVE_DECLARATION_VERSION],
  schema: archiveDeclarationSchema,
  normalize: (d) => ({ ...d, files: sortByPath(d.files) }),
});
