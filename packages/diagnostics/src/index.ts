// Public surface of @ckpt/diagnostics: checks the CLI runs on a whole directory or volume.

export { DiagnosticsError, type DiagnosticsErrorCode } from "./errors.js";

// --- a directory's identity (`ckpt fingerprint`)
export {
  type DirectoryFingerprint,
  type FingerprintFile,
  type FingerprintMode,
  type FingerprintOptions,
  FAST_FINGERPRINT_EXTENSIONS,
  FINGERPRINT_EXCLUDED_FILES,
  FINGERPRINT_SCHEMA,
  fingerprintDirectory,
  fingerprintOf,
} from "./fingerprint.js";

// --- how a volume behaves under ckpt's commit sequence (`ckpt doctor volume`; `describeVolume` is its read-only half)
export {
  type ProbeStep,
  type ProbeStorageOptions,
  type StorageProbeReport,
  type VolumeDescription,
  type VolumeTier,
  VOLUME_TIER_PROMISES,
  describeVolume,
  probeStorage,
  storageVerdict,
} from "./storage-probe.js";
