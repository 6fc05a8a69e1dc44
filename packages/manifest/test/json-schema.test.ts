import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  ARTIFACT_MANIFEST,
  ARCHIVE_DECLARATION,
  UPLOADED_MARKER,
  STAGED_RECORD,
  MERGE_COMPLETE,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CONTROL_MANIFEST,
  MULTI_ROLE_SUCCESS,
  type RecordSchema,
} from "../src/index.js";

// The JSON Schema generated from each zod schema is snapshotted, so any change to a record's
// shape shows up in review as a diff of test/fixtures/json-schema/*.json (and calls for a version bump).
const RECORDS: ReadonlyArray<RecordSchema<unknown>> = [
  ARTIFACT_MANIFEST,
  ARCHIVE_DECLARATION,
  UPLOADED_MARKER,
  STAGED_RECORD,
  MERGE_COMPLETE,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CONTROL_MANIFEST,
  MULTI_ROLE_SUCCESS,
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
