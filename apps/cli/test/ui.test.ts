// `ckpt ui` as a person uses it: the built CLI (dist/bin.js, so the page's files are found where the
// build put them) serving the run `ckpt demo` made, read by Debian's chromium through playwright-core.
// The page must show what the evidence JSON says, a damaged checkpoint's problem with its remedy,
// and the server must refuse paths outside --root, other hosts and writes, and stop on a signal.
// Screenshots land in test-output/ui/ (gitignored); docs/images/ui-demo.png is the first one.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { cp, mkdir, readFile, symlink, truncate } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import type { Evidence } from "@ckpt/evidence";
import { explainProblem } from "@ckpt/evidence";
import { testdir } from "@ckpt/test-utils";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nonSnakeKeys } from "./helpers/json-keys.js";

const BIN = join(import.meta.dirname, "..", "dist", "bin.js");
const SHOTS = join(import.meta.dirname, "..", "..", "..", "test-output", "ui");
const DEMO_RUN = "runs/demo/mlp/main";

interface Served {
  readonly url: string;
  readonly child: ChildProcess;
  readonly stdout: () => string;
  readonly exit: Promise<number>;
}

/** `ckpt ui --root <root> --port 0` in a child; resolves once it printed its URL. */
function serve(root: string, ...extra: string[]): Promise<Served> {
  const child = spawn(process.execPath, [BIN, "ui", "--root", root, "--port", "0", ...extra], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const exit = new Promise<number>((done) =>
    child.once("exit", (code, signal) => done(code ?? -Number(signal))),
  );
  return new Promise((done, fail) => {
    child.stderr!.on("data", (chunk) => (err += chunk));
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) done({ url: out.split("\n")[0]!, child, stdout: () => out, exit });
    });
    void exit.then((code) => fail(new Error(`ckpt ui exited (${code}) before it served: ${err}`)));
  });
}

async function stop(served: Served, signal: NodeJS.Signals = "SIGTERM"): Promise<number> {
  served.child.kill(signal);
  return served.exit;
}

