/* The dshkit session viewer. Reads the log's data from #dshkit-data, builds one row per shown event
   (and one per tool call, beside its result), and puts in the DOM only the rows in view, so a
   100,000-event log opens as fast as a small one. The request of a step is rebuilt on demand by
   folding the log's surface operations, the same fold as dshkit.session's (Surface.fold). */
"use strict";
(function () {
  // The log's data; `load` replaces it (a served page polls for a longer log, `dshkit log serve`).
  let DATA, EVENTS, MESSAGES, HEADERS, STEPS, ROWS = [], stepRows = [];
  // Each compaction as dshkit.session.compactions.read_compactions reads it, by the seq of each of its events.
  let compactionAt = new Map();
  const SEQ = 0, TIME = 1, TYPE = 2, MSG = 3, OP = 4, SOURCES = 5, INFO = 6, HEADER = 7;
  const ROW_HEIGHT = 28, OVERSCAN = 12;

  // -- small DOM helpers (text only: nothing from the log is ever parsed as HTML) --------------
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function add(parent, ...children) { for (const c of children) if (c) parent.appendChild(c); return parent; }
  function oneLine(text, limit) {
    const flat = String(text).replace(/\s+/g, " ").trim();
    return flat.length > limit ? flat.slice(0, limit - 1) + "…" : flat;
  }
  function when(ms) { return new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC"; }
  function pretty(value) {
    if (typeof value === "string") {
      try { return JSON.stringify(JSON.parse(value), null, 2); } catch (e) { return value; }
    }
    return JSON.stringify(value, null, 2);
  }

  // -- what a message says ------------------------------------------------------------------
  function blockText(blocks) {
    const parts = [];
    for (const b of blocks || []) {
      if (b.type === "text") parts.push(b.text || "");
      else if (b.type === "reasoning") parts.push("(reasoning: " + (b.text || "") + ")");
      else if (b.type === "tool_result") parts.push(blockText(b.content));
      else if (b.type === "image") parts.push("(image)");
      else if (b.type !== "tool_call") parts.push("(" + b.type + " block)");
    }
    return parts.filter(Boolean).join(" ");
  }
  function sourceLabel(source) {
    const kind = source.kind;
    if (kind === "model") return "model " + source.provider + "/" + source.model;
    if (kind === "tool") return "tool " + source.call_id;
    if (kind === "plugin") return "plugin " + source.plugin + (source.form ? " " + source.form : "");
    return String(kind);
  }
  function toolCalls(message) { return (message.content || []).filter((b) => b.type === "tool_call"); }
  // What a message says on its row: a compaction's summary message says its summary, not its checkpoint preamble.
  function messageText(message, seq) {
    const compaction = compactionAt.get(seq);
    return compaction && compaction.message_seq === seq && compaction.summary_text !== null ? compaction.summary_text : blockText(message.content);
  }
  function shortId(id) { return id ? String(id) : "?"; }

  // -- compactions, as the log describes them ---------------------------------------------------
  function indexCompactions(list) {
    compactionAt = new Map();
    for (const c of list || []) for (const seq of [c.start_seq, c.summary_event_seq, c.message_seq, c.end_seq]) if (seq !== null && seq !== undefined) compactionAt.set(seq, c);
  }
  function compactionText(type, c, info) {
    const n = c ? c.replaced_ids.length : 0;
    if (type === "compaction/start") {
      const why = [c.reason, c.turn === null || c.turn === undefined ? "between turns" : "turn " + c.turn].filter(Boolean).join(", ");
      const what = c.message_seq !== null
        ? n + " messages, " + shortId(c.replaced_ids[0]) + " … " + shortId(c.replaced_ids[n - 1]) + " → summary " + shortId(c.summary_id)
        : c.end_seq === null ? "never ended" : "replaced nothing: " + oneLine(c.error || "", 120);
      return "compaction starts (" + why + "): " + what;
    }
    if (type === "compaction/summary") {
      const tokens = c.tokens_before !== null && c.tokens_after !== null ? "; request " + c.tokens_before + " → " + c.tokens_after + " tokens" : "";
      return "compaction summary: " + n + " messages (" + c.shadowed_token_count + " tokens) by " + c.provider + "/" + c.model + tokens + ": " + oneLine(c.summary_text || "", 160);
    }
    if (type === "compaction/end") return c.error ? "compaction ends: failed: " + oneLine(c.error, 160) : "compaction ends: summary " + shortId(c.summary_id);
    const seqs = info.shadowed_seqs || [];
    return "compaction prune: result #" + seqs[0] + ", " + info.shadowed_token_count + " → " + (info.token_count_after !== undefined ? info.token_count_after : "?") + " tokens";
  }
  function modelVisible(message) {
    if (message.role !== "assistant") return true;
    return (message.content || []).some((b) => (b.type !== "text" && b.type !== "reasoning") || b.text);
  }

  // -- rows ------------------------------------------------------------------------------------
  // Which events were replaced, and by what: a replace keeping the id is a rewrite (prune), one
  // with a new message puts that message (a compaction summary) in place of the whole range.
  function buildRows() {
    const replacedBy = new Map();
    const eventBySeq = new Map();
    for (const ev of EVENTS) {
      eventBySeq.set(ev[SEQ], ev);
      const op = ev[OP];
      if (op && op !== "append" && ev[MSG] !== null) {
        const newer = MESSAGES[ev[MSG]];
        for (const seq of ev[SOURCES]) {
          const older = eventBySeq.get(seq);
          const same = older && older[MSG] !== null && MESSAGES[older[MSG]].id === newer.id;
          replacedBy.set(seq, { seq: ev[SEQ], id: newer.id, kind: same ? "rewritten" : "compacted" });
        }
      }
    }

    const ROWS = [];
    const callRows = new Map(); // call id -> the row of the latest call still waiting for its result
    let turn = null, step = null, depth = 0;
    for (const ev of EVENTS) {
      const type = ev[TYPE], info = ev[INFO] || {};
      if (type === "turn/start") {
        turn = info.turn; depth = 1;
        ROWS.push({ kind: "turn", ev, text: "Turn " + info.turn + "  ·  " + when(ev[TIME]), depth: 0 });
      } else if (type === "turn/end") {
        const reason = info.reason || {};
        const rest = Object.assign({}, reason); delete rest.kind;
        const extra = Object.keys(rest).length ? " " + JSON.stringify(rest) : "";
        ROWS.push({ kind: "turn-end", ev, text: "Turn " + info.turn + " ended: " + (reason.kind || reason) + extra, depth: 1 });
        depth = 0; turn = null;
      } else if (type === "step/start") {
        step = info.step; depth = 2;
        const facts = STEPS[ev[SEQ]] || {};
        const usage = facts.input_tokens !== undefined || facts.output_tokens !== undefined
          ? "  ·  " + (facts.input_tokens || 0) + " in / " + (facts.output_tokens || 0) + " out tokens" : "";
        const chunks = facts.chunks ? "  ·  " + facts.chunks + " chunks" : "";
        ROWS.push({ kind: "step", ev, facts, text: "Step " + info.turn + "." + info.step + usage + chunks, depth: 1 });
      } else if (type === "step/end") {
        depth = turn === null ? 0 : 1;
      } else if (ev[MSG] !== null) {
        const message = MESSAGES[ev[MSG]];
        const row = { kind: "message", ev, message, depth, text: messageText(message, ev[SEQ]), replaced: replacedBy.get(ev[SEQ]) };
        ROWS.push(row);
        if (type === "tool/result") {
          const call = callRows.get(message.source.call_id);
          if (call && !call.result) { call.result = row; callRows.delete(message.source.call_id); }
        }
        for (const call of toolCalls(message)) {
          const callRow = { kind: "call", ev, message, call, depth: depth + 1, text: call.name + " " + (call.arguments || "") };
          ROWS.push(callRow);
          callRows.set(call.id, callRow);
        }
      } else if (type === "request/header") {
        const header = HEADERS[ev[HEADER]] || {};
        const system = typeof header.system === "string" ? "system “" + oneLine(header.system, 60) + "”  ·  " : "";
        ROWS.push({ kind: "header", ev, header, depth, text: "request header (" + info.reason + "): " + system + (header.tools || []).length + " tools" });
      } else if (type === "agent/inbox/spliced") {
        const ids = info.inserted_ids || [];
        ROWS.push({ kind: "inbox", ev, depth, text: "inbox " + info.target + " " + (info.outcome || "") + ": at " + info.start + " removed " + info.removed_count + ", inserted " + ids.length + (ids.length ? " (" + ids.join(", ") + ")" : "") });
      } else if (type.startsWith("compaction/") && (compactionAt.has(ev[SEQ]) || type === "compaction/prune")) {
        ROWS.push({ kind: "compaction", ev, depth, compaction: compactionAt.get(ev[SEQ]), text: compactionText(type, compactionAt.get(ev[SEQ]), info) });
      } else if (type === "tool/call") {
        ROWS.push({ kind: "other", ev, depth, text: "tool " + info.name + " started (call " + info.call_id + ")" });
      } else {
        ROWS.push({ kind: "other", ev, depth, text: type + " " + oneLine(JSON.stringify(info), 140) });
      }
    }

    return ROWS;
  }

  function load(data) {
    DATA = data;
    EVENTS = data.events; MESSAGES = data.messages; HEADERS = data.headers; STEPS = data.steps;
    indexCompactions(data.compactions);
    ROWS = buildRows();
    stepRows = ROWS.filter((row) => row.kind === "step");
    const S = data.session;
    factsLine.textContent = S.id + "  ·  " + S.where + "  ·  " + S.event_count + " events (" + S.chunk_count + " streamed chunks folded into their steps)  ·  created " + when(S.created_at);
  }

  // -- the request of a step, rebuilt from the log ---------------------------------------------
  function rebuildRequest(atSeq) {
    const blocked = DATA.session.blocked_at;
    if (blocked !== null && blocked !== undefined && blocked <= atSeq)
      throw new Error("event #" + blocked + " has a type this log does not know: no request can be derived after it");
    let nodes = [], header = null, headerSeq = null;
    for (const ev of EVENTS) {
      if (ev[SEQ] > atSeq) break;
      if (ev[HEADER] !== null) { header = HEADERS[ev[HEADER]]; headerSeq = ev[SEQ]; }
      if (ev[MSG] === null) continue;
      const message = MESSAGES[ev[MSG]], op = ev[OP], visible = modelVisible(message);
      if (op === "append") { if (visible) nodes.push({ message, seq: ev[SEQ] }); continue; }
      if (visible && op.end - op.start === 1 && nodes[op.start].message.id === message.id) nodes[op.start] = { message, seq: ev[SEQ] };
      else nodes.splice(op.start, op.end - op.start, ...(visible ? [{ message, seq: ev[SEQ] }] : []));
    }
    return { atSeq, nodes, header: header || {}, headerSeq };
  }

  // -- page skeleton -----------------------------------------------------------------------------
  const factsLine = el("div", "facts mono");
  const top = add(el("header", "top"), el("h1", null, "dshkit session"), factsLine);
  const search = el("input"); search.id = "search"; search.type = "search"; search.placeholder = "Search ids, text, tools…";
  const matches = el("span"); matches.id = "matches";
  add(top, search, matches);
  const chartBox = el("div"); chartBox.id = "chart-box";
  const canvas = el("canvas"); canvas.id = "chart";
  const legend = el("div", "legend");
  const swatch = (color, text) => { const s = el("span", null); const sw = el("span", "swatch"); sw.style.background = color; return add(s, sw, document.createTextNode(text)); };
  const chartNote = el("span", null, "");
  add(legend, el("span", null, "Tokens per step"), swatch("var(--input)", "input"), swatch("var(--output)", "output"), chartNote);
  add(chartBox, canvas, legend);
  const main = el("main");
  const timeline = el("div"); timeline.id = "timeline";
  const spacer = el("div"); spacer.id = "spacer";
  const detail = el("aside"); detail.id = "detail";
  add(timeline, spacer); add(main, timeline, detail);
  add(document.body, top, chartBox, main);

  // -- the virtualised list ---------------------------------------------------------------------
  let shown = ROWS, query = "", selected = null;
  const live = new Map(); // index in `shown` -> its element

  function highlight(parent, text) {
    if (!query) { parent.textContent = text; return parent; }
    const lower = text.toLowerCase();
    let at = 0, hit;
    while ((hit = lower.indexOf(query, at)) !== -1) {
      parent.appendChild(document.createTextNode(text.slice(at, hit)));
      parent.appendChild(el("mark", null, text.slice(hit, hit + query.length)));
      at = hit + query.length;
    }
    parent.appendChild(document.createTextNode(text.slice(at)));
    return parent;
  }

  // Text cut to `limit` for its row; while searching, the part around the first match, so that a
  // row kept by the search always shows what matched.
  function excerpt(text, limit) {
    const flat = String(text).replace(/\s+/g, " ").trim();
    if (flat.length <= limit) return flat;
    const hit = query ? flat.toLowerCase().indexOf(query) : -1;
    if (hit < 0 || hit + query.length <= limit - 1) return flat.slice(0, limit - 1) + "…";
    const start = Math.max(0, hit - Math.floor(limit / 3));
    return "…" + flat.slice(start, start + limit - 2) + "…";
  }
  function callsBadge(message) { const calls = toolCalls(message); return calls.length ? "calls " + calls.map((c) => c.name).join(", ") : ""; }
  function replacedBadge(row) { return row.replaced.kind + " → #" + row.replaced.seq; }
  function replacesBadge(row) {
    const op = row.ev[OP];
    return op && op !== "append" ? "replaces " + (op.end - op.start) + " (surface " + op.start + "…" + (op.end - 1) + ")" : "";
  }
  function callText(call, limit) { return "⚙ " + call.name + "(" + excerpt(call.arguments || "", limit || 200) + ")  id=" + call.id; }
  function resultText(result, limit) { return "→ #" + result.ev[SEQ] + " " + excerpt(result.text, limit || 300); }

  function rowElement(row) {
    const node = el("div", "row " + row.kind);
    node.style.paddingLeft = 6 + row.depth * 16 + "px";
    node.dataset.seq = row.ev[SEQ];
    node.dataset.kind = row.kind;
    if (row.kind !== "call") add(node, highlight(el("span", "seq mono"), "#" + row.ev[SEQ]));
    if (row.kind === "message") {
      const m = row.message;
      node.dataset.id = m.id;
      add(node, highlight(el("span", "role " + m.role), m.role), highlight(el("span", "id mono"), m.id), highlight(el("span", "badge"), sourceLabel(m.source)));
      const calls = callsBadge(m);
      if (calls) add(node, highlight(el("span", "badge calls"), calls));
      const replaces = replacesBadge(row);
      if (replaces) add(node, highlight(el("span", "badge replaces"), replaces));
      if (row.replaced) { node.classList.add("is-replaced"); add(node, highlight(el("span", "badge replaced"), replacedBadge(row))); }
      for (const warning of warnings(row)) add(node, highlight(el("span", "badge warn"), warning));
      add(node, highlight(el("span", "text"), excerpt(row.text, 400)));
    } else if (row.kind === "call") {
      node.dataset.callId = row.call.id;
      const pair = el("div", "pair");
      add(pair, highlight(el("span", "cell call-cell mono"), callText(row.call)));
      add(pair, row.result ? highlight(el("span", "cell result"), resultText(row.result)) : el("span", "cell missing", "no result in the log"));
      add(node, pair);
    } else {
      add(node, highlight(el("span", "text"), row.text));
      if (row.kind === "step" && row.facts.request_at !== undefined) {
        const button = el("button", "inline show-request", "show request");
        button.addEventListener("click", (e) => { e.stopPropagation(); select(row); showRequest(row); });
        add(node, button);
      }
    }
    if (row === selected) node.classList.add("selected");
    node.addEventListener("click", () => select(row));
    return node;
  }

  function paint() {
    const first = Math.max(0, Math.floor(timeline.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(shown.length, Math.ceil((timeline.scrollTop + timeline.clientHeight) / ROW_HEIGHT) + OVERSCAN);
    for (const [index, node] of live) if (index < first || index >= last) { node.remove(); live.delete(index); }
    for (let index = first; index < last; index++) {
      if (live.has(index)) continue;
      const node = rowElement(shown[index]);
      node.style.top = index * ROW_HEIGHT + "px";
      spacer.appendChild(node);
      live.set(index, node);
    }
  }
  function reset() {
    for (const node of live.values()) node.remove();
    live.clear();
    spacer.style.height = shown.length * ROW_HEIGHT + "px";
    paint();
  }
  let painting = false;
  timeline.addEventListener("scroll", () => { if (!painting) { painting = true; requestAnimationFrame(() => { painting = false; paint(); }); } });
  window.addEventListener("resize", () => { paint(); drawChart(); });

  function scrollToRow(row) {
    let index = shown.indexOf(row);
    if (index < 0) { search.value = ""; applySearch(); index = shown.indexOf(row); }
    timeline.scrollTop = Math.max(0, index * ROW_HEIGHT - timeline.clientHeight / 3);
    paint();
  }

  // -- search ------------------------------------------------------------------------------------
  function warnings(row) {
    const info = row.ev[INFO] || {}, found = [];
    if (info.interrupted) found.push("interrupted");
    if (info.error) found.push("error " + (info.error.code || ""));
    return found;
  }
  // Only what the row shows (its text in full: the row shows the part around a match), one part
  // per element, so a row the search keeps always shows the match.
  function haystack(row) {
    if (row.hay === undefined) {
      let parts;
      if (row.kind === "call") parts = [callText(row.call, Infinity), row.result ? resultText(row.result, Infinity) : ""];
      else if (row.kind === "message") {
        const m = row.message;
        parts = ["#" + row.ev[SEQ], m.role, m.id, sourceLabel(m.source), callsBadge(m), replacesBadge(row), row.replaced ? replacedBadge(row) : "", ...warnings(row), oneLine(row.text, Infinity)];
      } else parts = ["#" + row.ev[SEQ], row.text];
      row.hay = parts.map((part) => part.toLowerCase());
    }
    return row.hay;
  }
  function matchesQuery(row) { return haystack(row).some((part) => part.includes(query)); }
  function refilter() {
    query = search.value.trim().toLowerCase();
    shown = query ? ROWS.filter(matchesQuery) : ROWS;
    matches.textContent = query ? shown.length + " of " + ROWS.length + " rows" : ROWS.length + " rows";
  }
  function applySearch() {
    refilter();
    timeline.scrollTop = 0;
    reset();
  }
  let searchTimer = null;
  search.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(applySearch, 120); });
  search.addEventListener("keydown", (e) => { if (e.key === "Enter") { clearTimeout(searchTimer); applySearch(); } });

  // -- the detail pane -----------------------------------------------------------------------------
  function jump(seq, label) {
    const link = el("a", "jump", label || "#" + seq);
    link.addEventListener("click", () => { const row = ROWS.find((r) => r.ev[SEQ] === seq && r.kind !== "call"); if (row) { select(row); scrollToRow(row); } });
    return link;
  }
  function facts(pairs) {
    const dl = el("dl");
    for (const [key, value] of pairs) if (value !== undefined && value !== null && value !== "") add(dl, el("dt", null, key), value instanceof Node ? add(el("dd"), value) : el("dd", "mono", value));
    return dl;
  }
  function contentBlocks(message) {
    const box = el("div", "content");
    for (const block of message.content || []) {
      add(box, el("div", "block-kind", block.type));
      if (block.type === "text" || block.type === "reasoning") add(box, el("pre", block.type, block.text || ""));
      else if (block.type === "tool_call") add(box, el("pre", "tool-call", block.name + " (id " + block.id + ")\n" + pretty(block.arguments || "")));
      else if (block.type === "tool_result") add(box, el("pre", "tool-result", blockText(block.content) || pretty(block.content)));
      else add(box, el("pre", null, pretty(block)));
    }
    return box;
  }
  function messageDetail(row) {
    const m = row.message, ev = row.ev, op = ev[OP], info = ev[INFO] || {};
    add(detail, el("h2", null, m.role + " message"));
    const replaced = row.replaced ? add(el("span"), document.createTextNode(row.replaced.kind + " by "), jump(row.replaced.seq), document.createTextNode(" (" + row.replaced.id + ")")) : null;
    const replaces = op && op !== "append" ? add(el("span"), document.createTextNode("surface " + op.start + "…" + (op.end - 1) + ": events "), ...ev[SOURCES].flatMap((s) => [jump(s), document.createTextNode(" ")])) : null;
    add(detail, facts([["id", m.id], ["role", m.role], ["source", JSON.stringify(m.source)], ["event", ev[TYPE] + " #" + ev[SEQ]], ["time", when(ev[TIME])],
      ["turn.step", info.turn !== undefined ? info.turn + "." + info.step : ""], ["finish", info.finish_reason], ["usage", info.usage ? JSON.stringify(info.usage) : ""],
      ["replaced", replaced], ["replaces", replaces]]));
    add(detail, el("h3", null, "Content"), contentBlocks(m));
  }
  function callDetail(row) {
    add(detail, el("h2", null, "Tool call " + row.call.name));
    add(detail, facts([["call id", row.call.id], ["called by", add(el("span"), jump(row.ev[SEQ]), document.createTextNode(" " + row.message.id))],
      ["result", row.result ? add(el("span"), jump(row.result.ev[SEQ]), document.createTextNode(" " + row.result.message.id)) : "none in the log"]]));
    const pair = el("div", "pair");
    add(pair, add(el("div", "call-side"), el("h3", null, "Call"), el("pre", "tool-call", pretty(row.call.arguments || ""))));
    add(pair, add(el("div", "result-side"), el("h3", null, "Result"), row.result ? contentBlocks(row.result.message) : el("p", "empty", "The log holds no result for this call.")));
    add(detail, pair);
  }
  function showRequest(row) {
    let box = detail.querySelector(".request");
    if (box) box.textContent = "";
    else { box = el("section", "request"); detail.appendChild(box); }
    let request;
    try { request = rebuildRequest(row.facts.request_at); } catch (error) { add(box, el("p", "error", error.message)); return; }
    add(box, el("h3", null, "Request, rebuilt from events #0…#" + request.atSeq));
    const header = request.header;
    add(box, facts([["header", request.headerSeq === null ? "none logged" : add(el("span"), jump(request.headerSeq))], ["system", typeof header.system === "string" ? header.system : header.system ? JSON.stringify(header.system) : ""],
      ["tools", (header.tools || []).map((t) => t.name).join(", ")], ["config", header.config && Object.keys(header.config).length ? JSON.stringify(header.config) : ""],
      ["messages", String(request.nodes.length)]]));
    const list = add(el("ol", "request-list"));
    for (const node of request.nodes) {
      const item = el("li", "request-message");
      item.dataset.id = node.message.id;
      add(item, jump(node.seq), el("span", "role " + node.message.role, node.message.role), el("span", "id mono", node.message.id), el("span", "badge", sourceLabel(node.message.source)), el("span", "text", oneLine(messageText(node.message, node.seq) || toolCalls(node.message).map((c) => "calls " + c.name).join(", "), 200)));
      add(list, item);
    }
    add(box, list);
  }
  function stepDetail(row) {
    const f = row.facts;
    add(detail, el("h2", null, row.text.split("  ·  ")[0]));
    add(detail, facts([["event", "#" + row.ev[SEQ]], ["time", when(row.ev[TIME])], ["input tokens", f.input_tokens], ["output tokens", f.output_tokens],
      ["finish", f.finish_reason], ["chunks", f.chunks], ["request at", f.request_at !== undefined ? "#" + f.request_at : "no model call in this step"]]));
    if (f.request_at !== undefined) {
      const button = el("button", "inline show-request", "show request");
      button.addEventListener("click", () => showRequest(row));
      add(detail, button);
    }
  }
  function eventDetail(row) {
    add(detail, el("h2", null, row.ev[TYPE] + " #" + row.ev[SEQ]));
    add(detail, facts([["time", when(row.ev[TIME])], ["derived from", row.ev[SOURCES].length ? add(el("span"), ...row.ev[SOURCES].flatMap((s) => [jump(s), document.createTextNode(" ")])) : ""]]));
    const info = row.ev[INFO];
    if (row.header) add(detail, el("h3", null, "Header"), el("pre", null, pretty(row.header)));
    if (row.compaction) { compactionDetail(row.compaction); return; }
    if (info && Object.keys(info).length) add(detail, el("h3", null, "Data"), el("pre", null, pretty(info)));
  }
  function compactionDetail(c) {
    const seqLink = (seq) => (seq === null || seq === undefined ? "" : jump(seq));
    add(detail, facts([["compaction", c.compaction_id], ["why", c.reason], ["turn", c.turn === null ? "between turns" : c.turn], ["started", seqLink(c.start_seq)],
      ["summary record", seqLink(c.summary_event_seq)], ["summary message", c.message_seq === null ? "" : add(el("span"), jump(c.message_seq), document.createTextNode(" " + c.summary_id))],
      ["ended", c.end_seq === null ? "never (the log stops inside it)" : seqLink(c.end_seq)], ["failed", c.error],
      ["by", c.provider ? c.provider + "/" + c.model : ""], ["replaced tokens", c.shadowed_token_count],
      ["request tokens", c.tokens_before !== null && c.tokens_after !== null ? c.tokens_before + " → " + c.tokens_after : ""]]));
    if (c.summary_text !== null) add(detail, el("h3", null, "Summary"), el("pre", "text summary", c.summary_text));
    add(detail, el("h3", null, "Compacted messages"));
    const list = el("ol", "request-list compacted");
    c.replaced_seqs.forEach((seq, i) => {
      const r = ROWS.find((candidate) => candidate.kind === "message" && candidate.ev[SEQ] === seq);
      const m = r ? r.message : { role: "?", id: c.replaced_ids[i] };
      add(list, add(el("li"), jump(seq), el("span", "role " + m.role, m.role), el("span", "id mono", m.id), el("span", "text", r ? oneLine(r.text, 120) : "")));
    });
    if (!c.replaced_seqs.length) for (const id of c.replaced_ids) add(list, add(el("li"), el("span", "id mono", id)));
    add(detail, list);
  }
  function select(row) {
    selected = row;
    for (const node of live.values()) node.classList.toggle("selected", false);
    for (const [index, node] of live) if (shown[index] === row) node.classList.add("selected");
    detail.textContent = "";
    if (row.kind === "message") messageDetail(row);
    else if (row.kind === "call") callDetail(row);
    else if (row.kind === "step") stepDetail(row);
    else eventDetail(row);
  }

  // -- token usage per step ----------------------------------------------------------------------
  // Steps per bar: every step its own bar while bars stay at least 4 px wide, else runs of steps,
  // each bar the largest step of its run (a long run is still readable: bars, not a solid ramp).
  let chartBars = [];
  function chartBuckets(width) {
    const per = Math.max(1, Math.ceil(stepRows.length / Math.max(1, Math.floor(width / 4))));
    const bars = [];
    for (let first = 0; first < stepRows.length; first += per) {
      let top = stepRows[first], topTotal = -1;
      for (const row of stepRows.slice(first, first + per)) {
        const total = (row.facts.input_tokens || 0) + (row.facts.output_tokens || 0);
        if (total > topTotal) { top = row; topTotal = total; }
      }
      bars.push({ row: top, input: top.facts.input_tokens || 0, output: top.facts.output_tokens || 0, steps: Math.min(per, stepRows.length - first) });
    }
    return { bars, per };
  }
  function drawChart() {
    const width = canvas.clientWidth, height = canvas.clientHeight, ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    const { bars, per } = chartBuckets(width);
    chartBars = bars;
    const max = Math.max(0, ...bars.map((b) => b.input + b.output));
    const slot = bars.length ? width / bars.length : width;
    // Whole pixels, at least one between bars: fractional edges would blur neighbours into one block.
    const bar = Math.max(1, Math.min(24, Math.floor(slot) - Math.max(1, Math.floor(slot / 4))));
    const css = getComputedStyle(document.documentElement);
    bars.forEach(({ input, output }, i) => {
      const x = Math.floor(i * slot + (slot - bar) / 2), hIn = max ? (input / max) * (height - 2) : 0, hOut = max ? (output / max) * (height - 2) : 0;
      ctx.fillStyle = css.getPropertyValue("--input"); ctx.fillRect(x, height - hIn, bar, hIn);
      ctx.fillStyle = css.getPropertyValue("--output"); ctx.fillRect(x, height - hIn - hOut, bar, hOut);
      if (!input && !output) { ctx.fillStyle = "#d1d5db"; ctx.fillRect(x, height - 2, bar, 2); } // a step without usage
    });
    const grouping = per > 1 ? ", " + bars.length + " bars of " + per + " steps (each the largest step of its run)" : "";
    chartNote.textContent = !stepRows.length ? "no steps"
      : max === 0 ? stepRows.length + " steps; no step reported token usage"
      : stepRows.length + " steps" + grouping + ", up to " + max + " tokens (grey: no usage reported; click a bar to go to its step)";
    canvas.dataset.bars = String(bars.length);
  }
  function barAt(e) { return chartBars.length ? chartBars[Math.min(chartBars.length - 1, Math.floor((e.offsetX / canvas.clientWidth) * chartBars.length))] : null; }
  canvas.addEventListener("click", (e) => { const hit = barAt(e); if (hit) { select(hit.row); scrollToRow(hit.row); } });
  canvas.addEventListener("mousemove", (e) => { const hit = barAt(e); if (hit) canvas.title = hit.row.text + (hit.steps > 1 ? " (largest of " + hit.steps + " steps)" : ""); });

  // -- a served page follows the log as it grows ---------------------------------------------------
  async function follow() {
    let answer;
    try { answer = await fetch("data?since=" + DATA.session.event_count, { cache: "no-store" }); } catch (error) { return; }
    if (answer.status !== 200) return;
    const data = await answer.json();
    const atEnd = timeline.scrollTop + timeline.clientHeight >= shown.length * ROW_HEIGHT - ROW_HEIGHT;
    const was = selected && [selected.ev[SEQ], selected.kind, selected.call ? selected.call.id : null];
    load(data);
    refilter();
    reset();
    if (atEnd) { timeline.scrollTop = shown.length * ROW_HEIGHT; paint(); }
    drawChart();
    const again = was && ROWS.find((row) => row.ev[SEQ] === was[0] && row.kind === was[1] && (row.call ? row.call.id : null) === was[2]);
    if (again) { const request = detail.querySelector(".request"); if (!request) select(again); else selected = again; }
    document.body.dataset.events = String(DATA.session.event_count);
  }

  load(JSON.parse(document.getElementById("dshkit-data").textContent));
  shown = ROWS;
  matches.textContent = ROWS.length + " rows";
  reset();
  drawChart();
  if (ROWS.length) select(ROWS[0]);
  document.body.dataset.events = String(DATA.session.event_count);
  if (DATA.live) setInterval(follow, DATA.live.poll_ms);
  performance.mark("dshkit-viewer-painted");
  document.body.dataset.ready = "1";
  // For tests and tools: the rows and the request fold, read-only.
  window.dshkitViewer = { rows: () => ROWS.length, scrollToSeq: (seq, above) => { timeline.scrollTop = (shown.findIndex((row) => row.ev[SEQ] === seq) - (above || 0)) * ROW_HEIGHT; paint(); }, shown: () => shown.length, rebuildRequest, search: (text) => { search.value = text; applySearch(); } };
})();
