import { describe, expect, it } from "vitest";
import { parseDcpMetadata } from "../../src/dcp/metadata.js";
import { TensorsError } from "../../src/errors.js";
import type { AllowList } from "../../src/torch/pickle/allow-list.js";
import { DCP_GLOBALS } from "../../src/torch/pickle/dcp-globals.js";
import { TORCH_GLOBALS } from "../../src/torch/pickle/torch-globals.js";
import { type UnpicklePolicy, unpickle } from "../../src/torch/pickle/unpickler.js";
import { PickleGlobal } from "../../src/torch/pickle/values.js";
import { torchPolicy } from "../../src/torch/tensor-policy.js";

const split = (qualified: string) => {
  const dot = qualified.lastIndexOf(".");
  return [qualified.slice(0, dot), qualified.slice(dot + 1)] as const;
};

/** The code a policy step throws, or "ok" when it answers. */
function outcome(step: () => unknown): string {
  try {
    step();
    return "ok";
  } catch (error) {
    expect(error).toBeInstanceOf(TensorsError);
    return (error as TensorsError).code;
  }
}

/** A protocol-2 pickle that names one global (GLOBAL) and stops. */
function namingPickle(module: string, name: string): Uint8Array {
  return new Uint8Array([0x80, 0x02, ...new TextEncoder().encode(`c${module}\n${name}\n`), 0x2e]);
}

const tables: Array<[string, AllowList, (file: string) => UnpicklePolicy]> = [
  ["torch.save", TORCH_GLOBALS, torchPolicy],
  [
    "DCP .metadata",
    DCP_GLOBALS,
    (file) => {
      // The DCP policy is internal to parseDcpMetadata; reach it through one pickle per global.
      return {
        resolveGlobal: (module: string, name: string) => {
          try {
            parseDcpMetadata(namingPickle(module, name), file);
          } catch (error) {
            if ((error as TensorsError).code === "PICKLE_GLOBAL_REFUSED") throw error;
          }
          return new PickleGlobal(module, name);
        },
      } as unknown as UnpicklePolicy;
    },
  ],
];

describe.each(tables)("the %s allow-list", (_, table, policyFor) => {
  it("every entry resolves by its exact module and name; nothing else does", () => {
    const policy = policyFor("f");
    for (const qualified of table.keys()) {
      const [module, name] = split(qualified);
      expect(policy.resolveGlobal(module, name).qualifiedName).toBe(qualified);
      // The same qualified name split elsewhere is another global.
      if (module.includes(".")) {
        const [outer, inner] = split(module);
        expect(outcome(() => policy.resolveGlobal(outer, `${inner}.${name}`))).toBe("PICKLE_GLOBAL_REFUSED");
      }
    }
    for (const [module, name] of [
      ["os", "system"],
      ["builtins", "eval"],
      ["torch", "load"],
      ["numpy.core.multiarray", "_reconstruct"],
    ] as const) {
      expect(outcome(() => policy.resolveGlobal(module, name))).toBe("PICKLE_GLOBAL_REFUSED");
    }
  });

  it("an unknown global named by a pickle is refused before anything is built (PICKLE_GLOBAL_REFUSED, refused)", () => {
    const read = () =>
      table === TORCH_GLOBALS
        ? unpickle(namingPickle("os", "system"), torchPolicy("f"), "f")
        : parseDcpMetadata(namingPickle("os", "system"), "f");
    expect(read).toThrow(expect.objectContaining({ code: "PICKLE_GLOBAL_REFUSED", kind: "refused" }));
  });
});

describe("handlers", () => {
  const all = [...TORCH_GLOBALS, ...DCP_GLOBALS];
  it("every entry is a value, callable or instantiable; values cannot be called or instantiated", () => {
    const policies = { torch: torchPolicy("f") };
    for (const [qualified, handler] of TORCH_GLOBALS) {
      const global = new PickleGlobal(...split(qualified));
      const called = outcome(() => policies.torch.call(global, []));
      if (handler.call === undefined) expect(called, qualified).toBe("PICKLE_CALL_REFUSED");
      else expect(called, qualified).toMatch(/^(ok|PICKLE_CALL_REFUSED|TORCH_BAD_TENSOR)$/);
      expect(
        outcome(() => policies.torch.newObject(global, [])),
        qualified,
      ).toBe("PICKLE_CALL_REFUSED");
    }
    const fail = (code: string): never => {
      throw new TensorsError(code as never, code, { kind: "input" });
    };
    for (const [qualified, handler] of all) {
      const global = new PickleGlobal(...split(qualified));
      for (const run of [handler.call, handler.newObject]) {
        if (run === undefined) continue;
        // Wrong arguments are refused with a code, never a crash.
        expect(
          outcome(() => run([Symbol("odd"), 1, 2], global, fail)),
          qualified,
        ).toMatch(/^(ok|PICKLE_CALL_REFUSED|TORCH_BAD_TENSOR)$/);
      }
    }
  });
});
