// ckpt ui: renders the run's ckpt.evidence.v2 bundle, fetched from this page's own server. Every
// text goes in through textContent (never as HTML): paths and messages come from the file system.

const params = new URLSearchParams(location.search);
const state = {
  path: params.get("path") ?? ".",
  verify: params.get("verify") ?? "newest",
  keep_model_last: params.get("keep_model_last") ?? "0",
  keep_optim_last: params.get("keep_optim_last") ?? "0",
  upload: params.get("upload") === "1" ? "1" : "0",
};

/** An element with a class and children (strings become text nodes). */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  for (const child of children)
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function formatBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** A path as the page shows it: relative to the bundle's root when inside it. */
function shown(path, root) {
  if (path === root) return ".";
  return path.startsWith(`${root}/`) ? path.slice(root.length + 1) : path;
}

function query(extra) {
  const q = new URLSearchParams({ path: state.path, ...extra });
  return q.toString();
}

async function getJson(url) {
  const response = await fetch(url, { headers: { accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) {
    const error = new Error(body?.error?.message ?? `${response.status} ${response.statusText}`);
    error.code = body?.error?.code ?? `HTTP_${response.status}`;
    throw error;
  }
  return body;
}

function verifiedCell(lastVerify) {
  if (lastVerify === null) return el("td", { class: "muted" }, "not verified");
  return lastVerify.ok
    ? el("td", { class: "ok", title: lastVerify.at }, "verified")
    : el("td", { class: "bad", title: lastVerify.problems.join(", ") }, "FAILED");
}

/** Whether resume would take it; an artifact is never resumed from, so its answer is no verdict. */
function resumableCell(kind, resume) {
  if (kind === "artifact") return el("td", { class: "muted", title: resume.reason }, "n/a (artifact)");
  if (resume.resumable === null) return el("td", { class: "muted", title: resume.reason }, "not probed");
  return resume.resumable
    ? el("td", { class: "ok", title: resume.reason }, "resumable")
    : el("td", { class: "bad", title: resume.reason }, "no");
}

/** Every save of every attempt, newest first: full checkpoints and artifacts side by side. */
function saveRows(bundle) {
  const rows = [];
  for (const attempt of bundle.attempts) {
    for (const c of attempt.checkpoints) rows.push({ attempt, kind: "checkpoint", save: c });
    for (const a of attempt.artifacts) rows.push({ attempt, kind: "artifact", save: a });
  }
  return rows.sort(
    (x, y) =>
      y.attempt.dir.localeCompare(x.attempt.dir) ||
      y.save.iteration - x.save.iteration ||
      x.kind.localeCompare(y.kind),
  );
}

function retentionState(kind, save) {
  if (kind === "artifact") {
    return `payload on disk: ${save.retention.local}`;
  }
  const r = save.retention;
  const parts = [];
  if (r.latest) parts.push("latest (the pointer names it)");
  if (r.past_pointer) parts.push("past the pointer: never committed");
  parts.push(r.has_optimizer ? "optimizer kept" : "optimizer released");
  parts.push(`upload: ${r.upload}`);
  if (r.validation !== null) parts.push(`validation: ${r.validation}`);
  return parts.join("; ");
}

function renderTimeline(bundle) {
  const rows = saveRows(bundle);
  const body = document.querySelector("#saves tbody");
  body.replaceChildren(
    ...rows.map(({ attempt, kind, save }) => {
      const what =
        kind === "checkpoint"
          ? `${save.format ?? "?"}: ${save.components.map((c) => (c.present ? c.name : `${c.name} (gone)`)).join(", ") || "-"}`
          : save.components.join(", ") || "-";
      return el(
        "tr",
        {
          class: `save ${kind}`,
          "data-attempt": attempt.run_ts,
          "data-iteration": save.iteration,
          "data-kind": kind,
          "data-bytes": save.bytes,
          "data-resumable": String(save.resume.resumable),
        },
        el("td", {}, attempt.run_ts || "(legacy)"),
        el("td", { class: "num" }, save.iteration),
        el("td", {}, kind === "checkpoint" ? "full checkpoint" : "artifact"),
        el("td", { title: save.dir }, what),
        el("td", { class: "num" }, formatBytes(save.bytes)),
        el("td", { class: "muted" }, "not recorded"),
        resumableCell(kind, save.resume),
        kind === "artifact"
          ? save.archive === null
            ? el("td", { class: "warn" }, "not archived")
            : el("td", { class: "ok", title: save.archive.receipt }, save.archive.destination)
          : el("td", { class: "muted" }, save.retention.upload === "none" ? "-" : save.retention.upload),
        verifiedCell(save.last_verify),
        el("td", {}, retentionState(kind, save)),
      );
    }),
  );
  // The strip: one mark per save along the iterations, full checkpoints above, artifacts below.
  const strip = document.getElementById("timeline");
  const highest = Math.max(1, ...rows.map((r) => r.save.iteration));
  strip.replaceChildren(
    ...rows.map(({ kind, save }) =>
      el(
        "span",
        {
          class: `mark ${kind} ${save.resume.resumable === true ? "resumable" : save.resume.resumable === false ? "broken" : ""}`,
          "data-left": ((save.iteration / highest) * 100).toFixed(2),
          title: `${kind} ${save.iteration}`,
        },
        String(save.iteration),
      ),
    ),
  );
  // CSP forbids inline style attributes; position through the CSSOM instead.
  for (const mark of strip.children) mark.style.left = `${mark.dataset.left}%`;
}

function renderSummary(bundle) {
  document.getElementById("run-name").textContent = bundle.run.name;
  const status = document.getElementById("status");
  status.textContent = bundle.status;
  status.className = `badge ${bundle.status}`;
  const section = document.getElementById("summary");
  const items = bundle.attempts.map((a) => {
    const r = a.resume;
    const decision =
      r.decision === "checkpoint"
        ? `resume from iteration ${r.iteration}`
        : r.decision === "refused"
          ? `resume refused (${r.code})`
          : `resume: ${r.decision}`;
    return el(
      "li",
      { class: "attempt", "data-decision": r.decision },
      el("strong", {}, `attempt ${a.run_ts || "(legacy layout)"}`),
      ` (${a.minted}${a.minted_at === null ? "" : `, ${a.minted_at}`}): `,
      el(
        "span",
        { class: r.decision === "checkpoint" ? "ok" : r.decision === "fresh" ? "" : "bad" },
        decision,
      ),
      el("div", { class: "reason" }, r.reason),
    );
  });
  const storage =
    bundle.storage === null
      ? "storage: unknown"
      : `storage: ${bundle.storage.tier} (${bundle.storage.filesystem}${bundle.storage.probed ? ", probed" : ", by filesystem type"}): ${bundle.storage.ok ? "sound" : bundle.storage.reasons.join("; ")}`;
  section.replaceChildren(
    el("ul", { class: "attempts" }, ...items),
    el("p", {}, storage),
    ...(bundle.complete ? [] : [el("p", { class: "bad" }, "incomplete: a bound cut the collection short")]),
  );
}

async function renderProblems(problems, root) {
  const list = document.getElementById("problems");
  if (problems.length === 0) {
    list.replaceChildren(el("li", { class: "ok" }, "no problems reported"));
    return;
  }
  const meanings = new Map();
  await Promise.all(
    [...new Set(problems.map((p) => p.code))].map(async (code) => {
      const entry = await getJson(`/api/explain?code=${encodeURIComponent(code)}`).catch(() => undefined);
      if (entry !== undefined) meanings.set(code, entry.meaning);
    }),
  );
  list.replaceChildren(
    ...problems.map((p) =>
      el(
        "li",
        { class: `problem ${p.severity}`, "data-code": p.code },
        el("span", { class: "code" }, p.code),
        ` ${p.severity}${p.cause === null ? "" : ` (${p.cause})`} `,
        el("span", { class: "subject", title: p.subject }, shown(p.subject, root)),
        el("div", { class: "message" }, p.message),
        ...(meanings.has(p.code) ? [el("div", { class: "meaning" }, meanings.get(p.code))] : []),
        el("div", { class: "remedy" }, el("strong", {}, "remedy: "), p.remedy),
      ),
    ),
  );
}

async function renderRetention() {
  const summary = document.getElementById("retention-summary");
  const list = document.getElementById("retention-list");
  try {
    const answer = await getJson(
      `/api/retention?${query({
        keep_model_last: state.keep_model_last,
        keep_optim_last: state.keep_optim_last,
        upload: state.upload,
      })}`,
    );
    if (answer.outlook === null) {
      summary.textContent = "no attempt to plan for";
      list.replaceChildren();
      return;
    }
    const o = answer.outlook;
    summary.textContent = o.summary;
    list.replaceChildren(
      ...o.release.map((r) =>
        el(
          "li",
          { class: "release", "data-iteration": r.iteration },
          `releases ${r.target === "iteration" ? "the whole directory" : "the optimizer state"} of iteration ${r.iteration}`,
        ),
      ),
      ...o.keep.map((k) =>
        el(
          "li",
          { class: "keep", "data-iteration": k.iteration },
          `keeps ${k.target === "iteration" ? "iteration" : "the optimizer state of"} ${k.iteration}: ${k.reason}`,
        ),
      ),
    );
  } catch (error) {
    summary.textContent = `${error.code}: ${error.message}`;
    list.replaceChildren();
  }
}

async function load() {
  document.getElementById("path").value = state.path;
  document.getElementById("verify").value = state.verify;
  for (const name of ["keep_model_last", "keep_optim_last"])
    document.getElementById(name).value = state[name];
  document.getElementById("upload").checked = state.upload === "1";
  const raw = `/api/evidence?${query({ verify: state.verify })}`;
  document.getElementById("raw").href = raw;
  const error = document.getElementById("error");
  try {
    const root = await getJson("/api/root");
    document.getElementById("root").textContent = root.root;
    const bundle = await getJson(raw);
    error.hidden = true;
    renderSummary(bundle);
    renderTimeline(bundle);
    await Promise.all([renderProblems(bundle.problems, bundle.root), renderRetention()]);
    document.body.dataset.loaded = "evidence";
  } catch (failure) {
    error.hidden = false;
    error.replaceChildren(
      el("p", { class: "bad", "data-code": failure.code }, `${failure.code}: ${failure.message}`),
    );
    document.getElementById("status").textContent = "error";
    document.body.dataset.loaded = "error";
  }
}

function navigate() {
  const q = new URLSearchParams({
    path: state.path,
    verify: state.verify,
    keep_model_last: state.keep_model_last,
    keep_optim_last: state.keep_optim_last,
    upload: state.upload,
  });
  history.pushState(null, "", `?${q}`);
  document.body.dataset.loaded = "";
  load();
}

document.getElementById("path-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.path = document.getElementById("path").value || ".";
  state.verify = document.getElementById("verify").value;
  navigate();
});
document.getElementById("retention-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.keep_model_last = document.getElementById("keep_model_last").value || "0";
  state.keep_optim_last = document.getElementById("keep_optim_last").value || "0";
  state.upload = document.getElementById("upload").checked ? "1" : "0";
  navigate();
});
load();