/** A GET (or another method) with the Host header as given: what a rebinding page would send. */
function raw(
  url: string,
  options: { method?: string; host?: string } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((done, fail) => {
    const req = request(
      url,
      { method: options.method ?? "GET", headers: options.host === undefined ? {} : { host: options.host } },
      (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => done({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", fail);
    req.end();
  });
}

function runCkpt(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((done) =>
    execFile(process.execPath, [BIN, ...args], { maxBuffer: 64 << 20 }, (error, out, err) =>
      done({ code: error === null ? 0 : Number(error.code), out, err }),
    ),
  );
}

/** The rows the page drew: one per save, from its data attributes. */
function pageRows(page: Page) {
  return page.$$eval("#saves tbody tr", (rows) =>
    rows.map((row) => {
      const d = (row as unknown as { dataset: Record<string, string> }).dataset;
      return { attempt: d.attempt!, iteration: Number(d.iteration), kind: d.kind!, bytes: Number(d.bytes) };
    }),
  );
}

/** The same rows from the evidence JSON. */
function evidenceRows(bundle: Evidence) {
  return bundle.attempts.flatMap((a) => [
    ...a.checkpoints.map((c) => ({
      attempt: a.run_ts,
      iteration: c.iteration,
      kind: "checkpoint",
      bytes: c.bytes,
    })),
    ...a.artifacts.map((x) => ({
      attempt: a.run_ts,
      iteration: x.iteration,
      kind: "artifact",
      bytes: x.bytes,
    })),
  ]);
}

const byKey = (a: { iteration: number; kind: string }, b: { iteration: number; kind: string }) =>
  a.iteration - b.iteration || a.kind.localeCompare(b.kind);

let demoDir: string;
let browser: BrowserContext;

async function show(url: string, shot: string): Promise<Page> {
  const page = await browser.newPage();
  const refusedResources: string[] = [];
  page.on("requestfailed", (r) => refusedResources.push(r.url()));
  await page.goto(url);
  await page.waitForSelector("body[data-loaded='evidence']", { timeout: 60_000 });
  expect(refusedResources).toEqual([]);
  await page.screenshot({ path: join(SHOTS, shot), fullPage: true });
  return page;
}

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  demoDir = join(await testdir("ckpt-ui-"), "demo");
  const demo = await runCkpt(["demo", "--dir", demoDir]);
  expect(demo.code, demo.err).toBe(0);
  const profile = await testdir("ckpt-ui-chromium-");
  browser = await chromium.launchPersistentContext(join(profile, "profile"), {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    env: { ...process.env, TMPDIR: profile, HOME: profile },
    viewport: { width: 1280, height: 900 },
  });
});

afterAll(async () => {
  await browser?.close();
});

describe("ckpt ui in a browser", { timeout: 120_000 }, () => {
  it("renders the demo's run: its saves match the evidence JSON, full checkpoints and the artifact, resumable", async () => {
    const served = await serve(demoDir);
    try {
      const bundle = (await (
        await fetch(`${served.url}api/evidence?path=${DEMO_RUN}&verify=newest`)
      ).json()) as Evidence;
      expect(bundle.schema).toBe("ckpt.evidence.v2");
      // Served as built, without the CLI's JSON writer: the bundle declares snake_case keys itself.
      expect(nonSnakeKeys(bundle)).toEqual([]);
      const page = await show(
        `${served.url}?path=${DEMO_RUN}&keep_model_last=3&keep_optim_last=2`,
        "demo.png",
      );
      const rows = await pageRows(page);
      expect(rows.sort(byKey)).toEqual(evidenceRows(bundle).sort(byKey));
      // The demo's main run: checkpoints 40, 60, 80 (80 after resuming past the kill) and the artifact of 30.
      expect(rows.map((r) => `${r.kind} ${r.iteration}`)).toEqual([
        "artifact 30",
        "checkpoint 40",
        "checkpoint 60",
        "checkpoint 80",
      ]);
      expect(rows.every((r) => r.attempt === bundle.attempts[0]!.run_ts)).toBe(true);
      expect(await page.textContent("#status")).toBe("resumable");
      expect(
        await page.getAttribute("#saves tr[data-kind='checkpoint'][data-iteration='80']", "data-resumable"),
      ).toBe("true");
      expect(await page.textContent("#summary")).toContain("resume from iteration 80");
      // Every full checkpoint shows its format, components and size; the unprobed ones (all but 80)
      // from their directory listing, which their "not probed" cell says.
      for (const c of bundle.attempts[0]!.checkpoints) {
        expect([c.format, c.depth]).toEqual(["consolidated", c.iteration === 80 ? "probed" : "listed"]);
        const cells = await page
          .locator(`#saves tr[data-kind='checkpoint'][data-iteration='${c.iteration}'] td`)
          .allTextContents();
        expect(cells[3]).toBe(`consolidated: ${c.components.map((x) => x.name).join(", ")}`);
        expect(c.components.map((x) => x.name)).toContain("model");
        expect(cells[4]).toMatch(/^\d[\d.]* (B|KiB|MiB)$/);
        if (c.depth === "listed")
          expect(
            await page.getAttribute(
              `#saves tr[data-kind='checkpoint'][data-iteration='${c.iteration}'] td:nth-child(7)`,
              "title",
            ),
          ).toContain("layout from its listing");
      }
      // The artifact was archived by the demo, and verify=newest verified it.
      const artifact = page.locator("#saves tr[data-kind='artifact']");
      expect(await artifact.textContent()).toContain(bundle.attempts[0]!.artifacts[0]!.archive!.destination);
      expect(await artifact.textContent()).toContain("verified");
      // Resume never takes an artifact: its resumable cell is no verdict, not a red "no".
      const resumableCell = artifact.locator("td").nth(6);
      expect(await resumableCell.textContent()).toBe("n/a (artifact)");
      expect(await resumableCell.getAttribute("class")).toBe("muted");
      // Retention's own plan with the demo's settings (keep_model_last 3, keep_optim_last 2).
      expect(await page.textContent("#retention-summary")).toBe(
        "after the next save, keep_model_last=3 and keep_optim_last=2 release iteration 40, the optimizer state of 60",
      );
      expect(await page.textContent("#problems")).toContain("no problems reported");
      await page.close();
    } finally {
      expect(await stop(served)).toBe(143);
    }
  });

  it("a damaged checkpoint shows its problem code, meaning and remedy, and is not resumable", async () => {
    const root = await testdir("ckpt-ui-damaged-");
    await cp(join(demoDir, DEMO_RUN), join(root, "run"), { recursive: true });
    const bundle = (await runCkpt(["evidence", join(root, "run"), "--json"]).then((r) =>
      JSON.parse(r.out),
    )) as Evidence;
    const attempt = bundle.attempts[0]!;
    await truncate(join(attempt.checkpoints[0]!.dir, "model.pt"), 100);
    const served = await serve(root);
    try {
      const page = await show(`${served.url}?path=run`, "damaged.png");
      const damaged = page.locator("#problems li[data-code='DAMAGED_CHECKPOINT']");
      const definition = explainProblem("DAMAGED_CHECKPOINT")!;
      expect(await damaged.locator(".remedy").textContent()).toBe(`remedy: ${definition.remedy}`);
      expect(await damaged.locator(".meaning").textContent()).toBe(definition.meaning);
      expect(await damaged.textContent()).toContain("VERIFY_SIZE_MISMATCH");
      expect(
        await page.getAttribute(
          `#saves tr[data-kind='checkpoint'][data-iteration='${attempt.checkpoints[0]!.iteration}']`,
          "data-resumable",
        ),
      ).toBe("false");
      // The pointer names the damaged checkpoint: resume refuses rather than start over silently.
      expect(await page.textContent("#status")).toBe("refused");
      expect(await page.textContent("#summary")).toContain("resume refused (MANAGER_RESUME_INCOMPLETE)");
      await page.close();
    } finally {
      await stop(served);
    }
  });

  it("refuses paths outside --root (.., absolute, a symbolic link out, encoded dots) in the API and on the page", async () => {
    const root = await testdir("ckpt-ui-guard-");
    await mkdir(join(root, "inside"));
    await symlink(demoDir, join(root, "inside", "out"));
    const served = await serve(root);
    try {
      for (const path of ["..", "../..", demoDir, "inside/out", "inside/%2e%2e/..", "/etc"]) {
        const answer = await fetch(`${served.url}api/evidence?path=${encodeURIComponent(path)}`);
        expect(answer.status, path).toBe(400);
        expect(((await answer.json()) as { error: { code: string } }).error.code, path).toBe(
          "MCP_PATH_REFUSED",
        );
      }
      const page = await browser.newPage();
      await page.goto(`${served.url}?path=${encodeURIComponent(demoDir)}`);
      await page.waitForSelector("body[data-loaded='error']");
      expect(await page.getAttribute("#error p", "data-code")).toBe("MCP_PATH_REFUSED");
      await page.screenshot({ path: join(SHOTS, "refused.png"), fullPage: true });
      await page.close();
    } finally {
      await stop(served);
    }
  });
});

describe("ckpt ui's server", { timeout: 60_000 }, () => {
  it("listens on 127.0.0.1 only, prints its URL as the one stdout line and stops with 130/143", async () => {
    for (const [signal, code] of [
      ["SIGINT", 130],
      ["SIGTERM", 143],
    ] as const) {
      const served = await serve(demoDir);
      const port = Number(new URL(served.url).port);
      expect(served.url).toBe(`http://127.0.0.1:${port}/`);
      // The kernel's table of listening sockets: this port on 127.0.0.1 (0100007F), on no other address.
      const hex = port.toString(16).toUpperCase().padStart(4, "0");
      const listening = (await readFile("/proc/net/tcp", "utf8"))
        .concat(await readFile("/proc/net/tcp6", "utf8").catch(() => ""))
        .split("\n")
        .map((line) => line.trim().split(/\s+/))
        .filter((f) => f[1]?.endsWith(`:${hex}`) && f[3] === "0A")
        .map((f) => f[1]);
      expect(listening).toEqual([`0100007F:${hex}`]);
      expect(await stop(served, signal)).toBe(code);
      expect(served.stdout()).toBe(`${served.url}\n`);
    }
  });

  it("refuses another host name (DNS rebinding), any method but GET, and --host other than loopback", async () => {
    const served = await serve(demoDir);
    try {
      const port = new URL(served.url).port;
      const page = await raw(served.url);
      expect(page.status).toBe(200);
      expect(page.headers["content-security-policy"]).toContain("default-src 'self'");
      expect(page.headers["x-frame-options"]).toBe("DENY");
      expect((await raw(served.url, { host: `localhost:${port}` })).status).toBe(200);
      for (const host of [`evil.example:${port}`, "127.0.0.1", `127.0.0.1:${Number(port) + 1}`]) {
        const refused = await raw(`${served.url}api/evidence?path=${DEMO_RUN}`, { host });
        expect(refused.status, host).toBe(421);
        expect(JSON.parse(refused.body).error.code).toBe("UI_HOST_REFUSED");
      }
      for (const method of ["POST", "PUT", "DELETE"]) {
        const refused = await raw(`${served.url}api/evidence`, { method });
        expect(refused.status, method).toBe(405);
        expect(refused.headers.allow).toBe("GET, HEAD");
      }
      const unknown = await raw(`${served.url}api/explain?code=NOT_A_CODE`);
      expect([unknown.status, JSON.parse(unknown.body).error.code]).toEqual([404, "UI_UNKNOWN_PROBLEM"]);
    } finally {
      await stop(served);
    }
    const wide = await runCkpt(["ui", "--root", demoDir, "--host", "0.0.0.0"]);
    expect(wide.code).toBe(2);
    expect(wide.err).toContain("127.0.0.1 only");
  });
});
