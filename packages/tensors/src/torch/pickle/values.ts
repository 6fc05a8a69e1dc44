/**
 * Plain values built by the restricted unpickler. Python str, int, bool, None, bytes and list map
 * to string, number (bigint past 2^53), boolean, null, Uint8Array and Array;
 * the classes below stand for the Python types JavaScript has no direct equivalent for.
 */

/** A Python float, kept apart from int: `4.0` where a format needs an integer (a size, an offset) is refused. */
export class PickleFloat {
  constructor(
    /** The float's value. */
    readonly value: number,
  ) {}
  /** As Python prints it: `4.0`, `0.5`, `inf`. */
  toString(): string {
    if (Number.isNaN(this.value)) return "nan";
    if (!Number.isFinite(this.value)) return this.value > 0 ? "inf" : "-inf";
    return Number.isInteger(this.value) ? this.value.toFixed(1) : String(this.value);
  }
}

/** A Python tuple (kept apart from lists so sizes and strides stay recognisable). */
export class PickleTuple {
  constructor(readonly items: readonly unknown[]) {}
}

/** A Python dict or collections.OrderedDict; `attributes` holds what BUILD set (a state dict's `_metadata`). */
export class PickleDict {
  readonly map = new Map<unknown, unknown>();
  readonly attributes = new Map<string, unknown>();
  constructor(readonly ordered: boolean) {}
}

/** A Python set or frozenset. */
export class PickleSet {
  constructor(
    readonly items: unknown[],
    readonly frozen: boolean,
  ) {}
}

/** A reference to an allowed global (a class, function or constant); never called by itself. */
export class PickleGlobal {
  constructor(
    readonly module: string,
    readonly name: string,
  ) {}
  get qualifiedName(): string {
    return `${this.module}.${this.name}`;
  }
}

/** An instance of an allowed class built by NEWOBJ or REDUCE, with the state BUILD gave it. */
export class PickleObject {
  state: unknown = null;
  constructor(
    readonly cls: PickleGlobal,
    readonly args: readonly unknown[],
  ) {}
}
