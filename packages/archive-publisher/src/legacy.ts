import { type ArtifactManifest, parseStrictJson } from "@ckpt/manifest";
import { ArchivePublisherError, messageOf } from "./errors.js";

/** The `tool` value of a manifest written by the retired `merge_model_pt` merge. */
export const LEGACY_MERGE_TOOL = "merge_model_pt";
/** The only version of that record ever written. */
export const LEGACY_MERGE_VERSION = 1;

/**
 * The legacy merge manifest, the record the retired `merge_model_pt` tool wrote under the native
 * manifest's name before the native schema existed:
 * `{ "tool": "merge_model_pt", "version": 1, "iteration": N, "files": { "model.pt": { "size", "sha256" } } }`.
 * It describes a consolidated, model-only artifact.
 */
export interface LegacyMergeManifest {
  tool: typeof LEGACY_MERGE_TOOL;
  version: typeof LEGACY_MERGE_VERSION;
  iteration: number;
  files: { "model.pt": { size: number; sha256: string } };
}

const FIELDS = ["tool", "version", "iteration", "files"];

function invalid(name: string, problem: string): ArchivePublisherError {
  return new ArchivePublisherError(
    "PUBLISH_MANIFEST_INVALID",
    `read legacy merge manifest ${name}: ${problem}. Only the merge_model_pt version 1 layout ` +
      "(tool, version, iteration, files[model.pt] with size and sha256) is converted; see docs/archive.md.",
    { kind: "input", subject: name },
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Whether record bytes are a legacy merge manifest (its `tool` names the retired merge), judged
 * without validating the rest. Pure; malformed JSON is simply not legacy.
 */
export function isLegacyMergeManifest(bytes: Uint8Array): boolean {
  try {
    const json = parseStrictJson(new TextDecoder("utf-8", { fatal: true }).decode(bytes), {
      name: "legacy manifest",
    });
    return isObject(json) && json.tool === LEGACY_MERGE_TOOL;
  } catch {
    return false;
  }
}

/** Parses and checks a legacy merge manifest; throws PUBLISH_MANIFEST_INVALID naming `name`. Pure. */
export function parseLegacyMergeManifest(bytes: Uint8Array, name: string): LegacyMergeManifest {
  let json: unknown;
  try {
    json = parseStrictJson(new TextDecoder("utf-8", { fatal: true }).decode(bytes), { name });
  } catch (error) {
    throw invalid(name, messageOf(error));
  }
  if (!isObject(json)) throw invalid(name, "the document is not a JSON object");
  const extra = Object.keys(json).find((k) => !FIELDS.includes(k));
  if (extra !== undefined) throw invalid(name, `unknown field ${JSON.stringify(extra.slice(0, 80))}`);
  if (json.tool !== LEGACY_MERGE_TOOL) throw invalid(name, "tool is not merge_model_pt");
  if (json.version !== LEGACY_MERGE_VERSION) {
    throw invalid(name, `version ${JSON.stringify(json.version)} is not ${LEGACY_MERGE_VERSION}`);
  }
  const iteration = json.iteration;
  if (typeof iteration !== "number" || !Number.isSafeInteger(iteration) || iteration < 0) {
    throw invalid(name, "iteration is not a non-negative integer");
  }
  const files = json.files;
  if (!isObject(files) || Object.keys(files).length !== 1 || !isObject(files["model.pt"])) {
    throw invalid(name, "files must describe model.pt and nothing else");
  }
  const model = files["model.pt"];
  const size = model.size;
  const sha256 = model.sha256;
  if (Object.keys(model).some((k) => k !== "size" && k !== "sha256")) {
    throw invalid(name, "files[model.pt] may hold only size and sha256");
  }
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
    throw invalid(name, "files[model.pt].size is not a byte count");
  }
  if (typeof sha256 !== "string" || !/^[0-9a-f]{64}$/.test(sha256)) {
    throw invalid(name, "files[model.pt].sha256 is not 64 lower-case hex digits");
  }
  return {
    tool: LEGACY_MERGE_TOOL,
    version: LEGACY_MERGE_VERSION,
    iteration,
    files: { "model.pt": { size, sha256 } },
  };
}

/** The native manifest equivalent to a legacy merge manifest: consolidated, model only. Pure. */
export function convertLegacyMergeManifest(legacy: LegacyMergeManifest): ArtifactManifest {
  const model = legacy.files["model.pt"];
  return {
    schema: "posttrain.checkpoint-artifact.v1",
    iteration: legacy.iteration,
    format: "consolidated",
    logical_components: ["model"],
    physical_components: [
      { name: "model", kind: "file", path: "model.pt", size: model.size, sha256: model.sha256 },
    ],
    producer: `${LEGACY_MERGE_TOOL}/${LEGACY_MERGE_VERSION}`,
  };
}
