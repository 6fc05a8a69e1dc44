import { dtypeSize } from "../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { allowListGlobals } from "./pickle/allow-list.js";
import { storageDtype, TORCH_GLOBALS } from "./pickle/torch-globals.js";
import type { UnpicklePolicy } from "./pickle/unpickler.js";
import { PickleDict, PickleFloat, PickleGlobal, PickleTuple } from "./pickle/values.js";
import { truncateForMessage } from "./text.js";
import { TorchStorageRef } from "./torch-tensor.js";

/** Storage keys are decimal counters in torch.save; longer or path-like keys are refused. */
const MAX_STORAGE_KEY_CHARS = 128;
const STORAGE_KEY = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

function isIndex(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** The torch.save policy: the globals of TORCH_GLOBALS, BUILD on dicts only, persistent ids naming storages. */
export function torchPolicy(file: string): UnpicklePolicy {
  const what = "data.pkl";
  const storages = new Map<string, TorchStorageRef>();
  const fail = (code: TensorsErrorCode, message: string): never => {
    throw new TensorsError(code, `unpickle ${what} of ${file}: ${message}`, { kind: "input", file });
  };
  return {
    ...allowListGlobals(TORCH_GLOBALS, { file, what }, fail, {
      call: (callable) =>
        fail("PICKLE_CALL_REFUSED", `${truncateForMessage(callable.qualifiedName)} cannot be called`),
      newObject: (cls) =>
        fail(
          "PICKLE_CALL_REFUSED",
          `NEWOBJ of ${truncateForMessage(cls.qualifiedName)} is not allowed in torch files`,
        ),
    }),
    build(target, state) {
      if (!(target instanceof PickleDict)) fail("PICKLE_INVALID", "BUILD on something other than a dict");
      const dict = target as PickleDict;
      const parts = state instanceof PickleTuple && state.items.length === 2 ? state.items : [state];
      for (const part of parts) {
        if (part === null) continue;
        if (!(part instanceof PickleDict)) return fail("PICKLE_INVALID", "BUILD state is not a dict");
        for (const [key, value] of part.map) {
          if (typeof key !== "string") return fail("PICKLE_INVALID", "BUILD attribute name is not a string");
          dict.attributes.set(key, value);
        }
      }
    },
    persistentLoad(pid) {
      if (!(pid instanceof PickleTuple) || pid.items.length !== 5 || pid.items[0] !== "storage") {
        return fail(
          "TORCH_BAD_PERSISTENT_ID",
          "persistent id is not ('storage', type, key, location, numel)",
        );
      }
      const [, type, key, , numel] = pid.items;
      const dtype = type instanceof PickleGlobal ? storageDtype(type) : undefined;
      if (dtype === undefined) return fail("TORCH_BAD_PERSISTENT_ID", "persistent id names no storage type");
      if (
        typeof key !== "string" ||
        key.length > MAX_STORAGE_KEY_CHARS ||
        !STORAGE_KEY.test(key) ||
        /^\.+$/.test(key)
      ) {
        return fail(
          "TORCH_BAD_STORAGE_KEY",
          `storage key ${truncateForMessage(String(key))} is not a plain name`,
        );
      }
      if (!isIndex(numel) || numel * dtypeSize(dtype) > Number.MAX_SAFE_INTEGER) {
        return fail(
          "TORCH_BAD_PERSISTENT_ID",
          `storage ${truncateForMessage(key)} has element count ${truncateForMessage(String(numel))}${numel instanceof PickleFloat ? " (a float)" : ""}; it is an integer`,
        );
      }
      let ref = storages.get(key);
      if (!ref) {
        ref = new TorchStorageRef(key, dtype, numel);
        storages.set(key, ref);
      } else if (ref.dtype !== dtype || ref.numel !== numel) {
        // torch.save never names one storage twice differently; reading it as two types is how
        // crafted files alias memory (the CVE-2026-24747 class).
        return fail(
          "TORCH_STORAGE_CONFLICT",
          `storage ${truncateForMessage(key)} is named as ${ref.numel} ${ref.dtype} elements and as ${numel} ${dtype}`,
        );
      }
      return ref;
    },
  };
}
