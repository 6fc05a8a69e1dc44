import type { FileHandle } from "node:fs/promises";
import { crc32 } from "node:zlib";
import { writeFully } from "@ckpt/manifest";

/** torch aligns every member's data to 64 bytes so storages can be mapped in place. */
const MEMBER_ALIGNMENT = 64;
/** Extra-field id torch uses for alignment padding ("FB"). */
const PADDING_EXTRA_ID = 0x4246;
const U32_MAX = 0xffffffff;
/** DOS date 1980-01-01, time 00:00 (torch writes 0; a valid date keeps strict unzip tools quiet). */
const DOS_DATE = 0x21;

interface CentralEntry {
  name: Buffer;
  crc: number;
  size: number;
  offset: number;
}

/**
 * Writes a stored (uncompressed) zip the way torch.save does: data aligned to 64 bytes with an
 * 'FB' padding extra field, CRC and sizes in a data descriptor after each member, zip64 end records.
 */
export class ZipStreamWriter {
  private offset = 0;
  private readonly entries: CentralEntry[] = [];

  constructor(private readonly handle: FileHandle) {}

  /**
   * Appends `bytes` (in slices small enough for the page cache to fill quickly: see
   * `writeFully`). Every slice is written before this returns, so the caller may reuse its buffer.
   */
  private async write(bytes: Uint8Array): Promise<void> {
    const position = this.offset;
    this.offset += bytes.length;
    await writeFully(this.handle, bytes, position);
  }

  /**
   * Writes one member. `size` is known beforehand (so zip64 fields can go in the local header);
   * `chunks` must add up to it, which the caller checks through the returned count.
   */
  async addMember(
    name: string,
    size: number,
    chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<number> {
    const nameBytes = Buffer.from(name, "utf8");
    const zip64 = size >= U32_MAX;
    const headerStart = this.offset;
    const zip64Extra = zip64 ? 20 : 0;
    const minimum = headerStart + 30 + nameBytes.length + zip64Extra + 4;
    const padding = (MEMBER_ALIGNMENT - (minimum % MEMBER_ALIGNMENT)) % MEMBER_ALIGNMENT;
    const extraLength = zip64Extra + 4 + padding;
    const header = Buffer.alloc(30 + nameBytes.length + extraLength);
    header.writeUInt32LE(0x04034b50, 0);
    header.writeUInt16LE(zip64 ? 45 : 20, 4);
    header.writeUInt16LE(0x0808, 6); // sizes in a data descriptor; UTF-8 names
    header.writeUInt16LE(0, 8);
    header.writeUInt16LE(0, 10);
    header.writeUInt16LE(DOS_DATE, 12);
    header.writeUInt32LE(0, 14);
    header.writeUInt32LE(zip64 ? U32_MAX : 0, 18);
    header.writeUInt32LE(zip64 ? U32_MAX : 0, 22);
    header.writeUInt16LE(nameBytes.length, 26);
    header.writeUInt16LE(extraLength, 28);
    nameBytes.copy(header, 30);
    let at = 30 + nameBytes.length;
    if (zip64) {
      header.writeUInt16LE(0x0001, at);
      header.writeUInt16LE(16, at + 2);
      header.writeBigUInt64LE(BigInt(size), at + 4);
      header.writeBigUInt64LE(BigInt(size), at + 12);
      at += 20;
    }
    header.writeUInt16LE(PADDING_EXTRA_ID, at);
    header.writeUInt16LE(padding, at + 2);
    header.fill(0x5a, at + 4); // 'Z', as torch pads
    await this.write(header);
    let crc = 0;
    let written = 0;
    for await (const chunk of chunks) {
      written += chunk.length;
      if (written > size) return written;
      // The write runs on the thread pool; the CRC of the same (unchanged) bytes overlaps it here.
      const writing = this.write(chunk);
      crc = crc32(chunk, crc);
      await writing;
    }
    const descriptor = Buffer.alloc(zip64 ? 24 : 16);
    descriptor.writeUInt32LE(0x08074b50, 0);
    descriptor.writeUInt32LE(crc >>> 0, 4);
    if (zip64) {
      descriptor.writeBigUInt64LE(BigInt(written), 8);
      descriptor.writeBigUInt64LE(BigInt(written), 16);
    } else {
      descriptor.writeUInt32LE(written, 8);
      descriptor.writeUInt32LE(written, 12);
    }
    await this.write(descriptor);
    this.entries.push({ name: nameBytes, crc: crc >>> 0, size: written, offset: headerStart });
    return written;
  }

  /** Central directory, zip64 end record and locator (always, as torch writes them), classic end record. */
  async finish(): Promise<void> {
    const cdStart = this.offset;
    const parts: Buffer[] = [];
    for (const entry of this.entries) {
      const big = [entry.size >= U32_MAX, entry.size >= U32_MAX, entry.offset >= U32_MAX];
      const extraLength = big.some(Boolean) ? 4 + 8 * big.filter(Boolean).length : 0;
      const cd = Buffer.alloc(46 + entry.name.length + extraLength);
      cd.writeUInt32LE(0x02014b50, 0);
      cd.writeUInt16LE(extraLength > 0 ? 45 : 20, 4);
      cd.writeUInt16LE(extraLength > 0 ? 45 : 20, 6);
      cd.writeUInt16LE(0x0808, 8);
      cd.writeUInt16LE(0, 10);
      cd.writeUInt16LE(0, 12);
      cd.writeUInt16LE(DOS_DATE, 14);
      cd.writeUInt32LE(entry.crc, 16);
      cd.writeUInt32LE(big[1] ? U32_MAX : entry.size, 20);
      cd.writeUInt32LE(big[0] ? U32_MAX : entry.size, 24);
      cd.writeUInt16LE(entry.name.length, 28);
      cd.writeUInt16LE(extraLength, 30);
      cd.writeUInt32LE(big[2] ? U32_MAX : entry.offset, 42);
      entry.name.copy(cd, 46);
      if (extraLength > 0) {
        let at = 46 + entry.name.length;
        cd.writeUInt16LE(0x0001, at);
        cd.writeUInt16LE(extraLength - 4, at + 2);
        at += 4;
        for (const [i, value] of [entry.size, entry.size, entry.offset].entries()) {
          if (!big[i]) continue;
          cd.writeBigUInt64LE(BigInt(value), at);
          at += 8;
        }
      }
      parts.push(cd);
    }
    const cdSize = parts.reduce((n, p) => n + p.length, 0);
    const z64At = cdStart + cdSize;
    const count = this.entries.length;
    const end = Buffer.alloc(56 + 20 + 22);
    end.writeUInt32LE(0x06064b50, 0);
    end.writeBigUInt64LE(44n, 4);
    end.writeUInt16LE(45, 12);
    end.writeUInt16LE(45, 14);
    end.writeBigUInt64LE(BigInt(count), 24);
    end.writeBigUInt64LE(BigInt(count), 32);
    end.writeBigUInt64LE(BigInt(cdSize), 40);
    end.writeBigUInt64LE(BigInt(cdStart), 48);
    end.writeUInt32LE(0x07064b50, 56);
    end.writeBigUInt64LE(BigInt(z64At), 64);
    end.writeUInt32LE(1, 72);
    end.writeUInt32LE(0x06054b50, 76);
    end.writeUInt16LE(Math.min(count, 0xffff), 84);
    end.writeUInt16LE(Math.min(count, 0xffff), 86);
    end.writeUInt32LE(Math.min(cdSize, U32_MAX), 88);
    end.writeUInt32LE(Math.min(cdStart, U32_MAX), 92);
    await this.write(Buffer.concat([...parts, end]));
  }
}
