// jaxdev coverage explorer: draws the JSON in #data. No libraries, nothing fetched.
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
  const OPS = D.opinfo.map((r, i) => {
    const row = { i, tab: "opinfo", name: r[0], fam: [r[1]], aten: r[2].map((k) => D.aten_names[k]), info: {} };
    row.cells = cellsOf(row, r[3]);
    return row;
  });
  const ATEN = D.aten.rows.map((r, i) => {
    const row = { i, tab: "aten", name: r[0], fam: r[1], reach: r[2].map((k) => OPS[k].name), info: D.aten.infos[r[4]] };
    row.cells = cellsOf(row, r[3]);
    return row;
  });
  const byName = new Map(OPS.map((r) => [r.name, r]));
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
    sort: "name", info: {}, open: "", shown: PAGE };
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    const set = (k) => new Set((p.get(k) || "").split(",").filter(Boolean));
    state.tab = ROWS[p.get("tab")] && (p.get("tab") !== "changes" || D.changes) ? p.get("tab") : "opinfo";
    state.q = p.get("q") || "";
    state.status = set("status");
    state.dir = set("dir");
    state.dtype = set("dtype");
    state.family = p.get("family") || "";
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

  // ---- drawing ----
  function drawTabs() {
    const tabs = [["opinfo", "OpInfos", OPS.length], ["aten", "aten overloads", ATEN.length]];
    if (D.changes) tabs.push(["changes", "Changed since the baseline", CH.length]);
    $("#tabs").innerHTML = tabs.map(([k, label, n]) =>
      `<button data-tab="${k}" class="${state.tab === k ? "on" : ""}">${label}<span class="n">${n}</span></button>`).join("");
  }
  function drawToolbar(pre) {
    const counts = {};
    const dirs = new Set(), dts = new Set();
    for (const row of ROWS[state.tab]) for (const c of row.cells) { dirs.add(c.dir); dts.add(c.dt); }
    for (const p of pre) for (const c of p.vis) counts[c.st] = (counts[c.st] || 0) + 1;
    const statusChips = ST.map((s, i) => [s, i]).filter(([s, i]) => counts[i] || state.status.has(s)).map(([s, i]) =>
      chip("status", s, `<span class="dot s-${s}"></span>${esc(s)} <span class="k">${counts[i] || 0}</span>`,
        state.status.has(s), counts[i] ? "" : " zero", D.meaning[s] || "")).join("");
    const dirChips = [...dirs].sort((a, b) => a - b).map((d) => chip("dir", D.directions[d], esc(D.directions[d]), state.dir.has(D.directions[d]))).join("");
    const dtChips = [...dts].sort((a, b) => a - b).map((d) =>
      chip("dtype", D.dtypes[d], esc(short(D.dtypes[d])), state.dtype.has(D.dtypes[d]))).join("");
    const fams = [...new Set(ROWS[state.tab].flatMap((r) => r.fam))].sort();
    const famSel = `<select id="family"><option value="">all families</option>${fams.map((f) =>
      `<option${f === state.family ? " selected" : ""}>${esc(f)}</option>`).join("")}</select>`;
    let infoSel = "";
    if (state.tab === "aten") {
      for (const k of D.aten.columns) {
        const vals = [...new Set(ATEN.map((r) => String(r.info[k])))].filter((v) => v !== "undefined").sort();
        infoSel += `<select data-info="${esc(k)}"><option value="">${esc(label(k))}: all</option>${vals.map((v) =>
          `<option value="${esc(v)}"${state.info[k] === v ? " selected" : ""}>${esc(label(k))}: ${esc(v)}</option>`).join("")}</select>`;
      }
    }
    const placeholder = state.tab === "aten" ? "Search: index_put, aten::add.*" : "Search: linalg.*, index_put, =add";
    const focused = document.activeElement && document.activeElement.id === "q";
    const caret = focused ? document.activeElement.selectionStart : null;
    $("#toolbar").innerHTML =
      `<input type="search" id="q" placeholder="${esc(placeholder)}" value="${esc(state.q)}" title="Words must all match (substring, or a glob with * and ?; =name for exactly name). Press / to focus.">` +
      (statusChips ? `<div class="group"><label>status</label>${statusChips}</div>` : "") +
      (dirChips ? `<div class="group"><label>direction</label>${dirChips}</div>` : "") +
      (dtChips ? `<div class="group"><label>dtype</label>${dtChips}</div>` : "") +
      `<div class="group"><label>family</label>${famSel}${infoSel}</div>` +
      (state.tab === "changes" ? "" : `<div class="group"><label>view</label><span class="seg"><button data-view="grid" class="${state.view === "grid" ? "on" : ""}">grid</button><button data-view="list" class="${state.view === "list" ? "on" : ""}">cell list</button></span>` +
        (state.view === "grid" ? `<span class="seg"><button data-sort="name" class="${state.sort === "name" ? "on" : ""}">by name</button><button data-sort="worst" class="${state.sort === "worst" ? "on" : ""}">worst first</button></span>` : "") + `</div>`) +
      `<button class="link" id="reset">reset filters</button><span id="count"></span>`;
    if (focused) { const q = $("#q"); q.focus(); q.setSelectionRange(caret, caret); }
  }
  // The aten view's own columns: the verdict with its category, the two routes in one, then the rest.
  function atenColumns() {
    const cols = [];
    const rest = D.aten.columns.filter((k) => !["verdict", "category"].includes(k) && !k.startsWith("route."));
    if (D.aten.columns.includes("verdict")) {
      cols.push({ title: "verdict", cell: (i) => (i.verdict ? verdict(i.verdict) : "") + (i.category ? ` <span class="sub">${esc(i.category)}</span>` : "") });
    }
    const routes = D.aten.columns.filter((k) => k.startsWith("route."));
    if (routes.length) {
      cols.push({ title: "route (" + routes.map((k) => label(k).replace(" route", "")).join(" / ") + ")",
        cell: (i) => `<span class="mono">${routes.map((k) => esc(i[k] ?? "?")).join(" / ")}</span>` });
    }
    for (const k of rest) cols.push({ title: label(k), cell: (i) => esc(i[k] ?? "") });
    return cols;
  }
  function columns(rows) {
    const seen = new Set();
    for (const { vis } of rows) for (const c of vis) seen.add(c.dir * 1000 + c.dt);
    return [...seen].sort((a, b) => a - b).map((k) => ({ dir: Math.floor(k / 1000), dt: k % 1000 }));
  }
  function drawGrid(rows, pre) {
    const cols = columns(pre);
    const infoCols = state.tab === "aten" ? atenColumns() : [];
    const what = state.tab === "aten" ? "aten overload" : "OpInfo";
    const famCol = state.tab === "aten"; // OpInfo names carry their namespace already
    let head1 = `<tr><th class="name" rowspan="2">${what}</th>` + (famCol ? `<th rowspan="2">family</th>` : "");
    for (const col of infoCols) head1 += `<th rowspan="2">${esc(col.title)}</th>`;
    if (state.tab === "aten" && !D.aten.present) head1 += `<th rowspan="2">reached by OpInfos</th>`;
    let head2 = "<tr>";
    let prevDir = -1;
    for (let j = 0; j < cols.length; j++) {
      if (cols[j].dir !== prevDir) {
        const span = cols.filter((c) => c.dir === cols[j].dir).length;
        const dname = D.directions[cols[j].dir];
        const label = span >= 4 ? dname : DIR_SHORT[dname] || dname.slice(0, 3);
        head1 += `<th class="dir" colspan="${span}" title="${esc(dname)}">${esc(label)}</th>`;
        prevDir = cols[j].dir;
        cols[j].first = true;
      }
      head2 += `<th class="dt${cols[j].first ? " first" : ""}" title="${esc(D.dtypes[cols[j].dt])}"><span>${esc(short(D.dtypes[cols[j].dt]))}</span></th>`;
    }
    head1 += "</tr>";
    head2 += "</tr>";
    const body = [];
    for (const { row, hit } of rows.slice(0, state.shown)) {
      const hitSet = new Set(hit);
      const at = new Map(row.cells.map((c) => [c.dir * 1000 + c.dt, c]));
      let tr = `<tr class="row" data-t="${row.tab}" data-i="${row.i}" data-name="${esc(row.name)}"><td class="name"><button class="op" title="details of ${esc(row.name)}">${esc(row.name)}</button>`;
      if (row.tab === "opinfo" && row.aten.length) tr += `<span class="sub">${row.aten.length} aten</span>`;
      const fams = row.fam.length > 2 ? row.fam.slice(0, 2).join(", ") + ` +${row.fam.length - 2}` : row.fam.join(", ");
      tr += "</td>" + (famCol ? `<td><span class="fam" title="${esc(row.fam.join(", "))}">${esc(fams)}</span></td>` : "");
      for (const col of infoCols) tr += `<td>${col.cell(row.info)}</td>`;
      if (state.tab === "aten" && !D.aten.present) tr += `<td class="reason">${row.reach.map(esc).join(", ")}</td>`;
      for (const col of cols) {
        const c = at.get(col.dir * 1000 + col.dt);
        const first = col.first ? " first" : "";
        if (!c) { tr += `<td class="c none${first}"></td>`; continue; }
        const s = ST[c.st];
        tr += `<td class="c s-${s}${hitSet.has(c) ? "" : " dim"}${first}" data-c="${row.cells.indexOf(c)}">${D.glyphs[s]}</td>`;
      }
      body.push(tr + "</tr>");
    }
    return `<table class="grid"><thead>${head1}${head2}</thead><tbody>${body.join("")}</tbody></table>`;
  }
  function drawList(rows) {
    const sev = (c) => c.st;
    const cells = [];
    for (const { hit } of rows) for (const c of hit) cells.push(c);
    cells.sort((a, b) => sev(a) - sev(b) || (a.row.name < b.row.name ? -1 : 1));
    const changes = state.tab === "changes";
    let h = `<table class="grid"><thead><tr><th class="name">${changes ? "OpInfo" : state.tab === "aten" ? "aten overload" : "OpInfo"}</th><th>family</th><th>dtype</th><th>direction</th>` +
      `${changes ? "<th>change</th><th>baseline → now</th>" : "<th>status</th><th>samples</th>"}<th>reason</th></tr></thead><tbody>`;
    for (const c of cells.slice(0, state.shown)) {
      const det = D.details[c.det] || {};
      const reason = det.reason || "";
      h += `<tr class="row click" data-t="${c.row.tab}" data-i="${c.row.i}" data-c="${c.row.cells.indexOf(c)}" data-name="${esc(c.row.name)}">` +
        `<td class="name"><span class="op">${esc(c.row.name)}</span></td><td><span class="fam">${esc(c.row.fam.join(", "))}</span></td>` +
        `<td>${esc(D.dtypes[c.dt])}</td><td>${esc(D.directions[c.dir])}</td>` +
        (changes ? `<td>${esc(c.row.kind)}</td><td>${badge(c.row.old)} → ${badge(c.row.now)}</td>` : `<td>${badge(ST[c.st])}</td><td>${c.n || ""}</td>`) +
        `<td class="reason">${esc(reason.length > 220 ? reason.slice(0, 220) + "…" : reason)}</td></tr>`;
    }
    return { html: h + "</tbody></table>", total: cells.length };
  }
  function draw() {
    drawTabs();
    const pre = prefiltered();
    const rows = filtered(pre);
    drawToolbar(pre);
    let inner, total, unit;
    const list = state.view === "list" || state.tab === "changes";
    if (list) {
      const r = drawList(rows);
      inner = r.html;
      total = r.total;
      unit = "cells";
    } else {
      inner = drawGrid(rows, pre);
      total = rows.length;
      unit = state.tab === "aten" ? "overloads" : "OpInfos";
    }
    let banner = "";
    if (state.tab === "aten" && !D.aten.present) {
      banner = `<div class="banner">No aten matrix${D.aten.source ? ` at <code>${esc(D.aten.source)}</code>` : ""}: ` +
        `this tab lists the ${ATEN.length} aten overloads the OpInfo samples reached (from the matrix's <code>aten:</code> lists) ` +
        `and the OpInfos reaching each. Verdicts per overload come with <code>coverage/aten.yaml</code>.</div>`;
    }
    const meta = D.aten.meta && D.aten.meta.counts;
    if (state.tab === "aten" && meta) {
      const v = meta.verdicts || {};
      const pct = (x) => (x == null ? "?" : (100 * x).toFixed(1) + "%");
      banner = `<div class="banner">${meta.overloads} aten overloads: ` +
        Object.entries(v).map(([k, n]) => `${verdict(k)} ${n}`).join(" ") +
        ` · tried ${meta.tried} (${pct(meta.tried_share)}; ${pct(meta.tried_share_dense)} of the ${meta.dense} neither sparse nor quantized)` +
        `. Cells aggregate the OpInfos whose samples reached the overload, or come from a direct trial on jax:0.</div>`;
    }
    if (state.tab === "changes") {
      const c = D.changes;
      banner = `<div class="banner">Cells of the baseline <code>${esc(c.source)}</code> (${c.cells} cells) whose status differs in this matrix. ` +
        `${c.unrecorded} cells of this matrix are not in the baseline and are not listed.</div>`;
    }
    const cellsShown = rows.reduce((n, r) => n + r.hit.length, 0);
    const moreBtn = total > state.shown ? `<button class="more" id="more">show all ${total} ${unit} (${total - state.shown} more)</button>` : "";
    const empty = total ? "" : `<div class="empty">Nothing matches these filters.</div>`;
    $("#view").innerHTML = banner + `<div class="tablewrap">${total ? inner : ""}${empty}${moreBtn}</div>`;
    $("#count").innerHTML = `<b>${total}</b> ${unit}` + (list ? "" : ` · ${cellsShown} cells`);
    $("#count").dataset.rows = String(total);
    document.documentElement.dataset.rendered = state.tab;
    writeHash();
    if (state.open) openDetail(state.open, false);
  }

  // ---- details ----
  // A detail's key names what it shows, so links survive a new matrix: tab|name, or tab|name|dtype|direction.
  const keyOf = (row, c) => [row.tab, row.name, ...(c ? [D.dtypes[c.dt], D.directions[c.dir]] : [])].join("|");
  function findCell(key) {
    const [tab, name, dt, dir] = key.split("|");
    const row = (ROWS[tab] || []).find((r) => r.name === name);
    if (!row) return null;
    if (dt === undefined) return { row, cell: null };
    const cell = row.cells.find((c) => D.dtypes[c.dt] === dt && D.directions[c.dir] === dir);
    return cell ? { row, cell } : null;
  }
  function openDetail(key, toggle = true) {
    const old = document.querySelector("tr.detail");
    if (old) old.remove();
    document.querySelectorAll(".open").forEach((e) => e.classList.remove("open"));
    if (toggle && state.open === key) { state.open = ""; writeHash(); return; }
    const found = findCell(key);
    if (!found) { state.open = ""; return; }
    const { row, cell } = found;
    const ci = cell ? row.cells.indexOf(cell) : -1;
    const sel = `tr.row[data-t="${row.tab}"][data-i="${row.i}"]` + (ci >= 0 && state.view === "list" || row.tab === "changes" ? `[data-c="${ci}"]` : "");
    const tr = document.querySelector(sel);
    state.open = key;
    writeHash();
    if (!tr) return;
    if (cell) {
      const td = tr.querySelector(`td.c[data-c="${ci}"]`);
      (td || tr).classList.add("open");
    } else tr.classList.add("open");
    tr.insertAdjacentHTML("afterend", `<tr class="detail"><td colspan="${tr.children.length}"><div class="box">${cell ? cellDetail(cell) : rowDetail(row)}</div></td></tr>`);
  }

  // ---- events ----
  function setAndDraw(fn) { fn(); state.shown = PAGE; state.open = ""; draw(); }
  document.addEventListener("click", (e) => {
    const t = e.target.closest("button, td.c, tr.row.click");
    if (!t) return;
    if (t.dataset.tab) return setAndDraw(() => { state.tab = t.dataset.tab; state.info = {}; });
    if (t.dataset.copy !== undefined) {
      const select = () => { // no clipboard (file:// pages in some browsers): select the text for Ctrl+C
        const range = document.createRange();
        range.selectNodeContents(t.previousElementSibling);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        t.textContent = "selected";
      };
      if (navigator.clipboard) navigator.clipboard.writeText(t.dataset.copy).then(() => { t.textContent = "copied"; }, select);
      else select();
      return;
    }
    if (t.dataset.jump) return setAndDraw(() => { state.tab = t.dataset.jump; state.q = "=" + t.dataset.v; state.info = {}; });
    if (t.dataset.g) {
      const set = state[t.dataset.g];
      return setAndDraw(() => (set.has(t.dataset.v) ? set.delete(t.dataset.v) : set.add(t.dataset.v)));
    }
    if (t.dataset.view) return setAndDraw(() => { state.view = t.dataset.view; });
    if (t.dataset.sort) return setAndDraw(() => { state.sort = t.dataset.sort; });
    if (t.id === "reset") return setAndDraw(() => { Object.assign(state, { q: "", status: new Set(), dir: new Set(), dtype: new Set(), family: "", info: {} }); });
    if (t.id === "more") { state.shown = Infinity; return draw(); }
    const tr = t.closest("tr.row");
    if (!tr) return;
    const row = ROWS[tr.dataset.t][+tr.dataset.i];
    if (t.matches("td.c")) return openDetail(keyOf(row, row.cells[+t.dataset.c]));
    if (t.matches("tr.row.click")) return openDetail(keyOf(row, row.cells[+tr.dataset.c]));
    if (t.classList.contains("op")) return openDetail(keyOf(row));
  });
  let typing;
  document.addEventListener("input", (e) => {
    if (e.target.id === "q") {
      clearTimeout(typing);
      typing = setTimeout(() => setAndDraw(() => { state.q = e.target.value; }), 150);
    }
  });
  document.addEventListener("change", (e) => {
    if (e.target.id === "family") setAndDraw(() => { state.family = e.target.value; });
    else if (e.target.dataset.info) setAndDraw(() => { state.info[e.target.dataset.info] = e.target.value; });
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && document.activeElement.tagName !== "INPUT") { e.preventDefault(); $("#q").focus(); }
    if (e.key === "Escape" && state.open) openDetail(state.open);
  });
  const tip = $("#tip");
  document.addEventListener("mouseover", (e) => {
    const td = e.target.closest && e.target.closest("td.c[data-c]");
    if (!td) { tip.hidden = true; return; }
    const tr = td.closest("tr.row");
    const c = ROWS[tr.dataset.t][+tr.dataset.i].cells[+td.dataset.c];
    tip.innerHTML = tipText(c);
    tip.hidden = false;
  });
  document.addEventListener("mousemove", (e) => {
    if (tip.hidden) return;
    const x = Math.min(e.clientX + 14, innerWidth - tip.offsetWidth - 8);
    const y = e.clientY + 16 + tip.offsetHeight > innerHeight ? e.clientY - tip.offsetHeight - 10 : e.clientY + 16;
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  });
  window.addEventListener("hashchange", () => { readHash(); draw(); });

  document.documentElement.classList.add("js");
  $("details.numbers").open = false; // open for readers without scripts; the explorer comes first here
  $("#app").hidden = false;
  readHash();
  draw();
})();
