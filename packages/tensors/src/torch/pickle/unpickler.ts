import { TensorsError, type TensorsErrorCode } from "../../errors.js";
import { truncateForMessage } from "../text.js";
import { PickleDict, PickleFloat, PickleGlobal, PickleObject, PickleSet, PickleTuple } from "./values.js";

/** Largest pickle accepted: a torch data.pkl for 100k tensors is a few MB; bounds memory. */
export const MAX_PICKLE_BYTES = 256 * 1024 * 1024;
/** Opcodes executed per pickle: ~30 per tensor in torch.save output; bounds time on crafted loops of GETs. */
const MAX_PICKLE_OPS = 50_000_000;
/** Memo entries: torch.save memoizes ~15 values per tensor; bounds the memo table. */
const MAX_MEMO_ENTRIES = 10_000_000;
/** Values on the stack at once: pickle batches SETITEMS/APPENDS by 1000, so real stacks stay small. */
const MAX_STACK_ITEMS = 1_000_000;
/** Open MARKs at once (tuple/list/dict nesting while building); Python's own recursion limit is ~1000. */
const MAX_MARK_DEPTH = 1000;
/** Items in one list, dict, tuple or set: DCP storage_data holds tensors × shards entries. */
const MAX_CONTAINER_ITEMS = 20_000_000;
/** Highest pickle protocol understood (Python 3.8+ writes up to 5). */
const MAX_PICKLE_PROTOCOL = 5;

/** What a caller allows: which globals exist, what calling them builds, how persistent ids load. */
export interface UnpicklePolicy {
  /** Returns the global or throws PICKLE_GLOBAL_REFUSED; never imports or calls anything. */
  resolveGlobal(module: string, name: string): PickleGlobal;
  /** REDUCE: `callable(*args)` for an allowed callable. */
  call(callable: PickleGlobal, args: readonly unknown[]): unknown;
  /** NEWOBJ: `cls.__new__(cls, *args)` for an allowed class. */
  newObject(cls: PickleGlobal, args: readonly unknown[]): unknown;
  /** BUILD: `target.__setstate__(state)` or `target.__dict__.update(state)`. */
  build(target: unknown, state: unknown): void;
  /** BINPERSID; a policy without persistent ids refuses. */
  persistentLoad(pid: unknown): unknown;
}

const MARK = Symbol("mark");
const decoder = new TextDecoder("utf-8", { fatal: true });

/** Opcode names for refusal messages (the ones torch.save never writes are refused by name). */
const REFUSED_OPCODE_NAMES: Record<number, string> = {
  73: "INT",
  76: "LONG",
  70: "FLOAT",
  83: "STRING",
  84: "BINSTRING",
  85: "SHORT_BINSTRING",
  86: "UNICODE",
  80: "PERSID",
  112: "PUT",
  103: "GET",
  105: "INST",
  111: "OBJ",
  139: "LONG4",
  130: "EXT1",
  131: "EXT2",
  132: "EXT4",
  146: "NEWOBJ_EX",
  150: "BYTEARRAY8",
  151: "NEXT_BUFFER",
  152: "READONLY_BUFFER",
};

function isHashable(key: unknown): boolean {
  return (
    key === null ||
    typeof key === "string" ||
    typeof key === "number" ||
    typeof key === "bigint" ||
    typeof key === "boolean" ||
    key instanceof PickleFloat ||
    key instanceof PickleTuple ||
    key instanceof PickleObject ||
    (key instanceof PickleSet && key.frozen) ||
    key instanceof Uint8Array
  );
}

/**
 * Runs a pickle on a stack machine that only builds plain values; every global goes through the
 * policy (an allow-list), so nothing a file names is ever imported or executed.
 */
