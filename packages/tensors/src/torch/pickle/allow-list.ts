import type { TensorsErrorCode } from "../../errors.js";
import { refuseGlobal, type UnpicklePolicy } from "./unpickler.js";
import { PickleGlobal } from "./values.js";

/** How a handler refuses: throws a TensorsError naming the pickle and file. */
export type Refuse = (code: TensorsErrorCode, message: string) => never;

/**
 * What an allowed global may do once a pickle names it: `call` answers REDUCE (`global(*args)`),
 * `newObject` answers NEWOBJ (`global.__new__(global, *args)`). An entry with neither is a value
 * only (a dtype, a storage type, a constant): naming it is allowed, calling it is refused.
 */
export interface GlobalHandler {
  readonly call?: (args: readonly unknown[], global: PickleGlobal, fail: Refuse) => unknown;
  readonly newObject?: (args: readonly unknown[], global: PickleGlobal, fail: Refuse) => unknown;
}

/** A value-only entry. */
export const VALUE: GlobalHandler = {};

/** An allow-list: qualified name (`module.name`) -> what that global may do. Every other global is refused by name. */
export type AllowList = ReadonlyMap<string, GlobalHandler>;

/** The module part of a qualified name: everything before the last dot (Python names hold no dot). */
function moduleOf(qualified: string): string {
  return qualified.slice(0, qualified.lastIndexOf("."));
}

/**
 * The global-facing half of an unpickling policy, from an allow-list: a global resolves only when
 * its module and name are an entry's exactly; REDUCE and NEWOBJ run the entry's handler, else
 * `refused` says why not.
 */
export function allowListGlobals(
  table: AllowList,
  where: { readonly file: string; readonly what: string },
  fail: Refuse,
  refused: { call(global: PickleGlobal): never; newObject(global: PickleGlobal): never },
): Pick<UnpicklePolicy, "resolveGlobal" | "call" | "newObject"> {
  return {
    resolveGlobal(module, name) {
      const qualified = `${module}.${name}`;
      if (!table.has(qualified) || moduleOf(qualified) !== module)
        refuseGlobal(module, name, where.file, where.what);
      return new PickleGlobal(module, name);
    },
    call(callable, args) {
      const handler = table.get(callable.qualifiedName)?.call;
      return handler ? handler(args, callable, fail) : refused.call(callable);
    },
    newObject(cls, args) {
      const handler = table.get(cls.qualifiedName)?.newObject;
      return handler ? handler(args, cls, fail) : refused.newObject(cls);
    },
  };
}
