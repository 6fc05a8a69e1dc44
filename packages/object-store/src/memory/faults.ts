/** The operations of an ObjectStore, as named in the memory store's call log and faults. */
export type StoreOperation = "createIfAbsent" | "put" | "head" | "get" | "list" | "delete";

/** Which calls a fault applies to. Calls are counted per fault, over the calls it matches. */
export interface FaultTarget {
  /** Only calls about this key (for list: this prefix). Default: any key. */
  readonly key?: string;
  /** The first matching call (1-based) the fault fires on. Default: every matching call. */
  readonly nth?: number;
  /** How many consecutive matching calls from `nth` it fires on. Default 1 with `nth`, else all. */
  readonly times?: number;
}

/**
 * A fault the memory store injects. Each attempt of a call counts (the store retries transient
 * failures like a real backend, so a transient fault on call 1 is retried by call 2).
 */
export type MemoryFault =
  /** Fail the call: `transient` as STORE_TRANSIENT (retried), otherwise as STORE_REQUEST_FAILED. */
  | (FaultTarget & { readonly type: "fail"; readonly op: StoreOperation; readonly transient?: boolean })
  /** Delay the call (the per-call timeout and the abort signal apply during the delay). */
  | (FaultTarget & { readonly type: "delay"; readonly op: StoreOperation; readonly ms: number })
  /** End a GET body cleanly after `bytes` bytes, like a connection cut without an error. */
  | (FaultTarget & { readonly type: "truncateGet"; readonly bytes: number })
  /** Ignore the conditional header: createIfAbsent overwrites and reports "created". */
  | (FaultTarget & { readonly type: "ignoreConditional" })
  /** Make HEAD report another sha256 and/or size than the stored object has. */
  | (FaultTarget & { readonly type: "lieOnHead"; readonly sha256?: string; readonly size?: number });

/** The operation a fault applies to. Pure. */
export function faultOperation(fault: MemoryFault): StoreOperation {
  switch (fault.type) {
    case "fail":
    case "delay":
      return fault.op;
    case "truncateGet":
      return "get";
    case "ignoreConditional":
      return "createIfAbsent";
    case "lieOnHead":
      return "head";
  }
}

/** Whether a fault fires on the `matchCount`-th call it matches (1-based). Pure. */
export function faultFires(fault: MemoryFault, matchCount: number): boolean {
  if (fault.nth === undefined) return fault.times === undefined || matchCount <= fault.times;
  return matchCount >= fault.nth && matchCount < fault.nth + (fault.times ?? 1);
}
