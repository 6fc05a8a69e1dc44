/** File names of the records, as they appear on disk and in object stores. */
export const ARTIFACT_MANIFEST_FILE = ".posttrain-checkpoint-artifact.json";
/** Original bytes of a legacy merge manifest, kept when it is rewritten in the native schema. */
export const LEGACY_ARTIFACT_MANIFEST_FILE = ".posttrain-checkpoint-artifact.legacy.json";
export const ARCHIVE_DECLARATION_FILE = ".posttrain-archive.json";
export const UPLOADED_MARKER_FILE = ".uploaded";
export const STAGED_RECORD_FILE = ".staged.json";
export const MERGE_COMPLETE_FILE = ".merge-complete.json";
export const MATERIALIZED_MARKER_FILE = ".materialized";
export const OVERLAY_SOURCE_FILE = ".overlay_source.json";
export const CONTROL_MANIFEST_FILE = ".posttrain-manifest.json";
export const MULTI_ROLE_SUCCESS_FILE = "_SUCCESS";
export const LATEST_CHECKPOINT_FILE = "latest_checkpoint.txt";
/** A full checkpoint's validation transaction; it moves on after an archive receipt recorded it. */
export const VALIDATION_STATE_FILE = ".posttrain-validation.json";
/** Beside a checkpoint description: the tensors (dtype, shape) of each component it summarises. */
export const TENSOR_INVENTORY_FILE = ".posttrain-checkpoint-tensors.json";
