  // report_draw.js: the explorer's second half, joined to report.js in one closure by report_html.page.
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
    const platSel = PLATFORMS.length > 1 && state.tab === "opinfo" ? `<select id="platform"><option value="">all platforms</option>${
      PLATFORMS.map((p) => `<option${p === state.platform ? " selected" : ""}>${esc(p)}</option>`).join("")}</select>` : "";
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
      (platSel ? `<div class="group"><label>platform</label>${platSel}</div>` : "") +
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
      if (row.tab === "opinfo" && PLATFORMS.length > 1) tr += `<span class="sub plat">${esc(PLATFORMS[row.plat])}</span>`;
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
    const platCol = state.tab === "opinfo" && PLATFORMS.length > 1;
    let h = `<table class="grid"><thead><tr><th class="name">${changes ? "OpInfo" : state.tab === "aten" ? "aten overload" : "OpInfo"}</th>${platCol ? "<th>platform</th>" : ""}<th>family</th><th>dtype</th><th>direction</th>` +
      `${changes ? "<th>change</th><th>baseline → now</th>" : "<th>status</th><th>samples</th>"}<th>reason</th></tr></thead><tbody>`;
    for (const c of cells.slice(0, state.shown)) {
      const det = D.details[c.det] || {};
      const reason = det.reason || "";
      h += `<tr class="row click" data-t="${c.row.tab}" data-i="${c.row.i}" data-c="${c.row.cells.indexOf(c)}" data-name="${esc(c.row.name)}">` +
        `<td class="name"><span class="op">${esc(c.row.name)}</span></td>${platCol ? `<td>${esc(PLATFORMS[c.row.plat])}</td>` : ""}<td><span class="fam">${esc(c.row.fam.join(", "))}</span></td>` +
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
  const keyOf = (row, c) => [row.tab, row.key || row.name, ...(c ? [D.dtypes[c.dt], D.directions[c.dir]] : [])].join("|");
  function findCell(key) {
    const [tab, name, dt, dir] = key.split("|");
    const row = (ROWS[tab] || []).find((r) => (r.key || r.name) === name);
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
    if (t.id === "reset") return setAndDraw(() => { Object.assign(state, { q: "", status: new Set(), dir: new Set(), dtype: new Set(), family: "", info: {}, platform: "" }); });
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
    else if (e.target.id === "platform") setAndDraw(() => { state.platform = e.target.value; });
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
