#!/usr/bin/python3
"""Reference publisher for tools/bench/archive.bench.mjs: what a careful boto3 script does.

For every file below --dir: SHA-256 with hashlib, upload_file with the default TransferConfig
(sha256 in the object's metadata), then HEAD the object and check its size and sha256 metadata.
No declaration, no manifest ordering, no receipt: the plain cost of "hash, upload, verify".

    /usr/bin/python3 tools/bench/reference_publish.py --dir DIR --bucket B --prefix P \
        --endpoint http://127.0.0.1:7480
Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_REGION). Prints one JSON
line: {"files": n, "bytes": n, "seconds": s}. Exits 1 when a verification fails.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import boto3
from botocore.config import Config

CHUNK = 1 << 20


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def files_below(root):
    for base, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(base, name)
            yield path, os.path.relpath(path, root).replace(os.sep, "/")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--endpoint", required=True)
    args = parser.parse_args()

    client = boto3.client(
        "s3",
        endpoint_url=args.endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}),
    )
    started = time.monotonic()
    count = 0
    total = 0
    for path, rel in files_below(args.dir):
        size = os.path.getsize(path)
        digest = sha256_file(path)
        key = f"{args.prefix}/{rel}" if args.prefix else rel
        client.upload_file(path, args.bucket, key, ExtraArgs={"Metadata": {"sha256": digest}})
        head = client.head_object(Bucket=args.bucket, Key=key)
        if head["ContentLength"] != size or head.get("Metadata", {}).get("sha256") != digest:
            print(f"verification failed for {key}", file=sys.stderr)
            return 1
        count += 1
        total += size
    print(json.dumps({"files": count, "bytes": total, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
