// The dependency graph on a <canvas>, drawn as the engine laid it out (GET .../graph
// sends each box's position and each edge's path, routed between the boxes:
// services/engine/graph_layout.py), redrawn in one animation frame after any number
// of status changes, panned by dragging, zoomed with the wheel or +/-, and walked with
// the keyboard (arrow keys move between resources, Enter opens one). Status is shown by
// colour AND by a marker shape and a label, so it never depends on colour alone.
//
// What is drawn is what `boxes()` and `paths` hold: a box per node at (x, y) of the
// layout's size, and per edge its points, joined by straight lines within a row or a
// lane and, between rows, by a curve whose control points stay in the rectangle the two
// points span (so it stays in the gap between the rows, as the layout routed it).

/** The look of each visual state: fill, outline and marker (see the legend). */
export const STATES = {
  complete: { label: "complete", fill: "#d5ecd9", stroke: "#1a6b34", marker: "check" },
  progress: { label: "in progress", fill: "#d3e6f7", stroke: "#0b5da8", marker: "ring" },
  failed: { label: "failed", fill: "#fbdcd0", stroke: "#b3370b", marker: "cross" },
  replaced: { label: "replaced", fill: "#e6dcf3", stroke: "#5b3a91", marker: "diamond" },
  drifted: { label: "drifted", fill: "#fdeec2", stroke: "#8a5a00", marker: "triangle" },
  pending: { label: "not started", fill: "#f1f1f1", stroke: "#666666", marker: "square" },
  deleted: { label: "deleted", fill: "#ffffff", stroke: "#8c8c8c", marker: "dash" },
};

/** The visual state of a node from its action, status and flags. */
export function visualState(node) {
  if (node.status === "FAILED") return "failed";
  if (node.drifted) return "drifted";
  if (node.status === "IN_PROGRESS") return "progress";
  if (node.action === "DELETE" && node.status === "COMPLETE") return "deleted";
  if (node.action === "INIT") return "pending";
  if (node.replaced) return "replaced";
  return "complete";
}

export function drawMarker(ctx, kind, x, y, r, colour) {
  ctx.save();
  ctx.strokeStyle = colour;
  ctx.fillStyle = colour;
  ctx.lineWidth = Math.max(1.5, r / 3);
  ctx.beginPath();
  if (kind === "check") {
    ctx.moveTo(x - r, y);
    ctx.lineTo(x - r / 3, y + r * 0.7);
    ctx.lineTo(x + r, y - r * 0.7);
    ctx.stroke();
  } else if (kind === "ring") {
    ctx.arc(x, y, r, 0, Math.PI * 1.5);
    ctx.stroke();
  } else if (kind === "cross") {
    ctx.moveTo(x - r, y - r);
    ctx.lineTo(x + r, y + r);
    ctx.moveTo(x + r, y - r);
    ctx.lineTo(x - r, y + r);
    ctx.stroke();
  } else if (kind === "diamond") {
    ctx.moveTo(x, y - r);
    ctx.lineTo(x + r, y);
    ctx.lineTo(x, y + r);
    ctx.lineTo(x - r, y);
    ctx.closePath();
    ctx.fill();
  } else if (kind === "triangle") {
    ctx.moveTo(x, y - r);
    ctx.lineTo(x + r, y + r * 0.8);
    ctx.lineTo(x - r, y + r * 0.8);
    ctx.closePath();
    ctx.fill();
  } else if (kind === "square") {
    ctx.strokeRect(x - r * 0.8, y - r * 0.8, r * 1.6, r * 1.6);
  } else if (kind === "dash") {
    ctx.moveTo(x - r, y);
    ctx.lineTo(x + r, y);
    ctx.stroke();
  }
  ctx.restore();
}

