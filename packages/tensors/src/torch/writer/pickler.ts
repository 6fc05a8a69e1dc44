/** A protocol-2 pickle builder for the handful of shapes torch.save writes (GLOBAL opcodes, no STACK_GLOBAL). */
export class Pickler {
  private readonly chunks: Uint8Array[] = [];
  private readonly globals = new Map<string, number>();
  private memoSize = 0;

  constructor() {
    this.bytes(0x80, 2);
  }

  bytes(...values: number[]): void {
    this.chunks.push(Uint8Array.from(values));
  }

  private u32(op: number, value: number): void {
    const b = new Uint8Array(5);
    b[0] = op;
    new DataView(b.buffer).setUint32(1, value, true);
    this.chunks.push(b);
  }

  private memoize(): number {
    const index = this.memoSize++;
    if (index < 256) this.bytes(0x71, index);
    else this.u32(0x72, index);
    return index;
  }

  /** GLOBAL `module\nname\n`, memoized so a second use is a BINGET. */
  global(module: string, name: string): void {
    const key = `${module}\n${name}\n`;
    const known = this.globals.get(key);
    if (known !== undefined) {
      if (known < 256) this.bytes(0x68, known);
      else this.u32(0x6a, known);
      return;
    }
    this.bytes(0x63);
    this.chunks.push(Buffer.from(key, "utf8"));
    this.globals.set(key, this.memoize());
  }

  string(value: string): void {
    const encoded = Buffer.from(value, "utf8");
    this.u32(0x58, encoded.length);
    this.chunks.push(encoded);
  }

  int(value: number): void {
    if (value >= 0 && value < 256) this.bytes(0x4b, value);
    else if (value >= 0 && value < 65536) this.bytes(0x4d, value & 0xff, value >> 8);
    else if (value >= -(2 ** 31) && value < 2 ** 31) this.u32(0x4a, value >>> 0);
    else {
      // LONG1: little-endian two's complement, as short as the sign allows.
      let big = BigInt(value);
      const out: number[] = [];
      do {
        out.push(Number(big & 0xffn));
        big >>= 8n;
      } while (
        !(big === 0n && (out[out.length - 1]! & 0x80) === 0) &&
        !(big === -1n && (out[out.length - 1]! & 0x80) !== 0)
      );
      this.bytes(0x8a, out.length, ...out);
    }
  }

  float(value: number): void {
    const b = new Uint8Array(9);
    b[0] = 0x47;
    new DataView(b.buffer).setFloat64(1, value, false);
    this.chunks.push(b);
  }

  bool(value: boolean): void {
    this.bytes(value ? 0x88 : 0x89);
  }

  none(): void {
    this.bytes(0x4e);
  }

  mark(): void {
    this.bytes(0x28);
  }

  /** A tuple of ints (sizes, strides). */
  intTuple(values: readonly number[]): void {
    if (values.length === 0) {
      this.bytes(0x29);
      return;
    }
    if (values.length > 3) this.mark();
    for (const v of values) this.int(v);
    this.bytes(values.length > 3 ? 0x74 : [0x85, 0x86, 0x87][values.length - 1]!);
  }

  emptyTuple(): void {
    this.bytes(0x29);
  }
  tuple(): void {
    this.bytes(0x74);
  }
  reduce(): void {
    this.bytes(0x52);
  }
  persistentId(): void {
    this.bytes(0x51);
  }
  emptyDict(): void {
    this.bytes(0x7d);
  }
  setItems(): void {
    this.bytes(0x75);
  }
  stop(): Uint8Array {
    this.bytes(0x2e);
    return Buffer.concat(this.chunks);
  }
}
