import type { DestinationIdentity } from "@ckpt/object-store";

/** A destination as one human string: `s3://bucket/prefix at endpoint` (an identity holds no secret). Pure. */
export function describeDestination(d: DestinationIdentity): string {
  const where = d.scheme === "file" ? `file://${d.bucket}` : `${d.scheme}://${d.bucket}`;
  const prefix = d.prefix === "" ? "" : `/${d.prefix}`;
  return `${where}${prefix} at ${d.endpoint}`;
}