export function unpickle(bytes: Uint8Array, policy: UnpicklePolicy, file: string, what = "pickle"): unknown {
  const fail = (code: TensorsErrorCode, message: string): never => {
    throw new TensorsError(code, `unpickle ${what} of ${file}: ${message}`, { kind: "input", file });
  };
  if (bytes.length > MAX_PICKLE_BYTES) {
    fail("PICKLE_TOO_LARGE", `${bytes.length} bytes; max ${MAX_PICKLE_BYTES}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const stack: unknown[] = [];
  const marks: number[] = [];
  const memo = new Map<number, unknown>();
  let pos = 0;
  let ops = 0;

  const need = (n: number): number => {
    if (n > bytes.length - pos)
      fail("PICKLE_TRUNCATED", `needs ${n} bytes at offset ${pos}; the pickle ends`);
    const at = pos;
    pos += n;
    return at;
  };
  const push = (value: unknown): void => {
    if (stack.length >= MAX_STACK_ITEMS)
      fail("PICKLE_STACK_TOO_DEEP", `more than ${MAX_STACK_ITEMS} stack items`);
    stack.push(value);
  };
  const pop = (): unknown => {
    if (stack.length === 0 || (marks.length > 0 && stack.length <= marks[marks.length - 1]! + 1)) {
      fail("PICKLE_STACK_UNDERFLOW", `stack underflow at offset ${pos - 1}`);
    }
    return stack.pop();
  };
  const top = (): unknown => {
    if (stack.length === 0 || (marks.length > 0 && stack.length <= marks[marks.length - 1]! + 1)) {
      fail("PICKLE_STACK_UNDERFLOW", `stack underflow at offset ${pos - 1}`);
    }
    return stack[stack.length - 1];
  };
  const popMark = (): unknown[] => {
    const mark = marks.pop();
    if (mark === undefined) fail("PICKLE_STACK_UNDERFLOW", `no MARK for the opcode at offset ${pos - 1}`);
    const items = stack.splice(mark!);
    if (items.length > MAX_CONTAINER_ITEMS) {
      fail("PICKLE_CONTAINER_TOO_LARGE", `${items.length} items; max ${MAX_CONTAINER_ITEMS}`);
    }
    return items;
  };
  const text = (at: number, n: number): string => {
    try {
      return decoder.decode(bytes.subarray(at, at + n));
    } catch (cause) {
      throw new TensorsError(
        "PICKLE_BAD_UTF8",
        `unpickle ${what} of ${file}: invalid UTF-8 at offset ${at}`,
        { kind: "input", file, cause },
      );
    }
  };
  const memoPut = (index: number, value: unknown): void => {
    if (!memo.has(index) && memo.size >= MAX_MEMO_ENTRIES) {
      fail("PICKLE_MEMO_TOO_LARGE", `more than ${MAX_MEMO_ENTRIES} memo entries`);
    }
    memo.set(index, value);
  };
  const memoGet = (index: number): void => {
    if (!memo.has(index)) fail("PICKLE_MEMO_MISSING", `memo entry ${index} was never stored`);
    push(memo.get(index));
  };
  const length64 = (at: number): number => {
    const n = view.getBigUint64(at, true);
    if (n > BigInt(bytes.length)) fail("PICKLE_TRUNCATED", `length ${n} at offset ${at} exceeds the pickle`);
    return Number(n);
  };
  const setItem = (target: unknown, key: unknown, value: unknown): void => {
    if (!(target instanceof PickleDict)) fail("PICKLE_INVALID", `SETITEM on a non-dict at offset ${pos - 1}`);
    if (!isHashable(key)) fail("PICKLE_INVALID", `unhashable dict key at offset ${pos - 1}`);
    const dict = target as PickleDict;
    dict.map.set(key, value);
    if (dict.map.size > MAX_CONTAINER_ITEMS) {
      fail("PICKLE_CONTAINER_TOO_LARGE", `dict of more than ${MAX_CONTAINER_ITEMS} items`);
    }
  };
  const extend = (target: unknown, items: readonly unknown[]): void => {
    if (!Array.isArray(target)) fail("PICKLE_INVALID", `APPEND on a non-list at offset ${pos - 1}`);
    const list = target as unknown[];
    if (list.length + items.length > MAX_CONTAINER_ITEMS) {
      fail("PICKLE_CONTAINER_TOO_LARGE", `list of more than ${MAX_CONTAINER_ITEMS} items`);
    }
    for (const item of items) list.push(item);
  };
  const asGlobal = (value: unknown, op: string): PickleGlobal => {
    if (!(value instanceof PickleGlobal)) {
      fail("PICKLE_INVALID", `${op} on something that is not an allowed global at offset ${pos - 1}`);
    }
    return value as PickleGlobal;
  };
  const asArgs = (value: unknown, op: string): readonly unknown[] => {
    if (!(value instanceof PickleTuple))
      fail("PICKLE_INVALID", `${op} arguments are not a tuple at offset ${pos - 1}`);
    return (value as PickleTuple).items;
  };

  while (true) {
    if (++ops > MAX_PICKLE_OPS) fail("PICKLE_TOO_MANY_OPS", `more than ${MAX_PICKLE_OPS} opcodes`);
    const opAt = need(1);
    const op = bytes[opAt]!;
    switch (op) {
      case 0x80: {
        const proto = bytes[need(1)]!;
        if (proto < 2 || proto > MAX_PICKLE_PROTOCOL) {
          fail("PICKLE_PROTOCOL_UNSUPPORTED", `protocol ${proto}; supported 2..${MAX_PICKLE_PROTOCOL}`);
        }
        break;
      }
      case 0x95: // FRAME: a length hint for buffered reading; the whole pickle is in memory already.
        length64(need(8));
        break;
      case 0x2e: {
        // STOP
        if (marks.length > 0 || stack.length !== 1) {
          fail("PICKLE_INVALID", `STOP with ${stack.length} values and ${marks.length} open MARKs`);
        }
        return stack[0];
      }
      case 0x7d:
        push(new PickleDict(false));
        break;
      case 0x5d:
        push([]);
        break;
      case 0x29:
        push(new PickleTuple([]));
        break;
      case 0x8f:
        push(new PickleSet([], false));
        break;
      case 0x90: {
        // ADDITEMS
        const items = popMark();
        const set = top();
        if (!(set instanceof PickleSet) || set.frozen) fail("PICKLE_INVALID", "ADDITEMS on a non-set");
        const target = set as PickleSet;
        if (target.items.length + items.length > MAX_CONTAINER_ITEMS) {
          fail("PICKLE_CONTAINER_TOO_LARGE", `set of more than ${MAX_CONTAINER_ITEMS} items`);
        }
        for (const item of items) target.items.push(item);
        break;
      }
      case 0x91:
        push(new PickleSet(popMark(), true));
        break;
      case 0x58: {
        const n = view.getUint32(need(4), true);
        push(text(need(n), n));
        break;
      }
      case 0x8c: {
        const n = bytes[need(1)]!;
        push(text(need(n), n));
        break;
      }
      case 0x8d: {
        const n = length64(need(8));
        push(text(need(n), n));
        break;
      }
      case 0x42: {
        const n = view.getUint32(need(4), true);
        const at = need(n);
        push(bytes.slice(at, at + n));
        break;
      }
      case 0x43: {
        const n = bytes[need(1)]!;
        const at = need(n);
        push(bytes.slice(at, at + n));
        break;
      }
      case 0x8e: {
        const n = length64(need(8));
        const at = need(n);
        push(bytes.slice(at, at + n));
        break;
      }
      case 0x71:
        memoPut(bytes[need(1)]!, top());
        break;
      case 0x72:
        memoPut(view.getUint32(need(4), true), top());
        break;
      case 0x94:
        memoPut(memo.size, top());
        break;
      case 0x68:
        memoGet(bytes[need(1)]!);
        break;
      case 0x6a:
        memoGet(view.getUint32(need(4), true));
        break;
      case 0x63: {
        // GLOBAL: "module\nname\n"
        const readLine = (): string => {
          const end = bytes.indexOf(0x0a, pos);
          if (end < 0 || end - pos > 1024)
            fail("PICKLE_TRUNCATED", `GLOBAL at offset ${opAt} has no newline`);
          const line = text(pos, end - pos);
          pos = end + 1;
          return line;
        };
        const module = readLine();
        const name = readLine();
        push(policy.resolveGlobal(module, name));
        break;
      }
      case 0x93: {
        const name = pop();
        const module = pop();
        if (typeof module !== "string" || typeof name !== "string") {
          fail("PICKLE_INVALID", `STACK_GLOBAL on non-strings at offset ${opAt}`);
        }
        push(policy.resolveGlobal(module as string, name as string));
        break;
      }
      case 0x52: {
        const args = asArgs(pop(), "REDUCE");
        const callable = asGlobal(pop(), "REDUCE");
        push(policy.call(callable, args));
        break;
      }
      case 0x81: {
        const args = asArgs(pop(), "NEWOBJ");
        const cls = asGlobal(pop(), "NEWOBJ");
        push(policy.newObject(cls, args));
        break;
      }
      case 0x62: {
        const state = pop();
        policy.build(top(), state);
        break;
      }
      case 0x51:
        push(policy.persistentLoad(pop()));
        break;
      case 0x28:
        if (marks.length >= MAX_MARK_DEPTH) fail("PICKLE_TOO_DEEP", `more than ${MAX_MARK_DEPTH} open MARKs`);
        marks.push(stack.length);
        stack.push(MARK);
        break;
      case 0x31: // POP_MARK
        popMark();
        break;
      case 0x30: // POP
        pop();
        break;
      case 0x32: // DUP
        push(top());
        break;
      case 0x74:
        push(new PickleTuple(popMark().slice(1)));
        break;
      case 0x85:
        push(new PickleTuple([pop()]));
        break;
      case 0x86: {
        const b = pop();
        const a = pop();
        push(new PickleTuple([a, b]));
        break;
      }
      case 0x87: {
        const c = pop();
        const b = pop();
        const a = pop();
        push(new PickleTuple([a, b, c]));
        break;
      }
      case 0x6c:
        push(popMark().slice(1));
        break;
      case 0x61: {
        const value = pop();
        extend(top(), [value]);
        break;
      }
      case 0x65: {
        const items = popMark().slice(1);
        extend(top(), items);
        break;
      }
      case 0x64: {
        const items = popMark().slice(1);
        if (items.length % 2 !== 0)
          fail("PICKLE_INVALID", `DICT with an odd number of items at offset ${opAt}`);
        const dict = new PickleDict(false);
        for (let i = 0; i < items.length; i += 2) setItem(dict, items[i], items[i + 1]);
        push(dict);
        break;
      }
      case 0x73: {
        const value = pop();
        const key = pop();
        setItem(top(), key, value);
        break;
      }
      case 0x75: {
        const items = popMark().slice(1);
        if (items.length % 2 !== 0)
          fail("PICKLE_INVALID", `SETITEMS with an odd number of items at offset ${opAt}`);
        const target = top();
        // Checked before the items: an empty SETITEMS on a list must not pass for a dict update.
        if (!(target instanceof PickleDict))
          fail("PICKLE_INVALID", `SETITEMS on a non-dict at offset ${opAt}`);
        for (let i = 0; i < items.length; i += 2) setItem(target, items[i], items[i + 1]);
        break;
      }
      case 0x4a:
        push(view.getInt32(need(4), true));
        break;
      case 0x4b:
        push(bytes[need(1)]!);
        break;
      case 0x4d:
        push(view.getUint16(need(2), true));
        break;
      case 0x8a: {
        const n = bytes[need(1)]!;
        const at = need(n);
        let value = 0n;
        for (let i = n - 1; i >= 0; i--) value = (value << 8n) | BigInt(bytes[at + i]!);
        if (n > 0 && bytes[at + n - 1]! & 0x80) value -= 1n << BigInt(8 * n);
        const small = Number(value);
        push(Number.isSafeInteger(small) ? small : value);
        break;
      }
      case 0x47:
        push(new PickleFloat(view.getFloat64(need(8), false)));
        break;
      case 0x88:
        push(true);
        break;
      case 0x89:
        push(false);
        break;
      case 0x4e:
        push(null);
        break;
      default: {
        const name = REFUSED_OPCODE_NAMES[op];
        fail(
          "PICKLE_OPCODE_REFUSED",
          `opcode ${name ?? `0x${op.toString(16).padStart(2, "0")}`} at offset ${opAt} is not allowed` +
            ` (only the opcodes torch.save and dataclass pickles use)`,
        );
      }
    }
  }
}

/** Refuses a global by name, like torch.load(weights_only=True); the name is truncated for the message. */
export function refuseGlobal(module: string, name: string, file: string, what: string): never {
  throw new TensorsError(
    "PICKLE_GLOBAL_REFUSED",
    `unpickle ${what} of ${file}: global ${truncateForMessage(`${module}.${name}`)} is not allowed` +
      " (it is not on the allow-list; nothing a file names is ever imported or called)",
    { file, kind: "refused" },
  );
}
