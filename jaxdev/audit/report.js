// jaxdev coverage explorer: draws the JSON in #data. No libraries, nothing fetched. This half: the data,
// the URL hash, filtering and the detail pieces; report_draw.js (drawing, events) closes the closure.
(() => {
  "use strict";
  const D = JSON.parse(document.getElementById("data").textContent);
  const $ = (sel) => document.querySelector(sel);
  const esc = (s) =>
    String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const ST = D.statuses;
  const PAGE = 400;
  const SHORT = {
    bool: "bool", uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64", int8: "i8", int16: "i16", int32: "i32",
    int64: "i64", float16: "f16", bfloat16: "bf16", float32: "f32", float64: "f64", complex32: "c32",
    complex64: "c64", complex128: "c128", float8_e4m3fn: "f8e4m3", float8_e4m3fnuz: "f8e4m3z",
    float8_e5m2: "f8e5m2", float8_e5m2fnuz: "f8e5m2z",
  };
  const short = (dt) => SHORT[dt] || dt;
  const DIR_SHORT = { forward: "fwd", backward: "bwd", compile: "cmp", "compile-backward": "cbw", fused: "fus" };
  // the coverage options that rerun one direction (compile-backward is --mode compile's second direction)
  const DIR_MODE = { forward: " --no-backward", backward: "", compile: " --mode compile --no-backward",
    "compile-backward": " --mode compile", fused: " --mode fused" };

  function cellsOf(row, flat) {
    const out = [];
    for (let i = 0; i < flat.length; i += 5) {
      out.push({ row, dt: flat[i], dir: flat[i + 1], st: flat[i + 2], n: flat[i + 3], det: flat[i + 4] });
    }
    return out;
  }
  // other platforms' matrices (coverage/tpu/matrix.yaml beside this one) add rows of their own
  const PLATFORMS = D.platforms || [];
  const OPS = D.opinfo.map((r, i) => {
    const plat = r[4] || 0;
    const key = plat ? `${r[0]} @${PLATFORMS[plat]}` : r[0];
    const row = { i, tab: "opinfo", name: r[0], key, plat, fam: [r[1]], aten: r[2].map((k) => D.aten_names[k]), info: {} };
    row.cells = cellsOf(row, r[3]);
    return row;
  });
  const ATEN = D.aten.rows.map((r, i) => {
    const row = { i, tab: "aten", name: r[0], fam: r[1], reach: r[2].map((k) => OPS[k].name), info: D.aten.infos[r[4]] };
    row.cells = cellsOf(row, r[3]);
    return row;
  });
  const byName = new Map(OPS.filter((r) => !r.plat).map((r) => [r.name, r]));
  const CH = D.changes
    ? D.changes.rows.map((r, i) => {
        const row = { i, tab: "changes", name: r[0], fam: [r[1]], kind: r[6], old: r[4], now: r[5], info: {} };
        const op = byName.get(r[0]);
        row.aten = op ? op.aten : [];
        const dt = D.dtypes.indexOf(r[2]);
        const st = ST.indexOf(r[5]);
        row.cells = [{ row, dt, dir: D.directions.indexOf(r[3]), st, n: 0, det: r[7], missing: st < 0 }];
        if (op) {
          const same = op.cells.find((c) => c.dt === dt && c.dir === row.cells[0].dir);
          if (same) row.cells[0].n = same.n;
        }
        return row;
      })
    : [];
  const ROWS = { opinfo: OPS, aten: ATEN, changes: CH };
  // baseline status per cell key, to say "was pass" in the details
  const WAS = new Map(CH.map((r) => [r.name + "|" + D.dtypes[r.cells[0].dt] + "|" + D.directions[r.cells[0].dir], r]));

  // ---- state <-> URL hash ----
  const state = { tab: "opinfo", q: "", status: new Set(), dir: new Set(), dtype: new Set(), family: "", view: "grid",
    sort: "name", info: {}, open: "", shown: PAGE, platform: "" };
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    const set = (k) => new Set((p.get(k) || "").split(",").filter(Boolean));
    state.tab = ROWS[p.get("tab")] && (p.get("tab") !== "changes" || D.changes) ? p.get("tab") : "opinfo";
    state.q = p.get("q") || "";
    state.status = set("status");
    state.dir = set("dir");
    state.dtype = set("dtype");
    state.family = p.get("family") || "";
    state.platform = PLATFORMS.includes(p.get("platform")) ? p.get("platform") : "";
    state.view = p.get("view") === "list" ? "list" : "grid";
    state.sort = p.get("sort") === "worst" ? "worst" : "name";
    state.open = p.get("open") || "";
    state.info = {};
    for (const k of D.aten.columns) if (p.get(k)) state.info[k] = p.get(k);
    state.shown = PAGE;
  }
  function writeHash() {
    const p = new URLSearchParams();
    if (state.tab !== "opinfo") p.set("tab", state.tab);
    if (state.q) p.set("q", state.q);
    for (const k of ["status", "dir", "dtype"]) if (state[k].size) p.set(k, [...state[k]].join(","));
    if (state.family) p.set("family", state.family);
    if (state.platform) p.set("platform", state.platform);
    if (state.view !== "grid") p.set("view", state.view);
    if (state.sort !== "name") p.set("sort", state.sort);
    for (const [k, v] of Object.entries(state.info)) if (state.tab === "aten" && v) p.set(k, v);
    if (state.open) p.set("open", state.open);
    const h = p.toString().replace(/%2C/g, ",").replace(/%7C/g, "|").replace(/%3A/g, ":").replace(/%3D/g, "=");
    history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
  }

  // ---- filtering ----
  function matcher(q) {
    const terms = q.trim().toLowerCase().split(/\s+/).filter(Boolean);
    if (!terms.length) return null;
    return terms.map((t) => {
      if (t.startsWith("=")) return (s) => s.toLowerCase() === t.slice(1);
      if (/[*?]/.test(t)) {
        const re = new RegExp("^" + t.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".") + "$");
        return (s) => re.test(s.toLowerCase());
      }
      return (s) => s.toLowerCase().includes(t);
    });
  }
  function names(row) {
    return [row.name, ...(row.aten || []), ...(row.reach || [])];
  }
  function colVisible(c) {
    return (!state.dir.size || state.dir.has(D.directions[c.dir])) && (!state.dtype.size || state.dtype.has(D.dtypes[c.dt]));
  }
  // Rows of the tab passing every filter but status; each with its visible cells.
  function prefiltered() {
    const m = matcher(state.q);
    const colsOn = state.dir.size || state.dtype.size;
    const out = [];
    for (const row of ROWS[state.tab]) {
      if (state.family && !row.fam.includes(state.family)) continue;
      if (state.platform && state.tab === "opinfo" && PLATFORMS[row.plat] !== state.platform) continue;
      if (state.tab === "aten" && Object.entries(state.info).some(([k, v]) => v && String(row.info[k]) !== v)) continue;
      if (m && !m.every((f) => names(row).some(f))) continue;
      const vis = row.cells.filter(colVisible);
      if (colsOn && row.cells.length && !vis.length) continue;
      out.push({ row, vis });
    }
    return out;
  }
  function filtered(pre) {
    // a changed cell matches its status now or its status in the baseline
    const wanted = (c) => state.status.has(ST[c.st]) || (c.row.old && state.status.has(c.row.old));
    let out = pre.map((p) => ({ ...p, hit: state.status.size ? p.vis.filter(wanted) : p.vis }));
    if (state.status.size) out = out.filter((p) => p.hit.length);
    if (state.sort === "worst") {
      // worst status first (statuses are listed worst first), then the most cells that are not pass
      const PASS = ST.indexOf("pass");
      const key = (p) => [Math.min(...p.hit.map((c) => c.st), 99), -p.hit.filter((c) => c.st < PASS).length];
      out = out.map((p) => [key(p), p]).sort((a, b) => a[0][0] - b[0][0] || a[0][1] - b[0][1]).map((x) => x[1]);
    }
    return out;
  }

  // ---- pieces ----
  const badge = (s) => `<span class="badge s-${esc(s)}">${esc(s)}</span>`;
  const label = (k) => D.aten.labels[k] || k;
  // an aten verdict in the colour of the statuses it stands for
  const VERDICT = { pass: "pass", fails: "exception", fallback: "fallback", untriable: "skip" };
  const verdict = (v) => `<span class="badge s-${VERDICT[v] || "skip"}">${esc(v)}</span>`;
  const chip = (group, value, text, on, extra = "", title = "") =>
    `<button class="chip${on ? " on" : ""}${extra}" data-g="${group}" data-v="${esc(value)}" title="${esc(title)}">${text}</button>`;
  function tipText(c) {
    const det = D.details[c.det] || {};
    const counts = det.counts ? Object.entries(det.counts).map(([k, v]) => `${v} ${k}`).join(", ") : "";
    const r = det.reason ? `<div class="r">${esc(det.reason.length > 400 ? det.reason.slice(0, 400) + "…" : det.reason)}</div>` : "";
    return `<b>${esc(c.row.name)}</b> · ${esc(D.dtypes[c.dt])} · ${esc(D.directions[c.dir])}<br>` +
      `${badge(c.missing ? "absent" : ST[c.st])} ${c.n ? c.n + " samples" : ""}${counts ? " (" + esc(counts) + ")" : ""}${r}` +
      `<div class="r">click for details</div>`;
  }
  const KNOWN = new Set(["reason", "repro", "counts", "max_abs", "max_rel", "fallback", "limited", "random", "arbitrated"]);
  function rerun(name, dt, dir) {
    if (name.startsWith("aten::")) return `jaxdev explain ${name}`;
    return `jaxdev coverage '${name}' --dtype ${dt}${DIR_MODE[dir] || ""} --jobs 1 --out /tmp/cov\njaxdev explain ${name}`;
  }
  function cmd(label, text) {
    return `<div class="cmd"><span>${label}</span><pre>${esc(text)}</pre><button data-copy="${esc(text)}">copy</button></div>`;
  }
  function pills(list, tab) {
    if (!list || !list.length) return "<span class='muted'>none recorded</span>";
    return `<div class="pills">${list.map((a) => `<button class="chip" data-jump="${tab}" data-v="${esc(a)}">${esc(a)}</button>`).join("")}</div>`;
  }
  function cellDetail(c) {
    const row = c.row;
    const dt = D.dtypes[c.dt];
    const dir = D.directions[c.dir];
    const det = D.details[c.det] || {};
    const status = c.missing ? "absent" : ST[c.st];
    let h = `<h3>${esc(row.name)} <span class="muted">· ${esc(dt)} · ${esc(dir)}</span> ${badge(status)}`;
    const was = WAS.get(row.name + "|" + dt + "|" + dir);
    if (was) h += `<span class="muted was">baseline: ${badge(was.old)} (${esc(was.kind)})</span>`;
    h += "</h3>";
    if (status !== "absent" && D.meaning[status]) h += `<div class="muted">${esc(status)}: ${esc(D.meaning[status])}</div>`;
    if (det.reason) h += `<div class="reason">${esc(det.reason)}</div>`;
    h += "<dl>";
    if (c.n) h += `<dt>samples</dt><dd>${c.n}${det.limited ? " (the first samples only: --max-samples)" : ""}</dd>`;
    if (det.counts) h += `<dt>by sample</dt><dd>${Object.entries(det.counts).map(([k, v]) => `${badge(k)} ${v}`).join(" ")}</dd>`;
    if (det.max_abs != null) h += `<dt>max abs error</dt><dd>${esc(det.max_abs)}</dd>`;
    if (det.max_rel != null) h += `<dt>max rel error</dt><dd>${esc(det.max_rel)}</dd>`;
    if (det.fallback) h += `<dt>ran on CPU</dt><dd class="mono">${esc([].concat(det.fallback).join(", "))}</dd>`;
    if (det.random) h += `<dt>random</dt><dd>${esc(JSON.stringify(det.random))}</dd>`;
    if (det.arbitrated) h += `<dt>float64 arbitration</dt><dd>${esc(det.arbitrated)} sample(s) differ from CPU beyond tolerance, jax within tolerance of the float64 result or no farther from it than CPU (the reason gives both errors)</dd>`;
    for (const [k, v] of Object.entries(det)) {
      if (!KNOWN.has(k)) h += `<dt>${esc(k)}</dt><dd>${esc(typeof v === "object" ? JSON.stringify(v) : v)}</dd>`;
    }
    h += "</dl>";
    if (det.repro) h += cmd("repro", det.repro);
    h += cmd("rerun", rerun(row.name, dt, dir));
    if (det.fallback) h += cmd("explain", [].concat(det.fallback).map((op) => `jaxdev explain ${op}`).join("\n"));
    return h + rowExtras(row);
  }
  function rowExtras(row) {
    let h = "";
    if (row.tab === "aten") {
      const info = row.info;
      if (info.verdict) h += `<h3>verdict ${verdict(info.verdict)} ${esc(info.category || "")}</h3>`;
      if (info.reason) h += `<div class="reason">${esc(info.reason)}</div>`;
      if (info.repro) h += cmd("repro", info.repro);
      h += "<dl>";
      for (const [k, v] of Object.entries(info)) {
        if (["verdict", "category", "reason", "repro", "opinfos", "judged_by"].includes(k)) continue;
        h += `<dt>${esc(label(k))}</dt><dd>${esc(typeof v === "object" && v !== null ? JSON.stringify(v) : v)}</dd>`;
      }
      h += `</dl><h3>Reached by the samples of</h3>${pills(row.reach, "opinfo")}`;
      if (info.judged_by) h += `<h3>Its cells come from</h3>${pills(info.judged_by, "opinfo")}`;
    } else if (row.aten) {
      h += `<h3>aten overloads its samples reached</h3>${pills(row.aten, "aten")}`;
    }
    return h;
  }
  function rowDetail(row) {
    let h = `<h3>${esc(row.name)} <span class="fam">${esc(row.fam.join(", "))}</span></h3>`;
    const tally = {};
    for (const c of row.cells) tally[ST[c.st]] = (tally[ST[c.st]] || 0) + 1;
    if (row.cells.length) h += `<p>${Object.entries(tally).map(([k, v]) => `${badge(k)} ${v}`).join(" ")}</p>`;
    const bad = row.cells.filter((c) => ST[c.st] !== "pass").sort((a, b) => a.st - b.st);
    if (bad.length) {
      h += "<dl>" + bad.map((c) => {
        const det = D.details[c.det] || {};
        return `<dt>${badge(ST[c.st])} ${esc(D.dtypes[c.dt])} ${esc(D.directions[c.dir])}</dt><dd>${esc((det.reason || "").slice(0, 300))}</dd>`;
      }).join("") + "</dl>";
    }
    if (row.tab === "opinfo") h += cmd("rerun", `jaxdev coverage '${row.name}' --jobs 1 --out /tmp/cov\njaxdev explain ${row.name}`);
    if (row.tab === "aten") h += cmd("explain", `jaxdev explain ${row.name}`);
    return h + rowExtras(row);
  }

