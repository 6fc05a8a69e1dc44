import { promisify } from "node:util";
import { createInflateRaw, crc32, inflateRaw } from "node:zlib";
import type { ByteSource } from "@ckpt/manifest";
import { TensorsError, type TensorsErrorCode } from "../../errors.js";
import { truncateForMessage } from "../text.js";

/** Classic EOCD is 22 bytes plus a comment of at most 65535: the end search never reads more. */
const MAX_EOCD_SEARCH_BYTES = 22 + 0xffff;
/** Members in one archive: torch writes one per storage (a 70B model has ~1k); bounds the table. */
const MAX_ZIP_ENTRIES = 1_000_000;
/** Central directory bytes read into memory at once; 1M entries of ~80 bytes fit. */
const MAX_CENTRAL_DIRECTORY_BYTES = 128 * 1024 * 1024;
/** Member name length: torch names are `<prefix>/data/<key>`; zip allows 65535, we allow a path's worth. */
const MAX_MEMBER_NAME_BYTES = 4096;
/** A deflate stream cannot expand more than ~1032:1; a declared ratio above that is a bomb or a lie. */
const MAX_DEFLATE_RATIO = 1032;
/** Largest member inflated into memory (Node buffers stop at 2 GiB - 1 on some builds; torch never deflates). */
const MAX_INFLATED_MEMBER_BYTES = 2 ** 31 - 1;

const inflateRawAsync = promisify(inflateRaw);
const nameDecoder = new TextDecoder("utf-8", { fatal: true });

const SIG_EOCD = 0x06054b50;
const SIG_ZIP64_LOCATOR = 0x07064b50;
const SIG_ZIP64_EOCD = 0x06064b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_LOCAL = 0x04034b50;
const LOCAL_HEADER_BYTES = 30;
const CENTRAL_HEADER_BYTES = 46;

/** One member as the central directory lists it. */
export interface ZipMember {
  readonly name: string;
  /** Bytes of the UTF-8 name (the local header repeats it). */
  readonly nameLength: number;
  /** 0 stored, 8 deflate. */
  readonly method: 0 | 8;
  readonly crc32: number;
  readonly compressedSize: number;
  readonly size: number;
  readonly localHeaderOffset: number;
  /** First byte after this member's room: the next member's local header or the central directory. */
  readonly limit: number;
}

/** A zip archive opened by its central directory; member data is read on demand with positioned reads. */
export interface ZipArchive {
  readonly source: ByteSource;
  readonly members: readonly ZipMember[];
  member(name: string): ZipMember | undefined;
  /** Absolute offset of a member's data (reads and checks its local header once). */
  dataOffset(member: ZipMember): Promise<number>;
  /** The whole member, inflated if needed, CRC-checked; refused above `maxBytes`. */
  readMember(member: ZipMember, maxBytes: number): Promise<Uint8Array>;
  /**
   * The member's bytes in order, inflated if needed, in pieces of at most `pieceBytes` (a piece may
   * be reused once the next is asked for), whatever the member's size; when read to the end its
   * size and CRC-32 are checked (`ZIP_SIZE_MISMATCH`, `ZIP_CRC_MISMATCH`).
   */
  memberPieces(member: ZipMember, pieceBytes: number): AsyncGenerator<Uint8Array>;
}

function zipError(code: TensorsErrorCode, file: string, message: string, cause?: unknown): TensorsError {
  return new TensorsError(code, `read zip ${file}: ${message}`, { kind: "input", file, cause });
}

/** Reads through the source, turning I/O failures into a TensorsError. */
export async function readAt(
  source: ByteSource,
  offset: number,
  length: number,
  into?: Uint8Array,
): Promise<Uint8Array> {
  if (offset < 0 || length < 0 || offset + length > source.size) {
    throw zipError(
      "ZIP_MEMBER_OUTSIDE_FILE",
      source.name,
      `${length} bytes at ${offset} are past the end (${source.size})`,
    );
  }
  try {
    return await source.read(offset, length, into);
  } catch (cause) {
    if (cause instanceof TensorsError) throw cause;
    throw new TensorsError("TORCH_READ_FAILED", `read ${source.name}: ${(cause as Error).message}`, {
      file: source.name,
      kind: "failed",
      cause,
    });
  }
}

