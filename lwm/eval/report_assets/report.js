"use strict";
// The row and episode viewers of an lwm report. Every text from the runs is inserted as
// text (textContent, text nodes), never parsed as HTML. Lists render PAGE entries at a
// time as the user scrolls; an entry's detail is built when it is opened.
(() => {
  const DATA = JSON.parse(document.getElementById("lwm-data").textContent);
  const PAGE = 100;
  const $ = (id) => document.getElementById(id);
  const runLabel = (i) => DATA.runs[i].label;

  // Control characters (ANSI escapes…) as their Unicode control pictures: ESC -> U+241B.
  const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/g;
  const visible = (s) => s.replace(CONTROL, (c) => (c === "\u007f" ? "\u2421" : String.fromCharCode(0x2400 + c.charCodeAt(0))));

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  const fmt = (v) => (v === null || v === undefined ? "—" : String(v));

  function chip(text, cls) { return el("span", "chip" + (cls ? " " + cls : ""), text); }

  // Scores ×100: 100 is good, under 50 bad; rewards are in [0, 1] (achieved from 0.5).
  function metricChip(name, v, top = 100) {
    const cls = v === null || v === undefined ? "" : v >= top ? "good" : v < top / 2 ? "bad" : "";
    return chip(`${name} ${fmt(v)}`, cls);
  }

  // A text with volatile spans shaded; cut after DATA.cut characters with a button for the rest.
  function textBlock(text, spans) {
    const pre = el("pre", "obs");
    if (!text) { pre.append(el("span", "empty", "(empty)")); return pre; }
    const fill = (limit) => {
      pre.textContent = "";
      const shown = limit ? text.slice(0, limit) : text;
      let pos = 0;
      for (const [s, e] of spans || []) {
        if (s >= shown.length) break;
        const end = Math.min(e, shown.length);
        pre.append(visible(shown.slice(pos, s)));
        pre.append(el("mark", "vol", visible(shown.slice(s, end))));
        pos = end;
      }
      pre.append(visible(shown.slice(pos)));
      if (limit) {
        const more = el("button", "cut", `✂ cut here: ${limit.toLocaleString()} of ${text.length.toLocaleString()} characters shown. Show all`);
        more.addEventListener("click", () => fill(0));
        pre.append(more);
      }
    };
    fill(text.length > DATA.cut ? DATA.cut : 0);
    return pre;
  }

  // A line diff from difflib opcodes [tag, i1, i2, j1, j2] (tags e, r, d, i) computed when the report was written.
  function diffBlock(a, b, ops) {
    if (!ops) return el("p", "help", "Too many lines for a line diff; compare the texts above.");
    if (ops.every((op) => op[0] === "e")) return el("p", "help", "Identical line by line.");
    const A = a.split("\n"), B = b.split("\n"), lines = [];
    const add = (cls, prefix, text) => lines.push([cls, prefix + text]);
    for (const [tag, i1, i2, j1, j2] of ops) {
      if (tag === "e") {
        const n = i2 - i1;
        if (n > 8) {
          for (let i = i1; i < i1 + 3; i++) add("", "  ", A[i]);
          add("skip", "", `… ${n - 6} equal lines …`);
          for (let i = i2 - 3; i < i2; i++) add("", "  ", A[i]);
        } else for (let i = i1; i < i2; i++) add("", "  ", A[i]);
        continue;
      }
      if (tag === "r" || tag === "d") for (let i = i1; i < i2; i++) add("d", "- ", A[i]);
      if (tag === "r" || tag === "i") for (let j = j1; j < j2; j++) add("i", "+ ", B[j]);
    }
    const box = el("div", "diff");
    const draw = (limit) => {
      box.textContent = "";
      for (const [cls, text] of lines.slice(0, limit)) box.append(el("div", cls, visible(text)));
      if (lines.length > limit) {
        const more = el("button", "cut", `✂ ${limit} of ${lines.length} diff lines shown. Show all`);
        more.addEventListener("click", () => draw(lines.length));
        box.append(more);
      }
    };
    draw(500);
    return box;
  }

  // A list that renders PAGE entries at a time while its sentinel nears the viewport.
  function lazyList(list, sentinel, count, render, noun) {
    let view = [], shown = 0;
    const more = () => {
      const end = Math.min(view.length, shown + PAGE);
      for (let i = shown; i < end; i++) list.append(render(view[i]));
      shown = end;
    };
    const fill = () => {
      more();
      requestAnimationFrame(() => {
        if (shown < view.length && sentinel.getBoundingClientRect().top < innerHeight + 800) fill();
      });
    };
    new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting)) fill(); }, { rootMargin: "800px" })
      .observe(sentinel);
    return {
      show(indices, total) {
        view = indices; shown = 0; list.textContent = "";
        count.textContent = `${indices.length.toLocaleString()} of ${total.toLocaleString()} ${noun}`;
        fill();
      },
      position: (i) => view.indexOf(i),
      reveal(pos) { while (shown <= pos) more(); return list.children[pos]; },
    };
  }

  // One entry of a list: a head that opens a detail built on first opening; a permalink.
  function item(hash, headParts, buildDetail) {
    const div = el("div", "item"), head = el("div", "item-head");
    head.append(...headParts);
    const link = el("a", "permalink", "¶");
    link.href = "#" + encodeURIComponent(hash);
    link.title = "permalink";
    link.addEventListener("click", (e) => e.stopPropagation());
    head.append(link);
    div.append(head);
    let detail = null;
    div.toggle = (open) => {
      div.classList.toggle("open", open);
      if (open && !detail) { detail = el("div", "detail"); buildDetail(detail); div.append(detail); }
      if (detail) detail.hidden = !open;
    };
    head.addEventListener("click", () => {
      const open = !div.classList.contains("open");
      div.toggle(open);
      if (open) history.replaceState(null, "", "#" + encodeURIComponent(hash));
    });
    return div;
  }

  function options(select, values, labels) {
    values.forEach((v, i) => { const o = el("option", null, labels ? labels[i] : v); o.value = v; select.append(o); });
  }

  const debounce = (f) => { let t; return () => { clearTimeout(t); t = setTimeout(f, 200); }; };

  function fields(ids, apply) {
    for (const id of ids) { const e = $(id); e.addEventListener(e.type === "search" || e.type === "number" ? "input" : "change", e.type === "search" ? debounce(apply) : apply); }
  }

  // ----------------------------------------------------------------- rows (lwm eval)
  let rows = null;
  if (DATA.rows.length) {
    const slots = DATA.rowRuns;
    options($("f-domain"), [...new Set(DATA.rows.map((r) => r.d))].sort());
    options($("f-depth"), [...new Set(DATA.rows.map((r) => r.dep))].sort((a, b) => parseInt(a) - parseInt(b)));
    options($("f-run"), slots.map((_, s) => String(s)), slots.map(runLabel));
    if (slots.length < 2) $("f-compare-label").hidden = true;
    if (!DATA.rows.some((r) => r.p.some((p) => p && p.m.judge !== null))) $("f-metric").querySelector("[value=judge]").remove();

    const rowHead = (r) => {
      const metric = $("f-metric").value, parts = [el("span", "key", r.k), el("span", "title", `${r.d} · ${r.id} · turn ${r.t}`)];
      r.p.forEach((p, s) => {
        if (!p) parts.push(chip(`${runLabel(slots[s])}: no prediction`));
        else if (p.err) parts.push(chip(`${runLabel(slots[s])}: failed`, "bad"));
        else parts.push(metricChip(`${runLabel(slots[s])}: ${metric}`, p.m[metric]));
      });
      if (r.p.some((p) => p && p.iss.length)) parts.push(chip("parse issues", "flag"));
      if (r.p.some((p) => p && p.dr)) parts.push(chip("history truncated", "flag"));
      return parts;
    };

    const rowDetail = (r) => (box) => {
      box.append(el("h4", null, "Action"));
      box.append(r.a === null ? el("p", "help", "not available (the run's data was not found)") : textBlock(r.a));
      const cols = el("div", "cols");
      const real = el("div", "col");
      real.append(el("h4", null, "Real observation"));
      real.append(r.r === null ? el("p", "help", "not available (the run's data was not found)") : textBlock(r.r, r.v));
      cols.append(real);
      r.p.forEach((p, s) => {
        const col = el("div", "col"), name = runLabel(slots[s]);
        col.append(el("h4", null, `Prediction: ${name}`));
        if (!p) { col.append(el("p", "help", "this run has no prediction for this row")); cols.append(col); return; }
        const chips = el("p");
        for (const [m, label] of DATA.metrics) if (p.m[m] !== null) chips.append(metricChip(label, p.m[m]), " ");
        for (const issue of p.iss) chips.append(chip(`parse issue: ${issue}`, "flag"), " ");
        if (p.dr) chips.append(chip(`${p.dr} oldest history turns dropped`, "flag"));
        col.append(chips);
        col.append(p.err ? el("pre", "error", `failed: ${p.err}`) : textBlock(p.o || ""));
        for (const [key, title] of [["rs", "reasoning"], ["out", "raw output"], ["jd", "judge verdict"]]) {
          if (p[key] === undefined) continue;
          const d = el("details");
          d.append(el("summary", null, title));
          d.append(textBlock(typeof p[key] === "string" ? p[key] : JSON.stringify(p[key], null, 2)));
          col.append(d);
        }
        cols.append(col);
      });
      box.append(cols);
      r.p.forEach((p, s) => {
        if (!p || p.err || r.r === null) return;
        box.append(el("h4", null, `Line diff: - real, + ${runLabel(slots[s])}`));
        box.append(diffBlock(r.r, p.o || "", p.df));
      });
    };

    rows = lazyList($("row-list"), $("row-more"), $("row-count"),
      (i) => { const r = DATA.rows[i]; return item("row=" + r.k, rowHead(r), rowDetail(r)); }, "rows");

    const applyRows = () => {
      const dom = $("f-domain").value, dep = $("f-depth").value, slot = +$("f-run").value, metric = $("f-metric").value;
      const max = $("f-max").value === "" ? null : +$("f-max").value, flag = $("f-flag").value;
      const cmp = $("f-compare").value, sort = $("f-sort").value, q = $("f-search").value.toLowerCase();
      const value = (r) => { const p = r.p[slot]; return p && !p.err && p.m[metric] !== null ? p.m[metric] : -1; };
      const idx = [];
      DATA.rows.forEach((r, i) => {
        const p = r.p[slot];
        if ((dom && r.d !== dom) || (dep && r.dep !== dep)) return;
        if (max !== null && !(value(r) >= 0 && value(r) <= max)) return;
        if (flag === "failed" && !(p && p.err)) return;
        if (flag === "issues" && !(p && p.iss.length)) return;
        if (flag === "dropped" && !(p && p.dr)) return;
        if (cmp) {
          const ps = r.p.filter(Boolean);
          if (new Set(ps.map((x) => (cmp === "exact" ? (x.err ? "failed" : x.m.exact) : x.o))).size < 2) return;
        }
        if (q && ![r.k, r.id, r.a, r.r, ...r.p.map((x) => x && x.o)].some((t) => t && t.toLowerCase().includes(q))) return;
        idx.push(i);
      });
      if (sort !== "input") idx.sort((a, b) => (sort === "worst" ? 1 : -1) * (value(DATA.rows[a]) - value(DATA.rows[b])));
      rows.show(idx, DATA.rows.length);
    };
    fields(["f-domain", "f-depth", "f-run", "f-metric", "f-max", "f-flag", "f-compare", "f-sort", "f-search"], applyRows);
    rows.apply = applyRows;
    rows.reset = () => { for (const id of ["f-domain", "f-depth", "f-max", "f-flag", "f-compare", "f-search"]) $(id).value = ""; applyRows(); };
    rows.find = (key) => DATA.rows.findIndex((r) => r.k === key);
    applyRows();
  }

  // ----------------------------------------------------------- episodes (rollout, wm2real)
  let episodes = null;
  if (DATA.episodes.length) {
    const epRuns = [...new Set(DATA.episodes.map((e) => e.run))];
    options($("e-run"), epRuns.map(String), epRuns.map(runLabel));
    options($("e-domain"), [...new Set(DATA.episodes.map((e) => e.d))].sort());

    const epHead = (e) => {
      const kinds = [...new Set(e.st.map((s) => s.pk).filter(Boolean))];
      return [chip(runLabel(e.run)), el("span", "title", `${e.d} · ${e.id}`), metricChip("reward", e.rw, 1),
        chip(`${e.st.length} steps`), ...kinds.map((k) => chip(k, k))];
    };

    const epDetail = (e) => (box) => {
      if (e.task) { box.append(el("h4", null, "Task")); box.append(textBlock(e.task)); }
      const verdict = el("div", "why");
      verdict.append(el("strong", null, `reward ${fmt(e.rw)}`));
      for (const [k, v] of Object.entries(e.extra || {})) verdict.append(` · ${k}: ${fmt(v)}`);
      if (e.why) { verdict.append(el("br")); verdict.append(`reward model: ${e.why}`); }
      box.append(verdict);
      if (e.init) { box.append(el("h4", null, "Initial observation")); box.append(textBlock(e.init)); }
      for (const s of e.st) {
        const step = el("div", "step"), h = el("h4", null, `Turn ${s.t} `);
        if (s.pk) h.append(chip(s.pk, s.pk));
        if (s.pv) h.append(" ", el("span", "help", s.pv));
        step.append(h);
        if (s.m) { const p = el("p", null, "against the real environment: "); for (const [m, label] of DATA.metrics) if (m in s.m) p.append(metricChip(label, s.m[m]), " "); step.append(p); }
        if (s.a !== undefined) { step.append(el("h4", null, "Action")); step.append(textBlock(s.a)); }
        if (s.o !== undefined || s.real) {
          const cols = el("div", "cols");
          for (const [title, text, spans] of [[s.real ? "Simulated observation" : "Observation", s.o, s.v], ["Real observation", s.real]]) {
            if (text === undefined || text === null) continue;
            const col = el("div", "col");
            col.append(el("h4", null, title));
            col.append(textBlock(text, spans));
            cols.append(col);
          }
          step.append(cols);
        }
        box.append(step);
      }
      if (e.meta && Object.keys(e.meta).length) {
        const d = el("details");
        d.append(el("summary", null, "metadata"));
        d.append(textBlock(JSON.stringify(e.meta, null, 2)));
        box.append(d);
      }
    };

    const epKey = (e) => `ep=${e.run}:${e.id}`;
    episodes = lazyList($("ep-list"), $("ep-more"), $("ep-count"),
      (i) => { const e = DATA.episodes[i]; return item(epKey(e), epHead(e), epDetail(e)); }, "episodes");
    const applyEpisodes = () => {
      const run = $("e-run").value, dom = $("e-domain").value, sort = $("e-sort").value, q = $("e-search").value.toLowerCase();
      const idx = [];
      DATA.episodes.forEach((e, i) => {
        if ((run && String(e.run) !== run) || (dom && e.d !== dom)) return;
        if (q && ![e.id, e.task].some((t) => t && t.toLowerCase().includes(q))) return;
        idx.push(i);
      });
      const rw = (i) => (DATA.episodes[i].rw === null || DATA.episodes[i].rw === undefined ? -1 : DATA.episodes[i].rw);
      if (sort !== "input") idx.sort((a, b) => (sort === "worst" ? 1 : -1) * (rw(a) - rw(b)));
      episodes.show(idx, DATA.episodes.length);
    };
    fields(["e-run", "e-domain", "e-sort", "e-search"], applyEpisodes);
    episodes.apply = applyEpisodes;
    episodes.reset = () => { for (const id of ["e-run", "e-domain", "e-search"]) $(id).value = ""; applyEpisodes(); };
    episodes.find = (key) => DATA.episodes.findIndex((e) => epKey(e) === "ep=" + key);
    applyEpisodes();
  }

  // ----------------------------------------------------------------- permalinks
  function openFromHash() {
    const h = decodeURIComponent(location.hash.slice(1));
    const [list, key] = h.startsWith("row=") ? [rows, h.slice(4)] : h.startsWith("ep=") ? [episodes, h.slice(3)] : [null, null];
    if (!list) return;
    const i = list.find(key);
    if (i < 0) return;
    if (list.position(i) < 0) list.reset();
    const node = list.reveal(list.position(i));
    node.toggle(true);
    node.scrollIntoView({ block: "start" });
  }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();
