import { z } from "zod";
import { ManifestError } from "../errors.js";
import { parseStrictJson } from "../json/strict.js";
import {
  codedIssue,
  decodeUtf8,
  destinationSchema,
  inventorySchema,
  iterationSchema,
  MAX_RECORD_BYTES,
  readBoundedFile,
  recordApi,
  sizedFileEntrySchema,
  sortByPath,
} from "./common.js";
import { UPLOADED_MARKER_FILE } from "./names.js";

const UPLOADED_MARKER_VERSION = "posttrain.archive-marker.v1";
/** Longest legacy one-line marker accepted; the old writers put a URI or a timestamp there. */
const MAX_LEGACY_MARKER_BYTES = 4096;

const uploadedMarkerSchema = z
  .strictObject({
    schema: z.literal(UPLOADED_MARKER_VERSION),
    /** `artifact`: a checkpoint_artifacts/iter_* archive; `full_checkpoint`: a checkpoints/iter_* upload. */
    kind: z.enum(["artifact", "full_checkpoint"]),
    iteration: iterationSchema,
    destination: destinationSchema,
    /** The archived files relative to the iteration directory. */
    files: inventorySchema(sizedFileEntrySchema).min(1),
  })
  .superRefine((m, ctx) => {
    // A receipt listing itself would vouch for its own bytes: refused (issue 16).
    m.files.forEach((f, i) => {
      if (f.path === UPLOADED_MARKER_FILE) {
        codedIssue(
          ctx,
          "RECORD_INCONSISTENT",
          `${UPLOADED_MARKER_FILE} cannot list itself in its inventory`,
          ["files", i, "path"],
        );
      }
    });
    if (m.kind !== "artifact") return;
    // Artifact receipts gate deletion of the local copy, so every entry must be digest-verifiable.
    m.files.forEach((f, i) => {
      if (f.sha256 === undefined) {
        codedIssue(ctx, "RECORD_MISSING_DIGEST", "an artifact receipt needs a sha256 for every file", [
          "files",
          i,
          "sha256",
        ]);
      }
    });
  });

/** The local archive receipt `.uploaded`: the destination it binds to and the archived inventory. */
export type UploadedMarker = z.infer<typeof uploadedMarkerSchema>;

/**
 * What reading `.uploaded` yields: a receipt, or the one-line text an earlier release wrote. The
 * legacy variant carries no destination and no digests, so by its type it cannot feed a
 * verification, an adoption or a deletion.
 */
export type UploadedMarkerRead = { legacy: false; marker: UploadedMarker } | { legacy: true; text: string };

const RECEIPT = recordApi<UploadedMarker, typeof UPLOADED_MARKER_VERSION>({
  title: "archive receipt",
  fileName: UPLOADED_MARKER_FILE,
  versionField: "schema",
  versions: [UPLOADED_MARKER_VERSION],
  schema: uploadedMarkerSchema,
  normalize: (m) => ({ ...m, files: sortByPath(m.files) }),
});

/**
 * Parses `.uploaded` bytes. Text whose first non-blank character is `{` must be a valid JSON
 * receipt; anything else must be the legacy single line of text (at most one trailing newline,
 * no control characters) and is returned as `{ legacy: true, text }`.
 */
function parseUploadedMarker(bytes: Uint8Array, name: string = UPLOADED_MARKER_FILE): UploadedMarkerRead {
  if (bytes.byteLength > MAX_RECORD_BYTES) {
    throw new ManifestError(
      "RECORD_TOO_LARGE",
      `read ${name}: the file is ${bytes.byteLength} bytes; records are at most ${MAX_RECORD_BYTES} bytes. It is not a ckpt record.`,
      { kind: "input", file: name },
    );
  }
  const text = decodeUtf8(bytes, name);
  if (text.trimStart().startsWith("{") || text.startsWith("\ufeff")) {
    const result = RECEIPT.validate(parseStrictJson(text, { name }), name);
    if (!result.ok) throw result.error;
    return { legacy: false, marker: result.value };
  }
  const line = text.endsWith("\n") ? text.slice(0, -1) : text;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (bytes.byteLength > MAX_LEGACY_MARKER_BYTES || /[\u0000-\u001f\u007f]/.test(line)) {
    throw new ManifestError(
      "RECORD_BAD_TEXT",
      `read ${name}: it is neither a JSON receipt nor a one-line legacy marker (at most ${MAX_LEGACY_MARKER_BYTES} bytes). ` +
        "Move it aside and publish again to write a receipt.",
      { kind: "input", file: name },
    );
  }
  return { legacy: true, text: line };
}

/**
 * The archive receipt `.uploaded`. `validate`, `serialize` and `write` take the JSON receipt;
 * `parse` and `read` also recognise the legacy one-line text and answer an UploadedMarkerRead.
 */
export const UPLOADED_MARKER = {
  ...RECEIPT,
  parse: parseUploadedMarker,
  read: async (path: string): Promise<UploadedMarkerRead> =>
    parseUploadedMarker(await readBoundedFile(path), path),
};
