// Small DOM helpers. Every element is built with h() from text, never from HTML
// strings, so nothing the API returns can inject markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function announce(text) {
  document.getElementById("announce").textContent = text;
}

export function age(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}

/** A status badge: its words are always shown, the colour and shape only add to them. */
export function badge(status) {
  const kind = status.endsWith("_FAILED")
    ? "failed"
    : status.endsWith("_IN_PROGRESS")
      ? "progress"
      : status.startsWith("INIT")
        ? "pending"
        : "complete";
  return h("span", { class: `badge ${kind}` }, status.replaceAll("_", " "));
}