export class GraphView {
  constructor(canvas, { onOpen = () => {}, onFocus = () => {} } = {}) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.onOpen = onOpen;
    this.onFocus = onFocus;
    this.nodes = new Map(); // name -> node (with x, y)
    this.edges = [];
    this.focused = null;
    this.view = { x: 0, y: 0, scale: 1 };
    this.pending = false;
    this.metrics = { layoutMs: 0, draws: 0, drawMs: [], events: 0, firstDrawAt: null };
    this.layoutInfo = null;
    this._bind();
    new ResizeObserver(() => this._resize()).observe(canvas);
  }

  /**
   * Show a new graph (nodes: [{name, type, action, status, ...}], edges: [{from, to}]) as
   * `drawing` (the graph's `layout`) places it.
   */
  setGraph(nodes, edges, drawing, { keepView = false } = {}) {
    const started = performance.now();
    const before = this.layoutInfo;
    this.layoutInfo = { nodeWidth: drawing.node_width, nodeHeight: drawing.node_height, width: drawing.width, height: drawing.height };
    // A view kept across a reload only while the drawing keeps its size (an update can reshape it).
    if (before && (before.width !== drawing.width || before.height !== drawing.height)) keepView = false;
    this.nodes = new Map();
    for (const n of nodes) {
      const [x, y, row] = drawing.positions[n.name];
      this.nodes.set(n.name, { ...n, x, y, layer: row });
    }
    this.rows = drawing.rows;
    this.edges = edges.filter((e) => this.nodes.has(e.from) && this.nodes.has(e.to));
    this.paths = drawing.edges.map((e) => {
      const xs = e.points.map((p) => p[0]);
      const ys = e.points.map((p) => p[1]);
      return { ...e, left: Math.min(...xs), right: Math.max(...xs), top: Math.min(...ys), bottom: Math.max(...ys) };
    });
    this.metrics.layoutMs = performance.now() - started;
    if (this.focused && !this.nodes.has(this.focused)) this.focused = null;
    if (!keepView) this.fit();
    this.requestDraw();
  }

  /** Apply a change to one node; drawn with every other change in the next frame. */
  update(name, patch) {
    const node = this.nodes.get(name);
    if (!node) return false;
    Object.assign(node, patch);
    this.requestDraw();
    return true;
  }

  state(name) {
    const node = this.nodes.get(name);
    return node ? visualState(node) : null;
  }

  /** Each box as drawn, in the drawing's coordinates. */
  boxes() {
    const { nodeWidth: width, nodeHeight: height } = this.layoutInfo || {};
    return [...this.nodes.values()].map((n) => ({ name: n.name, x: n.x, y: n.y, width, height }));
  }

  counts() {
    const counts = {};
    for (const node of this.nodes.values()) {
      const s = visualState(node);
      counts[s] = (counts[s] || 0) + 1;
    }
    return counts;
  }

  fit() {
    const { width, height } = this._size();
    const info = this.layoutInfo;
    if (!info || !width) return;
    const w = Math.max(info.width, 200) + 64;
    const h = Math.max(info.height, 40) + 64;
    const scale = Math.min(1.25, Math.max(0.02, Math.min(width / w, height / h)));
    this.view = { scale, x: (width - info.width * scale) / 2, y: Math.max(32 * scale, (height - info.height * scale) / 2) };
    this.requestDraw();
  }

  zoom(factor, cx, cy) {
    const { width, height } = this._size();
    const x = cx ?? width / 2;
    const y = cy ?? height / 2;
    const scale = Math.min(4, Math.max(0.03, this.view.scale * factor));
    const k = scale / this.view.scale;
    this.view = { scale, x: x - (x - this.view.x) * k, y: y - (y - this.view.y) * k };
    this.requestDraw();
  }

  focus(name, { reveal = true } = {}) {
    if (!this.nodes.has(name)) return;
    this.focused = name;
    if (reveal) this._reveal(this.nodes.get(name));
    this.onFocus(this.nodes.get(name));
    this.requestDraw();
  }

  requestDraw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    const started = performance.now();
    const ctx = this.ctx;
    const { width, height } = this._size();
    const ratio = window.devicePixelRatio || 1;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const { x: ox, y: oy, scale } = this.view;
    ctx.setTransform(ratio * scale, 0, 0, ratio * scale, ratio * ox, ratio * oy);
    const info = this.layoutInfo;
    if (!info) return;
    const nw = info.nodeWidth;
    const nh = info.nodeHeight;
    // The world rectangle on screen, to skip what cannot be seen.
    const left = -ox / scale - nw;
    const top = -oy / scale - nh;
    const right = (width - ox) / scale;
    const bottom = (height - oy) / scale;
    const visible = (n) => n.x >= left && n.x <= right && n.y >= top && n.y <= bottom;

    // Edges: one path (and one for the arrowheads); straight pieces when zoomed out.
    const detailed = scale >= 0.45;
    const arrows = new Path2D();
    ctx.lineWidth = 1.25 / Math.min(1, Math.max(scale, 0.35));
    ctx.strokeStyle = "#8d99a8";
    ctx.beginPath();
    for (const e of this.paths) {
      if (e.right < left || e.left > right + nw || e.bottom < top || e.top > bottom + nh) continue;
      const pts = e.points;
      ctx.moveTo(pts[0][0], pts[0][1]);
      for (let i = 1; i < pts.length; i++) {
        const [x1, y1] = pts[i - 1];
        const [x2, y2] = pts[i];
        if (!detailed || x1 === x2 || y1 === y2) ctx.lineTo(x2, y2);
        else {
          const ym = (y1 + y2) / 2; // control points inside the piece's rectangle: the curve stays in the gap
          ctx.bezierCurveTo(x1, ym, x2, ym, x2, y2);
        }
      }
      if (detailed && e.arrow) {
        const [x, y] = pts[pts.length - 1];
        arrows.moveTo(x, y);
        arrows.lineTo(x - 4.5, y - 9);
        arrows.lineTo(x + 4.5, y - 9);
        arrows.closePath();
      }
    }
    ctx.stroke();
    ctx.fillStyle = "#6b7787";
    ctx.fill(arrows);

    // Nodes: one path per visual state, filled and outlined at once.
    const groups = new Map();
    const shown = [];
    for (const n of this.nodes.values()) {
      if (!visible(n)) continue;
      const state = visualState(n);
      if (!groups.has(state)) groups.set(state, new Path2D());
      if (detailed) groups.get(state).roundRect(n.x, n.y, nw, nh, 8);
      else groups.get(state).rect(n.x, n.y, nw, nh);
      if (detailed) shown.push([n, state]);
    }
    for (const [state, path] of groups) {
      const look = STATES[state];
      ctx.fillStyle = look.fill;
      ctx.fill(path);
      ctx.strokeStyle = look.stroke;
      ctx.lineWidth = (state === "progress" ? 2.5 : 1.5) / Math.min(1, Math.max(scale, 0.25));
      ctx.setLineDash(state === "progress" ? [6, 3] : []);
      ctx.stroke(path);
    }
    ctx.setLineDash([]);
    if (detailed) {
      ctx.textBaseline = "middle";
      for (const [n, state] of shown) {
        const look = STATES[state];
        drawMarker(ctx, look.marker, n.x + 18, n.y + nh / 2, 6, look.stroke);
        ctx.font = "600 13px system-ui, sans-serif";
        ctx.fillStyle = "#15202b";
        ctx.fillText(clip(n.name, 18), n.x + 34, n.y + 17);
        ctx.font = "12px system-ui, sans-serif";
        ctx.fillStyle = "#4a5663";
        ctx.fillText(clip(`${look.label} · ${shortType(n.type)}`, 24), n.x + 34, n.y + 33);
      }
    }
    if (this.focused && this.nodes.has(this.focused)) {
      const n = this.nodes.get(this.focused);
      ctx.strokeStyle = "#15202b";
      ctx.lineWidth = 3 / Math.min(scale, 1);
      ctx.beginPath();
      ctx.roundRect(n.x - 4, n.y - 4, nw + 8, nh + 8, 11);
      ctx.stroke();
    }
    this.metrics.draws++;
    if (this.metrics.firstDrawAt === null && this.nodes.size) this.metrics.firstDrawAt = performance.now();
    const spent = performance.now() - started;
    this.metrics.drawMs.push(spent);
    if (this.metrics.drawMs.length > 5000) this.metrics.drawMs.splice(0, 2500);
  }

  // -- input ------------------------------------------------------------------

  _bind() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener("pointerdown", (e) => {
      drag = { x: e.clientX, y: e.clientY, vx: this.view.x, vy: this.view.y, moved: false };
      c.setPointerCapture(e.pointerId);
    });
    c.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      this.view = { ...this.view, x: drag.vx + dx, y: drag.vy + dy };
      this.requestDraw();
    });
    c.addEventListener("pointerup", (e) => {
      const wasDrag = drag?.moved;
      drag = null;
      if (wasDrag) return;
      const hit = this._hit(e);
      if (hit) {
        this.focus(hit.name, { reveal: false });
        this.onOpen(hit);
      }
    });
    c.addEventListener(
      "wheel",
      (e) => {
        e.preventDefault();
        const rect = c.getBoundingClientRect();
        this.zoom(Math.exp(-e.deltaY / 500), e.clientX - rect.left, e.clientY - rect.top);
      },
      { passive: false },
    );
    c.addEventListener("keydown", (e) => this._key(e));
    c.addEventListener("focus", () => {
      if (!this.focused && this.rows?.length) this.focus(this.rows[0][0]);
    });
  }

  _key(e) {
    const keys = {
      ArrowLeft: () => this._step(0, -1),
      ArrowRight: () => this._step(0, 1),
      ArrowUp: () => this._step(-1, 0),
      ArrowDown: () => this._step(1, 0),
      Enter: () => this.focused && this.onOpen(this.nodes.get(this.focused)),
      "+": () => this.zoom(1.25),
      "=": () => this.zoom(1.25),
      "-": () => this.zoom(0.8),
      0: () => this.fit(),
    };
    const act = keys[e.key];
    if (act) {
      e.preventDefault();
      act();
    }
  }

  /** Move the focus to the neighbour in the same layer, or to the nearest in the next one. */
  _step(dLayer, dIndex) {
    if (!this.rows?.length) return;
    const current = this.nodes.get(this.focused);
    if (!current) return this.focus(this.rows[0][0]);
    const row = this.rows[current.layer];
    const at = row.indexOf(current.name);
    if (dIndex) {
      const next = row[at + dIndex];
      if (next) this.focus(next);
      return;
    }
    let l = current.layer + dLayer;
    while (l >= 0 && l < this.rows.length && !this.rows[l].length) l += dLayer;
    const target = this.rows[l];
    if (!target) return;
    let best = target[0];
    for (const name of target) {
      const n = this.nodes.get(name);
      if (Math.abs(n.x - current.x) < Math.abs(this.nodes.get(best).x - current.x)) best = name;
    }
    this.focus(best);
  }

  _hit(e) {
    const rect = this.canvas.getBoundingClientRect();
    const wx = (e.clientX - rect.left - this.view.x) / this.view.scale;
    const wy = (e.clientY - rect.top - this.view.y) / this.view.scale;
    const { nodeWidth: nw, nodeHeight: nh } = this.layoutInfo || {};
    for (const n of this.nodes.values()) {
      if (wx >= n.x && wx <= n.x + nw && wy >= n.y && wy <= n.y + nh) return n;
    }
    return null;
  }

  _reveal(n) {
    const { width, height } = this._size();
    const { scale } = this.view;
    const sx = this.view.x + n.x * scale;
    const sy = this.view.y + n.y * scale;
    if (sx < 0 || sy < 0 || sx > width - 40 || sy > height - 40) {
      this.view = { ...this.view, x: width / 2 - n.x * scale, y: height / 2 - n.y * scale };
    }
  }

  /** The canvas's CSS size, as last measured: reading it in draw() would force a page layout. */
  _size() {
    if (!this.size) this.size = { width: this.canvas.clientWidth, height: this.canvas.clientHeight };
    return this.size;
  }

  _resize() {
    const ratio = window.devicePixelRatio || 1;
    this.size = null;
    const { width, height } = this._size();
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    if (!this._sized && width) {
      this._sized = true;
      this.fit();
    }
    this.requestDraw();
  }
}

/** A type's last part: "Server" for Sandbox::Server, "None" for OS::Heat::None. */
function shortType(type) {
  return (type || "").split("::").pop();
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}
