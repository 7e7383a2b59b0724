// Layered layout of a dependency graph, computed once per graph (pure: no DOM).
//
// Layers by longest path: a resource with no requirements sits in layer 0, any
// other one layer below the deepest thing it requires, so every edge points
// down. Within each layer, resources are ordered by the barycentre (mean
// position) of their neighbours, sweeping down then up a few times, which
// removes most edge crossings. A layer wider than `maxPerRow` wraps onto
// several rows, so a stack of 2,000 independent resources is a block, not a line.

/** Layer of each node: longest path from a node with no requirements. */
export function layers(names, edges) {
  const preds = new Map(names.map((n) => [n, []]));
  const succs = new Map(names.map((n) => [n, []]));
  for (const { from, to } of edges) {
    if (preds.has(to) && succs.has(from)) {
      preds.get(to).push(from);
      succs.get(from).push(to);
    }
  }
  const waiting = new Map(names.map((n) => [n, preds.get(n).length]));
  const layer = new Map();
  const ready = names.filter((n) => waiting.get(n) === 0);
  for (const n of ready) layer.set(n, 0);
  for (let i = 0; i < ready.length; i++) {
    const n = ready[i];
    for (const s of succs.get(n)) {
      layer.set(s, Math.max(layer.get(s) ?? 0, layer.get(n) + 1));
      waiting.set(s, waiting.get(s) - 1);
      if (waiting.get(s) === 0) ready.push(s);
    }
  }
  // A cycle cannot come from a valid template; if one did, put its nodes last rather than lose them.
  const deepest = Math.max(0, ...layer.values());
  for (const n of names) if (!layer.has(n)) layer.set(n, deepest + 1);
  return { layer, preds, succs };
}

function meanIndex(neighbours, index) {
  let sum = 0;
  let count = 0;
  for (const m of neighbours) {
    const at = index.get(m);
    if (at !== undefined) {
      sum += at;
      count++;
    }
  }
  return count ? sum / count : null;
}

/** Reorder each layer by the barycentre of its neighbours in the layers already placed. */
function sweep(rows, neighboursOf, order) {
  const index = new Map();
  const place = (row) => row.forEach((n, i) => index.set(n, row.length > 1 ? i / (row.length - 1) : 0.5));
  const sequence = order === "down" ? rows.map((_, i) => i) : rows.map((_, i) => rows.length - 1 - i);
  place(rows[sequence[0]]);
  for (const i of sequence.slice(1)) {
    const row = rows[i];
    const keyed = row.map((n, at) => {
      const mean = meanIndex(neighboursOf.get(n), index);
      return { n, key: mean ?? (row.length > 1 ? at / (row.length - 1) : 0.5), at };
    });
    keyed.sort((a, b) => a.key - b.key || a.at - b.at);
    rows[i] = keyed.map((k) => k.n);
    place(rows[i]);
  }
}

/** Edge crossings between consecutive layers (edges spanning several layers are not counted). */
export function crossings(rows, edges) {
  const where = new Map();
  rows.forEach((row, l) => row.forEach((n, i) => where.set(n, [l, i])));
  const between = new Map();
  for (const { from, to } of edges) {
    const a = where.get(from);
    const b = where.get(to);
    if (!a || !b || b[0] !== a[0] + 1) continue;
    if (!between.has(a[0])) between.set(a[0], []);
    between.get(a[0]).push([a[1], b[1]]);
  }
  let count = 0;
  for (const pairs of between.values()) {
    for (let i = 0; i < pairs.length; i++) {
      for (let j = i + 1; j < pairs.length; j++) {
        const [a1, b1] = pairs[i];
        const [a2, b2] = pairs[j];
        if ((a1 - a2) * (b1 - b2) < 0) count++;
      }
    }
  }
  return count;
}

/**
 * Positions for `names` (in a stable initial order) and `edges` ({from, to}: `to` requires `from`).
 * Returns {rows: names per layer, layerOf, position: Map name -> {x, y, layer}, width, height}.
 */
export function layout(names, edges, options = {}) {
  const { nodeWidth = 150, nodeHeight = 36, gapX = 24, gapY = 56, maxPerRow = 40, sweeps = 4 } = options;
  const { layer, preds, succs } = layers(names, edges);
  const depth = Math.max(-1, ...layer.values()) + 1;
  const rows = Array.from({ length: depth }, () => []);
  for (const n of names) rows[layer.get(n)].push(n);
  for (let s = 0; s < sweeps && rows.length > 1; s++) {
    sweep(rows, preds, "down");
    sweep(rows, succs, "up");
  }
  const position = new Map();
  let y = 0;
  let width = 0;
  rows.forEach((row, l) => {
    for (let start = 0; start < row.length; start += maxPerRow) {
      const line = row.slice(start, start + maxPerRow);
      const span = line.length * nodeWidth + (line.length - 1) * gapX;
      width = Math.max(width, span);
      line.forEach((n, i) => {
        position.set(n, { x: -span / 2 + i * (nodeWidth + gapX), y, layer: l });
      });
      y += nodeHeight + (start + maxPerRow < row.length ? gapX : gapY);
    }
  });
  return { rows, layerOf: layer, position, width, height: Math.max(0, y - gapY), nodeWidth, nodeHeight };
}
