// Incomplete multipart uploads below the store prefix: listed with the bytes their parts hold, and aborted.
import { joinPrefix, keyBelow } from "../internal/keys.js";
import { retrying } from "../internal/remote.js";
import type { CallOptions, IncompleteUpload } from "../types.js";
import type { Ctx } from "./context.js";

/** The bytes the parts of one upload already hold (ListParts, every page). */
async function uploadedBytes(ctx: Ctx, name: string, uploadId: string, call: CallOptions | undefined) {
  const { sdk, client } = await ctx.load();
  const subject = `${ctx.uri} upload ${uploadId}`;
  let bytes = 0;
  let marker: string | undefined;
  do {
    const page = await retrying(ctx, "list parts of", subject, call, (abortSignal) =>
      client.send(
        new sdk.ListPartsCommand({
          Bucket: ctx.bucket,
          Key: name,
          UploadId: uploadId,
          ...(marker === undefined ? {} : { PartNumberMarker: marker }),
        }),
        { abortSignal },
      ),
    );
    for (const part of page.Parts ?? []) bytes += part.Size ?? 0;
    marker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
  } while (marker !== undefined);
  return bytes;
}

/**
 * Every multipart upload started and neither completed nor aborted whose key lies below the
 * store prefix (as a directory: `a/b` does not take `a/bc`), with the bytes its parts hold.
 */
export async function* listIncompleteUploads(
  ctx: Ctx,
  call: CallOptions | undefined,
): AsyncGenerator<IncompleteUpload> {
  const full = joinPrefix(ctx.prefix, "");
  const { sdk, client } = await ctx.load();
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  do {
    const page = await retrying(ctx, "list incomplete uploads of", ctx.uri, call, (abortSignal) =>
      client.send(
        new sdk.ListMultipartUploadsCommand({
          Bucket: ctx.bucket,
          ...(full === "" ? {} : { Prefix: full }),
          ...(keyMarker === undefined ? {} : { KeyMarker: keyMarker }),
          ...(uploadIdMarker === undefined ? {} : { UploadIdMarker: uploadIdMarker }),
        }),
        { abortSignal },
      ),
    );
    for (const upload of page.Uploads ?? []) {
      if (upload.Key === undefined || upload.UploadId === undefined || !upload.Key.startsWith(full)) continue;
      yield {
        key: keyBelow(ctx.prefix, upload.Key),
        uploadId: upload.UploadId,
        bytes: await uploadedBytes(ctx, upload.Key, upload.UploadId, call),
        ...(upload.Initiated === undefined ? {} : { initiated: upload.Initiated }),
      };
    }
    keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
    uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
  } while (keyMarker !== undefined);
}

/** Aborts one incomplete upload: its parts are freed and its key never appears. */
export async function abortIncompleteUpload(
  ctx: Ctx,
  upload: IncompleteUpload,
  call: CallOptions | undefined,
): Promise<void> {
  const { sdk, client } = await ctx.load();
  await retrying(ctx, "abort upload of", `${ctx.uri}/${upload.key}`, call, (abortSignal) =>
    client.send(
      new sdk.AbortMultipartUploadCommand({
        Bucket: ctx.bucket,
        Key: joinPrefix(ctx.prefix, upload.key),
        UploadId: upload.uploadId,
      }),
      { abortSignal },
    ),
  );
}
