import { describe, expect, it } from "vitest";
import { fileError, linkOutcome, payloadPath, sidecarMetadata, sidecarPath } from "./layout.js";

describe("file store layout", () => {
  it("maps keys to payload and inode-bound sidecar paths", () => {
    expect(payloadPath("/r", "a/b.pt")).toBe("/r/a/b.pt");
    expect(sidecarPath("/r", "a/b.pt", 42n)).toBe("/r/.ckpt-meta/a/b.pt.42.json");
  });

  it("keeps sidecar names of distinct keys distinct", () => {
    // "a" with inode 12 and "a.1" with inode 2 would collide only if inodes could hold a dot.
    expect(sidecarPath("/r", "a", 12n)).not.toBe(sidecarPath("/r", "a.1", 2n));
  });

  const payload = { ino: 7n, size: 3n, mtimeNs: 1000n };
  const sidecar = { version: 1, ino: "7", size: 3, mtimeNs: "1000", metadata: { sha256: "ab", x: "y" } };

  it("returns the sidecar's metadata only while it describes the payload", () => {
    expect(sidecarMetadata(sidecar, payload)).toEqual({ sha256: "ab", x: "y" });
    expect(sidecarMetadata(sidecar, { ...payload, ino: 8n })).toEqual({});
    expect(sidecarMetadata(sidecar, { ...payload, size: 4n })).toEqual({});
    expect(sidecarMetadata(sidecar, { ...payload, mtimeNs: 1001n })).toEqual({});
    expect(sidecarMetadata({ ...sidecar, version: 2 }, payload)).toEqual({});
    expect(sidecarMetadata(undefined, payload)).toEqual({});
    expect(sidecarMetadata({ ...sidecar, metadata: { n: 1, s: "k" } }, payload)).toEqual({ s: "k" });
  });

  it("decides a conditional link: success, exists, NFS lost reply, other failure", () => {
    expect(linkOutcome(undefined, undefined)).toBe("created");
    expect(linkOutcome("EEXIST", 1)).toBe("exists");
    expect(linkOutcome("EEXIST", 2)).toBe("created");
    expect(linkOutcome("EIO", 2)).toBe("created");
    expect(linkOutcome("EIO", 1)).toBe("failed");
    expect(linkOutcome("EACCES", undefined)).toBe("failed");
    expect(linkOutcome("EEXIST", undefined)).toBe("exists");
  });

  it("maps errno codes to store errors naming the key and the URI", () => {
    const errno = (code: string) => Object.assign(new Error(code), { code });
    expect(fileError("put", "k", "file:///r", errno("EACCES"))).toMatchObject({
      code: "STORE_ACCESS_DENIED",
      kind: "refused",
      message: expect.stringContaining("put k in file:///r"),
    });
    expect(fileError("put", "k", "file:///r", errno("EROFS"))).toMatchObject({ code: "STORE_ACCESS_DENIED" });
    expect(fileError("put", "k", "file:///r", errno("EISDIR"))).toMatchObject({ code: "STORE_INVALID_KEY" });
    expect(fileError("put", "k", "file:///r", errno("ENOSPC"))).toMatchObject({
      code: "STORE_NO_SPACE",
      kind: "failed",
      message: expect.stringContaining("ENOSPC"),
    });
    expect(fileError("put", "k", "file:///r", errno("EDQUOT"))).toMatchObject({ code: "STORE_NO_SPACE" });
    expect(fileError("put", "k", "file:///r", errno("EIO"))).toMatchObject({
      code: "STORE_REQUEST_FAILED",
      message: expect.stringContaining("EIO"),
    });
  });
});