function u64(view: DataView, at: number, file: string, what: string): number {
  const value = view.getBigUint64(at, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw zipError("ZIP_NUMBER_TOO_LARGE", file, `${what} ${value} is past 2^53`);
  }
  return Number(value);
}

interface EndRecord {
  entries: number;
  cdSize: number;
  cdOffset: number;
  /** Where the end records start: the central directory must end before it. */
  endStart: number;
}

async function readEnd(source: ByteSource): Promise<EndRecord> {
  const file = source.name;
  if (source.size < 22) throw zipError("ZIP_TRUNCATED", file, `${source.size} bytes is too short for a zip`);
  // Most archives (torch's included) have no comment: try the last 22 bytes before scanning the window.
  let tailStart = source.size - 22;
  let tail = await readAt(source, tailStart, 22);
  let view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
  let at = view.getUint32(0, true) === SIG_EOCD && view.getUint16(20, true) === 0 ? 0 : -1;
  if (at < 0) {
    const tailLength = Math.min(source.size, MAX_EOCD_SEARCH_BYTES);
    tailStart = source.size - tailLength;
    tail = await readAt(source, tailStart, tailLength);
    view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
    for (let i = tailLength - 22; i >= 0; i--) {
      if (view.getUint32(i, true) === SIG_EOCD && i + 22 + view.getUint16(i + 20, true) <= tailLength) {
        at = i;
        break;
      }
    }
  }
  if (at < 0) {
    throw zipError(
      "ZIP_EOCD_MISSING",
      file,
      "no end-of-central-directory record. Is this a torch.save zip file?",
    );
  }
  const disk = view.getUint16(at + 4, true);
  const cdDisk = view.getUint16(at + 6, true);
  let entries = view.getUint16(at + 10, true);
  let cdSize = view.getUint32(at + 12, true);
  let cdOffset = view.getUint32(at + 16, true);
  let endStart = tailStart + at;
  if (disk !== 0 || cdDisk !== 0)
    throw zipError("ZIP_MULTI_DISK", file, "multi-disk archives are not supported");
  const locatorAt = tailStart + at - 20;
  if (locatorAt >= 0) {
    const locator = await readAt(source, locatorAt, 20);
    const lv = new DataView(locator.buffer, locator.byteOffset, 20);
    if (lv.getUint32(0, true) === SIG_ZIP64_LOCATOR) {
      const z64At = u64(lv, 8, file, "zip64 end record offset");
      if (z64At + 56 > locatorAt) {
        throw zipError("ZIP_MEMBER_OUTSIDE_FILE", file, `zip64 end record at ${z64At} overlaps its locator`);
      }
      const z64 = await readAt(source, z64At, 56);
      const zv = new DataView(z64.buffer, z64.byteOffset, 56);
      if (zv.getUint32(0, true) !== SIG_ZIP64_EOCD) {
        throw zipError("ZIP_EOCD_MISSING", file, `no zip64 end record at ${z64At} where the locator points`);
      }
      if (zv.getUint32(16, true) !== 0 || zv.getUint32(20, true) !== 0) {
        throw zipError("ZIP_MULTI_DISK", file, "multi-disk archives are not supported");
      }
      entries = u64(zv, 32, file, "entry count");
      cdSize = u64(zv, 40, file, "central directory size");
      cdOffset = u64(zv, 48, file, "central directory offset");
      endStart = z64At;
    }
  }
  if (entries > MAX_ZIP_ENTRIES) {
    throw zipError("ZIP_TOO_MANY_ENTRIES", file, `${entries} members; max ${MAX_ZIP_ENTRIES}`);
  }
  if (cdSize > MAX_CENTRAL_DIRECTORY_BYTES) {
    throw zipError(
      "ZIP_CENTRAL_DIRECTORY_TOO_LARGE",
      file,
      `${cdSize} bytes; max ${MAX_CENTRAL_DIRECTORY_BYTES}`,
    );
  }
  if (cdOffset + cdSize > endStart) {
    throw zipError(
      "ZIP_CENTRAL_DIRECTORY_OUTSIDE",
      file,
      `central directory ${cdOffset}+${cdSize} runs past its end record at ${endStart} (truncated file?)`,
    );
  }
  if (entries * CENTRAL_HEADER_BYTES > cdSize) {
    throw zipError("ZIP_CENTRAL_DIRECTORY_CORRUPT", file, `${entries} entries cannot fit in ${cdSize} bytes`);
  }
  return { entries, cdSize, cdOffset, endStart };
}

