import type { GetOptions, ObjectStore } from "@ckpt/object-store";

export interface RecordedGet {
  readonly key: string;
  readonly range?: { readonly start: number; readonly end?: number };
}

/** Wraps a store and records every GET with its range, on any backend. */
export function recordGets(store: ObjectStore): { store: ObjectStore; gets: RecordedGet[] } {
  const gets: RecordedGet[] = [];
  const wrapped: ObjectStore = {
    identity: store.identity,
    uri: store.uri,
    createIfAbsent: (key, body, options) => store.createIfAbsent(key, body, options),
    put: (key, body, options) => store.put(key, body, options),
    head: (key, options) => store.head(key, options),
    get: (key: string, options?: GetOptions) => {
      gets.push({ key, ...(options?.range === undefined ? {} : { range: options.range }) });
      return store.get(key, options);
    },
    list: (prefix, options) => store.list(prefix, options),
    delete: (key, options) => store.delete(key, options),
  };
  return { store: wrapped, gets };
}
