import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ARCHIVE_DECLARATION_RECORD,
  ARTIFACT_MANIFEST_RECORD,
  CONTROL_MANIFEST_RECORD,
  MATERIALIZED_MARKER_RECORD,
  MERGE_COMPLETE_RECORD,
  MULTI_ROLE_SUCCESS_RECORD,
  OVERLAY_SOURCE_RECORD,
  type RecordSchema,
  STAGED_RECORD_RECORD,
  UPLOADED_MARKER_RECORD,
} from "../src/index.js";

// The JSON Schema generated from each zod schema is snapshotted, so any change to a record's
// shape shows up in review as a diff of test/fixtures/json-schema/*.json (and calls for a version bump).
const RECORDS: ReadonlyArray<RecordSchema<unknown>> = [
  ARTIFACT_MANIFEST_RECORD,
  ARCHIVE_DECLARATION_RECORD,
  UPLOADED_MARKER_RECORD,
  STAGED_RECORD_RECORD,
  MERGE_COMPLETE_RECORD,
  MATERIALIZED_MARKER_RECORD,
  OVERLAY_SOURCE_RECORD,
  CONTROL_MANIFEST_RECORD,
  MULTI_ROLE_SUCCESS_RECORD,
] as ReadonlyArray<RecordSchema<unknown>>;

describe("generated JSON Schema", () => {
  it.each(RECORDS.map((r) => [r.fileName, r] as const))(
    "%s matches its snapshot",
    async (fileName, record) => {
      const schema = z.toJSONSchema(record.schema);
      const name = fileName.replace(/^[._]+/, "").replace(/\.json$/, "");
      await expect(`${JSON.stringify(schema, null, 2)}\n`).toMatchFileSnapshot(
        `./fixtures/json-schema/${name}.schema.json`,
      );
    },
  );
});
