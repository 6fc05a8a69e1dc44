import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createTestBucket, s3TestEnv, testCredentials } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { BLOCK_TIMEOUT_MS, docPages, parseExamples, prepareSandbox } from "../../tools/docs/doc-examples.mjs";

type Blocks = ReturnType<typeof parseExamples>;

const pages = docPages().map(({ page, markdown }) => ({ page, blocks: parseExamples(markdown, page) }));

describe("code examples in docs/*.md (convention: tools/docs/README.md)", () => {
  it("every code block is marked as a run example or says why it is not run", () => {
    const unmarked = pages.flatMap(({ blocks }) =>
      blocks.filter((b) => b.problem !== undefined).map((b) => `${b.page}:${b.line}: ${b.problem}`),
    );
    expect(unmarked, "see tools/docs/README.md for the convention").toEqual([]);
  });

  const runnable = pages.filter(({ blocks }) => blocks.some((b) => b.run));
  const needsS3 = (blocks: Blocks) => blocks.some((b) => b.run && b.s3);
  const runExamples = async (_: string, blocks: Blocks) => {
    const examples = blocks.filter((b) => b.run);
    const extra: Record<string, string> = {};
    let dropBucket = async () => {};
    if (needsS3(blocks)) {
      const env = s3TestEnv();
      const { bucket, cleanup } = await createTestBucket(env, "docs");
      dropBucket = cleanup;
      Object.assign(extra, {
        AWS_ENDPOINT_URL: env.endpoint,
        AWS_ACCESS_KEY_ID: env.accessKeyId,
        AWS_SECRET_ACCESS_KEY: env.secretAccessKey,
        AWS_REGION: env.region,
        CKPT_BUCKET: bucket,
      });
    }
    const sandbox = await prepareSandbox(extra);
    try {
      if (extra.CKPT_BUCKET !== undefined) {
        const credentials = join(sandbox.scratch, ".credentials.json");
        await writeFile(credentials, JSON.stringify(testCredentials(s3TestEnv())));
        sandbox.env.CKPT_CREDENTIALS = credentials;
      }
      for (const block of examples) {
        const result = await sandbox.run(block);
        const context = `${block.page}:${block.line} exited ${result.code}, expected ${block.exit}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
        expect(result.code, context).toBe(block.exit);
      }
    } finally {
      await sandbox.dispose();
      await dropBucket();
    }
  };
  const title = "%s: its examples run in order and exit as marked";
  const cases = (s3: boolean) =>
    runnable
      .filter(({ blocks }) => needsS3(blocks) === s3)
      .map(({ page, blocks }) => [page, blocks] as const);
  it.each(cases(false))(title, runExamples, BLOCK_TIMEOUT_MS * 4);
  it.each(cases(true))(title, { tags: ["s3"], timeout: BLOCK_TIMEOUT_MS * 4 }, runExamples);
});

describe("the convention's parser", () => {
  it("reads markers, attributes and reasons; data blocks are not examples", () => {
    const md = [
      "```sh example",
      "ckpt --help",
      "```",
      "```ts example s3 exit=1",
      "x",
      "```",
      "```bash no-run: needs a GPU",
      "nvidia-smi",
      "```",
      "```json",
      "{}",
      "```",
      "```sh",
      "echo unmarked",
      "```",
      "```sh example sometimes",
      "```",
    ].join("\n");
    const blocks = parseExamples(md, "p.md");
    expect(
      blocks.map((b) => [b.line, b.runner, b.run, b.s3, b.exit, b.reason ?? "", b.problem !== undefined]),
    ).toEqual([
      [1, "shell", true, false, 0, "", false],
      [4, "typescript", true, true, 1, "", false],
      [7, "shell", false, false, 0, "needs a GPU", false],
      [13, "shell", false, false, 0, "", true],
      [16, "shell", true, false, 0, "", true],
    ]);
    expect(blocks[0]!.code).toBe("ckpt --help\n");
  });
});