function checkName(name: string, file: string): void {
  const parts = name.split("/");
  const bad =
    name.length === 0 ||
    name.startsWith("/") ||
    name.includes("\\") ||
    name.includes("\0") ||
    name.includes("://") ||
    parts.some((part, i) => part === ".." || part === "." || (part === "" && i !== parts.length - 1));
  if (bad)
    throw zipError(
      "ZIP_BAD_MEMBER_NAME",
      file,
      `member name ${truncateForMessage(name)} is not a safe relative path`,
    );
}

/** Opens a zip by its end records and central directory; no member data is read. */
export async function openZip(source: ByteSource): Promise<ZipArchive> {
  const file = source.name;
  const end = await readEnd(source);
  const cd = await readAt(source, end.cdOffset, end.cdSize);
  const view = new DataView(cd.buffer, cd.byteOffset, cd.byteLength);
  const raw: Omit<ZipMember, "limit">[] = [];
  const names = new Set<string>();
  let at = 0;
  for (let i = 0; i < end.entries; i++) {
    if (at + CENTRAL_HEADER_BYTES > cd.length || view.getUint32(at, true) !== SIG_CENTRAL) {
      throw zipError(
        "ZIP_CENTRAL_DIRECTORY_CORRUPT",
        file,
        `entry ${i} at ${end.cdOffset + at} has no signature`,
      );
    }
    const flags = view.getUint16(at + 8, true);
    const method = view.getUint16(at + 10, true);
    const crc = view.getUint32(at + 16, true);
    let compressedSize = view.getUint32(at + 20, true);
    let size = view.getUint32(at + 24, true);
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const commentLength = view.getUint16(at + 32, true);
    const diskStart = view.getUint16(at + 34, true);
    let localHeaderOffset = view.getUint32(at + 42, true);
    const next = at + CENTRAL_HEADER_BYTES + nameLength + extraLength + commentLength;
    if (next > cd.length)
      throw zipError("ZIP_CENTRAL_DIRECTORY_CORRUPT", file, `entry ${i} runs past the directory`);
    if (nameLength > MAX_MEMBER_NAME_BYTES) {
      throw zipError(
        "ZIP_BAD_MEMBER_NAME",
        file,
        `entry ${i} name is ${nameLength} bytes; max ${MAX_MEMBER_NAME_BYTES}`,
      );
    }
    let name: string;
    try {
      name = nameDecoder.decode(cd.subarray(at + 46, at + 46 + nameLength));
    } catch (cause) {
      throw zipError("ZIP_BAD_MEMBER_NAME", file, `entry ${i} name is not UTF-8`, cause);
    }
    checkName(name, file);
    if (flags & 0x41)
      throw zipError("ZIP_ENCRYPTED", file, `member ${truncateForMessage(name)} is encrypted`);
    if (method !== 0 && method !== 8) {
      throw zipError(
        "ZIP_METHOD_UNSUPPORTED",
        file,
        `member ${truncateForMessage(name)} uses method ${method}; only stored and deflate`,
      );
    }
    // zip64 extended information: the 64-bit values of the fields set to 0xFFFFFFFF, in this order.
    const extraEnd = at + 46 + nameLength + extraLength;
    for (let e = at + 46 + nameLength; e + 4 <= extraEnd; ) {
      const id = view.getUint16(e, true);
      const length = view.getUint16(e + 2, true);
      if (e + 4 + length > extraEnd)
        throw zipError("ZIP_CENTRAL_DIRECTORY_CORRUPT", file, `entry ${i} extra field overruns`);
      if (id === 0x0001) {
        let p = e + 4;
        const take = (what: string): number => {
          if (p + 8 > e + 4 + length)
            throw zipError("ZIP_CENTRAL_DIRECTORY_CORRUPT", file, `entry ${i} zip64 field lacks ${what}`);
          const value = u64(view, p, file, what);
          p += 8;
          return value;
        };
        if (size === 0xffffffff) size = take("size");
        if (compressedSize === 0xffffffff) compressedSize = take("compressed size");
        if (localHeaderOffset === 0xffffffff) localHeaderOffset = take("local header offset");
      }
      e += 4 + length;
    }
    if (diskStart !== 0 && diskStart !== 0xffff)
      throw zipError("ZIP_MULTI_DISK", file, "multi-disk archives are not supported");
    if (names.has(name))
      throw zipError("ZIP_DUPLICATE_MEMBER", file, `member ${truncateForMessage(name)} appears twice`);
    names.add(name);
    if (method === 0 && compressedSize !== size) {
      throw zipError(
        "ZIP_SIZE_MISMATCH",
        file,
        `stored member ${truncateForMessage(name)} has sizes ${compressedSize} and ${size}`,
      );
    }
    if (localHeaderOffset + LOCAL_HEADER_BYTES + nameLength + compressedSize > end.cdOffset) {
      throw zipError(
        "ZIP_MEMBER_OUTSIDE_FILE",
        file,
        `member ${truncateForMessage(name)} (${compressedSize} bytes at ${localHeaderOffset}) runs past the member area (${end.cdOffset})`,
      );
    }
    raw.push({
      name,
      nameLength,
      method: method as 0 | 8,
      crc32: crc,
      compressedSize,
      size,
      localHeaderOffset,
    });
    at = next;
  }
  // Members may not share bytes: each one's header and data end before the next one starts.
  const byOffset = raw.map((_, i) => i).sort((a, b) => raw[a]!.localHeaderOffset - raw[b]!.localHeaderOffset);
  const limits = new Array<number>(raw.length);
  for (let k = 0; k < byOffset.length; k++) {
    const m = raw[byOffset[k]!]!;
    const limit = k + 1 < byOffset.length ? raw[byOffset[k + 1]!]!.localHeaderOffset : end.cdOffset;
    if (m.localHeaderOffset + LOCAL_HEADER_BYTES + m.compressedSize > limit) {
      throw zipError(
        "ZIP_MEMBERS_OVERLAP",
        file,
        `member ${truncateForMessage(m.name)} overlaps the next member`,
      );
    }
    limits[byOffset[k]!] = limit;
  }
  const members: ZipMember[] = raw.map((m, i) => ({ ...m, limit: limits[i]! }));
  const byName = new Map(members.map((m) => [m.name, m]));
  const dataOffsets = new Map<ZipMember, number>();

  async function dataOffset(member: ZipMember): Promise<number> {
    const known = dataOffsets.get(member);
    if (known !== undefined) return known;
    const header = await readAt(
      source,
      member.localHeaderOffset,
      Math.min(LOCAL_HEADER_BYTES + member.nameLength, member.limit - member.localHeaderOffset),
    );
    const hv = new DataView(header.buffer, header.byteOffset, header.byteLength);
    const quoted = truncateForMessage(member.name);
    if (header.length < LOCAL_HEADER_BYTES || hv.getUint32(0, true) !== SIG_LOCAL) {
      throw zipError(
        "ZIP_LOCAL_HEADER_CORRUPT",
        file,
        `member ${quoted} has no local header at ${member.localHeaderOffset}`,
      );
    }
    const nameLength = hv.getUint16(26, true);
    const extraLength = hv.getUint16(28, true);
    const method = hv.getUint16(8, true);
    const localName = header.subarray(LOCAL_HEADER_BYTES, LOCAL_HEADER_BYTES + nameLength);
    if (
      method !== member.method ||
      LOCAL_HEADER_BYTES + nameLength > header.length ||
      Buffer.from(localName).toString("utf8") !== member.name
    ) {
      throw zipError(
        "ZIP_LOCAL_HEADER_CORRUPT",
        file,
        `local header of ${quoted} disagrees with the central directory`,
      );
    }
    const start = member.localHeaderOffset + LOCAL_HEADER_BYTES + nameLength + extraLength;
    if (start + member.compressedSize > member.limit) {
      throw zipError(
        "ZIP_MEMBERS_OVERLAP",
        file,
        `data of ${quoted} (${member.compressedSize} bytes at ${start}) runs into the next member`,
      );
    }
    dataOffsets.set(member, start);
    return start;
  }

  async function readMember(member: ZipMember, maxBytes: number): Promise<Uint8Array> {
    const quoted = truncateForMessage(member.name);
    if (member.size > maxBytes) {
      throw zipError(
        "ZIP_MEMBER_TOO_LARGE",
        file,
        `member ${quoted} is ${member.size} bytes; max ${maxBytes}`,
      );
    }
    const start = await dataOffset(member);
    const stored = await readAt(source, start, member.compressedSize);
    let data = stored;
    if (member.method === 8) {
      if (
        member.size > MAX_INFLATED_MEMBER_BYTES ||
        member.size > member.compressedSize * MAX_DEFLATE_RATIO + 1024
      ) {
        throw zipError(
          "ZIP_BOMB",
          file,
          `member ${quoted} claims ${member.size} bytes from ${member.compressedSize} compressed`,
        );
      }
      try {
        data = new Uint8Array(await inflateRawAsync(stored, { maxOutputLength: Math.max(member.size, 1) }));
      } catch (cause) {
        const code =
          (cause as { code?: string }).code === "ERR_BUFFER_TOO_LARGE" ? "ZIP_BOMB" : "ZIP_INFLATE_FAILED";
        throw zipError(code, file, `inflate member ${quoted}: ${(cause as Error).message}`, cause);
      }
    }
    if (data.length !== member.size) {
      throw zipError(
        "ZIP_SIZE_MISMATCH",
        file,
        `member ${quoted} holds ${data.length} bytes; the directory says ${member.size}`,
      );
    }
    if (crc32(data) !== member.crc32)
      throw zipError("ZIP_CRC_MISMATCH", file, `member ${quoted} fails its CRC-32`);
    return data;
  }

  async function* storedPieces(member: ZipMember, pieceBytes: number): AsyncGenerator<Uint8Array> {
    const start = await dataOffset(member);
    const buffer = new Uint8Array(Math.max(1, Math.min(pieceBytes, member.compressedSize)));
    for (let at = 0; at < member.compressedSize; ) {
      const n = Math.min(buffer.length, member.compressedSize - at);
      yield await readAt(source, start + at, n, buffer);
      at += n;
    }
  }

  async function* memberPieces(member: ZipMember, pieceBytes: number): AsyncGenerator<Uint8Array> {
    const quoted = truncateForMessage(member.name);
    if (member.method === 8 && member.size > member.compressedSize * MAX_DEFLATE_RATIO + 1024) {
      throw zipError(
        "ZIP_BOMB",
        file,
        `member ${quoted} claims ${member.size} bytes from ${member.compressedSize} compressed`,
      );
    }
    const raw = storedPieces(member, pieceBytes);
    let pieces: AsyncIterable<Uint8Array> = raw;
    if (member.method === 8) {
      // Copies each compressed piece: the inflater may still hold it when the next one is read.
      const inflater = createInflateRaw({ chunkSize: Math.min(Math.max(pieceBytes, 64), 1024 * 1024) });
      const feed = async (): Promise<void> => {
        for await (const piece of raw) {
          if (inflater.destroyed) return;
          if (!inflater.write(piece.slice())) {
            await new Promise((resolve) => {
              inflater.once("drain", resolve);
              inflater.once("close", resolve);
            });
          }
        }
        if (!inflater.destroyed) inflater.end();
      };
      feed().catch((error: unknown) => inflater.destroy(error as Error));
      pieces = inflater;
    }
    let size = 0;
    let crc = 0;
    try {
      for await (const piece of pieces) {
        size += piece.length;
        if (size > member.size) {
          throw zipError(
            "ZIP_SIZE_MISMATCH",
            file,
            `member ${quoted} holds more than the ${member.size} bytes the directory says`,
          );
        }
        crc = crc32(piece, crc);
        yield piece;
      }
    } catch (cause) {
      if (cause instanceof TensorsError) throw cause;
      throw zipError(
        "ZIP_INFLATE_FAILED",
        file,
        `inflate member ${quoted}: ${(cause as Error).message}`,
        cause,
      );
    } finally {
      if (pieces !== raw) (pieces as ReturnType<typeof createInflateRaw>).destroy();
    }
    if (size !== member.size) {
      throw zipError(
        "ZIP_SIZE_MISMATCH",
        file,
        `member ${quoted} holds ${size} bytes; the directory says ${member.size}`,
      );
    }
    if (crc !== member.crc32) throw zipError("ZIP_CRC_MISMATCH", file, `member ${quoted} fails its CRC-32`);
  }

  return { source, members, member: (name) => byName.get(name), dataOffset, readMember, memberPieces };
}
