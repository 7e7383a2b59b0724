// One stack, live: the graph (graph.js) fed by the engine's event stream, the
// events, the selected resource (with what its type adds: summary.js), outputs,
// template (edit, preview, apply) and observation, and the stack actions. The graph
// is fetched once per operation; after that only pushed events change it.

import { age, announce, badge, h } from "./dom.js";
import { ApiError } from "./api.js";
import { documentField, ParameterFields } from "./forms.js";
import { drawMarker, GraphView, STATES, visualState } from "./graph.js";
import { summaryOf } from "./summary.js";

const MAX_EVENTS_SHOWN = 300;
const REPLAY = 5000; // events kept to re-apply over a newer snapshot

export class StackPage {
  constructor(api, stack, { show, signOut }) {
    this.api = api;
    this.stack = stack;
    this.show = show;
    this.signOut = signOut;
    this.path = api.stackPath(stack);
    this.abort = new AbortController();
    this.recent = [];
    this.items = new Map(); // resource name -> list item
    this.status = "";
    this.selected = null;
  }

  mount() {
    this.title = h("h1", {}, this.stack.name, " ", h("span", { id: "stack-status" }));
    this.reason = h("p", { id: "stack-reason", class: "reason" });
    this.liveState = h("span", { id: "live-state", class: "muted" }, "connecting");
    const canvas = h("canvas", {
      id: "graph",
      tabindex: 0,
      role: "application",
      "aria-label": "Dependency graph. Arrow keys move between resources, Enter opens one, + and - zoom, 0 fits.",
    });
    this.summary = h("p", { id: "graph-summary", "aria-live": "off" });
    this.graph = new GraphView(canvas, {
      onOpen: (n) => this.openResource(n.name),
      onFocus: (n) => announce(`${n.name}, ${n.type}, ${STATES[visualState(n)].label}`),
    });
    window.convergeDashboard = { graph: this.graph, page: this };
    this.list = h("ul", { id: "resource-list", class: "resources" });
    this.listFilter = h("input", {
      id: "resource-filter",
      type: "search",
      placeholder: "Filter resources",
      oninput: () => this.filterList(),
    });
    this.tabs = new Tabs([
      ["events", "Events", (this.eventsBox = h("ol", { id: "events", class: "events" }))],
      ["resource", "Resource", (this.detail = h("div", { id: "resource-detail" }, h("p", { class: "muted" }, "Select a resource in the graph or the list.")))],
      ["outputs", "Outputs", (this.outputsBox = h("div", { id: "outputs" }))],
      ["template", "Template", this.templatePanel()],
      ["observation", "Observation", (this.observationBox = h("div", { id: "observation" }))],
    ]);
    this.message = h("p", { id: "action-result", role: "status" });
    this.show(
      h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← All stacks")),
      h(
        "div",
        { class: "stack-head" },
        h("div", { class: "stack-title" }, this.title, this.reason),
        h("div", { class: "toolbar", role: "toolbar", "aria-label": "Stack actions" }, this.actionButtons()),
      ),
      this.message,
      h(
        "div",
        { class: "stack-layout" },
        h(
          "section",
          { class: "graph-area", "aria-label": "Graph" },
          h("div", { class: "graph-head" }, legend(), this.liveState),
          canvas,
          this.summary,
          h(
            "details",
            { class: "resource-list", open: true },
            h("summary", {}, "Resources (keyboard list)"),
            h("label", { for: "resource-filter", class: "sr-only" }, "Filter resources"),
            this.listFilter,
            this.list,
          ),
        ),
        h("section", { class: "side", "aria-label": "Details" }, this.tabs.element),
      ),
    );
    this.load().then(() => {
      this.loadHistory();
      this.follow();
    });
  }

  unmount() {
    this.abort.abort();
    clearTimeout(this.reloadTimer);
    if (window.convergeDashboard?.page === this) delete window.convergeDashboard;
  }

  // -- data ---------------------------------------------------------------------

  async load() {
    try {
      const { graph } = await this.api.call("GET", `${this.path}/graph`);
      this.cursor = graph.cursor;
      const started = performance.now();
      this.graph.setGraph(graph.nodes, graph.edges, graph.layout, { keepView: this.loaded });
      this.loaded = true;
      for (const e of this.recent) if (e.seq > graph.cursor) this.applyEvent(e);
      this.buildList(graph.nodes);
      this.setStatus(graph.stack.stack_status, graph.stack.stack_status_reason);
      this.graph.metrics.firstRenderMs ??= performance.now() - started;
      this.refreshSummary();
      this.loadOutputs();
      this.loadObservation();
    } catch (err) {
      this.fail(err);
    }
  }

  /** The latest events before the snapshot, below what the stream will add. */
  async loadHistory() {
    try {
      const { events } = await this.api.call("GET", `${this.path}/events?limit=100&sort_dir=desc`);
      const seen = new Set(this.recent.map((e) => e.id));
      const room = MAX_EVENTS_SHOWN - this.eventsBox.childElementCount;
      for (const e of events.filter((e) => !seen.has(e.id)).slice(0, Math.max(0, room))) {
        const [action, ...status] = e.resource_status.split("_");
        this.eventsBox.append(this.eventItem({ ...e, resource_action: action, resource_status: status.join("_") }));
      }
    } catch (err) {
      this.fail(err);
    }
  }

  async follow() {
    if (this.cursor === undefined) return;
    try {
      await this.api.follow(
        this.stack,
        this.cursor,
        (m) => this.onMessage(m),
        this.abort.signal,
        (s) => (this.liveState.textContent = s),
      );
    } catch (err) {
      this.fail(err);
    }
    if (!this.abort.signal.aborted) this.liveState.textContent = "stream ended";
  }

  onMessage(message) {
    if (message.event === "gone") {
      this.gone = true;
      clearTimeout(this.reloadTimer);
      this.setStatus("DELETE_COMPLETE", "The stack is deleted.");
      this.message.textContent = "This stack is deleted.";
      return;
    }
    const { stack, events } = message.data;
    let unknown = false;
    this.graph.metrics.events += events.length;
    for (const e of events) {
      this.recent.push(e);
      if (!this.applyEvent(e)) unknown = true;
    }
    this.addEvents(events.slice(-MAX_EVENTS_SHOWN));
    if (this.recent.length > REPLAY) this.recent.splice(0, this.recent.length - REPLAY);
    const before = this.status;
    this.setStatus(stack.stack_status, stack.stack_status_reason);
    const operationChanged = before !== stack.stack_status && (before.endsWith("_IN_PROGRESS") || stack.stack_status.endsWith("_IN_PROGRESS"));
    const deleted = stack.stack_status === "DELETE_COMPLETE";
    if ((unknown || operationChanged) && !deleted) this.reloadSoon();
    if (events.some((e) => e.resource_action === "OBSERVE")) this.loadObservation();
    this.refreshSummary();
  }

  /** Apply one event to its node; false if the graph has no such resource (it changed). */
  applyEvent(e) {
    if (e.resource_type === "OS::Heat::Stack" && e.resource_name === this.stack.name) return true;
    const patch = {};
    if (e.resource_action === "OBSERVE") {
      patch.drifted = e.resource_status === "DRIFTED";
    } else if (e.resource_action !== "SIGNAL") {
      patch.action = e.resource_action;
      patch.status = e.resource_status;
      patch.status_reason = e.resource_status_reason;
      if (e.physical_resource_id) patch.physical_resource_id = e.physical_resource_id;
      if (e.resource_status_reason.startsWith("Replacing")) {
        patch.replaced = true;
        patch.drifted = false;
      }
    }
    if (!this.graph.update(e.resource_name, patch)) return false;
    this.updateItem(e.resource_name);
    if (this.selected === e.resource_name) this.openResource(e.resource_name, { quiet: true });
    return true;
  }

  reloadSoon() {
    clearTimeout(this.reloadTimer);
    this.reloadTimer = setTimeout(() => this.gone || this.load(), 250);
  }

  setStatus(status, reason) {
    if (status === this.status && reason === this.reasonText) return;
    const finished = this.status.endsWith("_IN_PROGRESS") && !status.endsWith("_IN_PROGRESS");
    this.status = status;
    this.reasonText = reason;
    const box = document.getElementById("stack-status");
    box?.replaceChildren(badge(status));
    this.reason.textContent = reason || "";
    this.reason.classList.toggle("failed", status.endsWith("_FAILED"));
    this.canvasState();
    if (finished) {
      announce(`Stack ${status.replaceAll("_", " ").toLowerCase()}`);
      if (status !== "DELETE_COMPLETE") this.loadOutputs();
    }
  }

  canvasState() {
    for (const [name, button] of Object.entries(this.buttons || {})) {
      const busy = this.status.endsWith("_IN_PROGRESS");
      if (name === "cancel") button.disabled = !busy;
    }
  }

  refreshSummary() {
    const counts = this.graph.counts();
    const total = this.graph.nodes.size;
    const parts = Object.entries(counts).map(([k, n]) => `${n} ${STATES[k].label}`);
    this.summary.textContent = `${total} resources: ${parts.join(", ") || "none"}`;
    this.summary.dataset.counts = JSON.stringify(counts);
  }

  fail(err) {
    if (err instanceof ApiError && err.status === 401) return this.signOut("Your token is no longer valid.");
    // A read sent before the stream said the stack is gone may answer 404 after it: not news.
    if (this.gone && err instanceof ApiError && err.status === 404) return;
    this.message.textContent = err instanceof ApiError && err.status === 404 ? "No such stack (it may be deleted)." : `Error: ${err.message}`;
  }

  // -- resources list (keyboard access to every node) ---------------------------

  /**
   * One item per node, sorted by name. A reload keeps the items it already has and moves
   * only those out of place: a focused button taken out of the page loses the focus, and
   * the keyboard's next key would go nowhere.
   */
  buildList(nodes) {
    const previous = this.items;
    this.items = new Map();
    for (const n of [...nodes].sort((a, b) => a.name.localeCompare(b.name))) {
      this.items.set(n.name, previous.get(n.name) ?? this.listItem(n.name));
    }
    for (const [name, li] of previous) if (!this.items.has(name)) li.remove();
    let next = this.list.firstElementChild;
    for (const li of this.items.values()) {
      if (li === next) next = next.nextElementSibling;
      else this.list.insertBefore(li, next);
    }
    for (const name of this.items.keys()) this.updateItem(name);
    this.filterList();
  }

  listItem(name) {
    const button = h("button", { type: "button", class: "resource-item", onclick: () => this.openResource(name) });
    return h("li", { dataset: { name } }, button);
  }

  updateItem(name) {
    const li = this.items.get(name);
    const node = this.graph.nodes.get(name);
    if (!li || !node) return;
    const state = visualState(node);
    if (li.dataset.state === state) return;
    li.dataset.state = state;
    li.firstChild.replaceChildren(h("span", { class: `mark ${state}`, "aria-hidden": "true" }), `${name} `, h("span", { class: "muted" }, STATES[state].label));
  }

  filterList() {
    const text = this.listFilter.value.trim().toLowerCase();
    for (const [name, li] of this.items) li.hidden = Boolean(text) && !name.toLowerCase().includes(text) && !li.dataset.state.includes(text);
  }

  // -- panels -------------------------------------------------------------------

  /** Newest first: a batch is added in one DOM change. */
  addEvents(events) {
    if (!events.length) return;
    const fragment = document.createDocumentFragment();
    for (let i = events.length - 1; i >= 0; i--) fragment.append(this.eventItem(events[i]));
    this.eventsBox.prepend(fragment);
    while (this.eventsBox.childElementCount > MAX_EVENTS_SHOWN) this.eventsBox.lastElementChild.remove();
  }

  eventItem(e) {
    return h(
      "li",
      { class: `event ${e.resource_status.toLowerCase()}` },
      h("time", { datetime: e.event_time }, e.event_time?.slice(11, 19) || ""),
      " ",
      h("strong", {}, e.resource_name),
      ` ${e.resource_action} ${e.resource_status}`,
      e.resource_status_reason ? h("span", { class: "muted" }, ` — ${e.resource_status_reason}`) : "",
    );
  }

  async openResource(name, { quiet = false } = {}) {
    this.selected = name;
    if (!quiet) {
      this.tabs.select("resource");
      this.graph.focus(name);
    }
    const resourcePath = `${this.path}/resources/${encodeURIComponent(name)}`;
    try {
      const [{ resource: r }, summary] = await Promise.all([
        this.api.call("GET", resourcePath),
        summaryOf(this.api, resourcePath).catch((err) => [h("p", { class: "muted" }, `Summary unavailable: ${err.message}`)]),
      ]);
      if (this.selected !== name) return;
      this.detail.replaceChildren(
        h("h2", {}, r.resource_name),
        h(
          "dl",
          {},
          h("dt", {}, "Type"),
          h("dd", {}, r.resource_type),
          h("dt", {}, "Status"),
          h("dd", { id: "resource-status" }, badge(r.resource_status)),
          h("dt", {}, "Status reason"),
          h("dd", {}, r.resource_status_reason || "—"),
          h("dt", {}, "Physical id"),
          h("dd", { id: "resource-physical-id" }, r.physical_resource_id || "—"),
          h("dt", {}, "Required by"),
          h("dd", {}, r.required_by.join(", ") || "—"),
        ),
        h("div", { id: "resource-summary" }, summary),
        h("h3", {}, "Properties"),
        h("pre", { id: "resource-properties" }, JSON.stringify(r.properties || {}, null, 2)),
        h("h3", {}, "Attributes"),
        h("pre", { id: "resource-attributes" }, JSON.stringify(r.attributes || {}, null, 2)),
      );
    } catch (err) {
      if (this.selected === name) this.detail.replaceChildren(h("p", { class: "error" }, `Could not load ${name}: ${err.message}`));
    }
  }

  async loadOutputs() {
    try {
      const { stack } = await this.api.call("GET", this.path);
      this.outputsBox.replaceChildren(
        stack.outputs.length
          ? h(
              "dl",
              {},
              stack.outputs.map((o) => [
                h("dt", {}, o.output_key, h("span", { class: "muted" }, ` — ${o.description}`)),
                h("dd", {}, o.output_error ? h("span", { class: "error" }, o.output_error) : h("pre", {}, JSON.stringify(o.output_value, null, 2))),
              ]),
            )
          : h("p", { class: "muted" }, "No outputs."),
      );
    } catch (err) {
      this.outputsBox.replaceChildren(h("p", { class: "muted" }, `Outputs unavailable: ${err.message}`));
    }
  }

  async loadObservation() {
    try {
      const { observation: o } = await this.api.call("GET", `${this.path}/observation`);
      this.observing = o.enabled;
      if (this.buttons) {
        this.buttons.observeStart.textContent = o.enabled ? "Apply" : "Start observation";
        this.buttons.observeStop.hidden = !o.enabled;
        this.observeState.textContent = o.enabled ? "Observed" : "Not observed";
        this.observeState.classList.toggle("on", o.enabled);
        // The controls show what is in force, unless the user is changing them.
        if (o.enabled && !this.observeEdited) {
          this.observeInterval.value = String(o.interval);
          this.observeHeal.checked = o.heal;
        }
      }
      this.observationBox.replaceChildren(
        h("p", { id: "observation-state" }, o.enabled ? `Observing every ${o.interval}s${o.heal ? ", healing drift" : ", reporting drift only"}.` : "Not observed."),
        o.last_cycle_at ? h("p", { class: "muted" }, `Last look ${age(o.last_cycle_at)} ago.`) : "",
        o.drifted.length
          ? h(
              "ul",
              { class: "drift" },
              o.drifted.map((d) =>
                h("li", {}, h("span", { class: "mark drifted", "aria-hidden": "true" }), h("strong", {}, d.resource_name), ` drifted: ${d.reason}`),
              ),
            )
          : h("p", { class: "muted" }, "No drift."),
      );
      for (const name of this.graph.nodes.keys()) {
        const drifted = o.drifted.some((d) => d.resource_name === name);
        if (this.graph.nodes.get(name).drifted !== drifted) {
          this.graph.update(name, { drifted });
          this.updateItem(name);
        }
      }
    } catch (err) {
      this.observationBox.replaceChildren(h("p", { class: "muted" }, `Observation unavailable: ${err.message}`));
    }
  }

  templatePanel() {
    const template = documentField("template-text", "Template", { rows: 16, hint: "As you sent it; edit it, or open a new file." });
    const environment = documentField("update-environment", "Environment", {
      rows: 4,
      placeholder: "Leave empty to keep the current environment",
      hint: "Sections given here replace the current ones (parameters, parameter_defaults, resource_registry).",
    });
    this.templateText = template.text;
    this.environmentText = environment.text;
    this.parameters = new ParameterFields(this.api, { template: template.text, environment: environment.text, idPrefix: "update", current: {} });
    this.preview = h("div", { id: "preview", "aria-live": "polite" });
    this.applyButton = h("button", { type: "button", id: "apply-update", class: "primary", disabled: true, onclick: () => this.applyUpdate() }, "Apply update");
    const load = h("button", { type: "button", id: "reload-template", onclick: () => this.loadTemplate() }, "Reset to current");
    const preview = h("button", { type: "button", id: "preview-update", onclick: () => this.previewUpdate() }, "Preview changes");
    const stale = () => (this.applyButton.disabled = true);
    this.templateEdits = 0; // counts the user's edits, so a load answered after one does not undo it
    this.templateText.addEventListener("input", () => (this.templateEdits += 1));
    this.templateText.addEventListener("input", stale);
    this.environmentText.addEventListener("input", stale);
    this.parameters.box.addEventListener("input", stale);
    this.parameters.box.addEventListener("change", stale);
    this.templateNote = h("p", { id: "template-note", class: "hint" });
    queueMicrotask(() => this.loadTemplate());
    return h(
      "form",
      { class: "update-form", onsubmit: (e) => e.preventDefault() },
      this.templateNote,
      template.element,
      h("details", { class: "environment" }, h("summary", {}, "Environment"), environment.element),
      this.parameters.element,
      h("div", { class: "actions" }, preview, this.applyButton, load),
      this.preview,
    );
  }

  async loadTemplate() {
    const edits = this.templateEdits;
    try {
      const [{ source, as_sent: asSent }, { stack }] = await Promise.all([
        this.api.call("GET", `${this.path}/template/source`),
        this.api.call("GET", this.path),
      ]);
      if (this.templateEdits !== edits) return; // the user typed meanwhile: what they typed stays
      this.templateText.value = source;
      this.environmentText.value = "";
      this.templateNote.textContent = asSent ? "" : "This template was sent as JSON (by an API client), so it is shown as JSON.";
      this.parameters.setCurrent(stack.parameters || {});
      this.applyButton.disabled = true;
      this.preview.replaceChildren();
    } catch (err) {
      this.templateText.value = "";
      this.preview.textContent = `Template unavailable: ${err.message}`;
    }
  }

  updateBody() {
    const body = { template: this.templateText.value, parameters: this.parameters.values() };
    if (this.environmentText.value.trim()) body.environment = this.environmentText.value;
    return body;
  }

  async previewUpdate() {
    this.preview.textContent = "Previewing…";
    try {
      const { resource_changes: changes } = await this.api.call("PUT", `${this.path}/preview`, { ...this.updateBody(), existing: true });
      const order = ["added", "replaced", "updated", "deleted", "unchanged"];
      this.preview.replaceChildren(
        h("h3", {}, "Changes"),
        h(
          "dl",
          { id: "preview-changes", class: "changes" },
          order
            .filter((k) => changes[k]?.length)
            .map((k) => [h("dt", { dataset: { change: k } }, `${k} (${changes[k].length})`), h("dd", {}, changes[k].map((c) => c.resource_name).join(", "))]),
        ),
      );
      this.applyButton.disabled = false;
    } catch (err) {
      this.preview.replaceChildren(h("p", { class: "error", role: "alert" }, `Preview failed: ${err.message}`));
    }
  }

  async applyUpdate() {
    this.applyButton.disabled = true;
    await this.act("Update", () => this.api.call("PATCH", this.path, this.updateBody()));
  }

  // -- actions ------------------------------------------------------------------

  actionButtons() {
    const interval = (this.observeInterval = h("input", { id: "observe-interval", type: "number", min: 1, max: 86400, value: 10, class: "narrow" }));
    const heal = (this.observeHeal = h("input", { id: "observe-heal", type: "checkbox" }));
    const edited = () => (this.observeEdited = true);
    interval.addEventListener("input", edited);
    heal.addEventListener("change", edited);
    this.observeState = h("span", { id: "observe-state", class: "observe-state" }, "Not observed");
    const start = () =>
      this.act("Observation", () => this.action({ observe_start: { interval: Number(interval.value), heal: heal.checked } })).then(() => {
        this.observeEdited = false;
        return this.loadObservation();
      });
    this.buttons = {
      cancel: h("button", { type: "button", id: "cancel-update", onclick: () => this.act("Cancel", () => this.action({ cancel_update: null })) }, "Cancel update"),
      remove: h("button", { type: "button", id: "delete-stack", class: "danger", onclick: () => this.remove() }, "Delete"),
      observeStart: h("button", { type: "button", id: "observe-start", onclick: start }, "Start observation"),
      observeStop: h("button", { type: "button", id: "observe-stop", hidden: true, onclick: () => this.act("Observation stop", () => this.action({ observe_stop: null })).then(() => this.loadObservation()) }, "Stop"),
    };
    return [
      h("button", { type: "button", class: "primary", onclick: () => (this.tabs.select("template"), this.templateText.focus()) }, "Update…"),
      this.buttons.cancel,
      this.buttons.remove,
      h(
        "span",
        { class: "group observe", role: "group", "aria-label": "Observation" },
        this.observeState,
        h("label", { for: "observe-interval" }, "every"),
        interval,
        h("span", { class: "unit" }, "s"),
        h("label", { class: "check" }, heal, " heal"),
        this.buttons.observeStart,
        this.buttons.observeStop,
      ),
    ];
  }

  action(body) {
    return this.api.call("POST", `${this.path}/actions`, body);
  }

  async remove() {
    if (!window.confirm(`Delete stack ${this.stack.name} and all its resources?`)) return;
    await this.act("Delete", () => this.api.call("DELETE", this.path));
  }

  async act(what, call) {
    this.message.className = "";
    this.message.textContent = `${what}: sending…`;
    try {
      await call();
      this.message.textContent = `${what}: accepted.`;
    } catch (err) {
      this.message.className = "error";
      this.message.textContent = `${what} failed: ${err.message}`;
    }
  }
}

class Tabs {
  constructor(panels) {
    this.tabs = new Map();
    const list = h("div", { role: "tablist", class: "tabs", "aria-label": "Stack details" });
    const bodies = [];
    for (const [key, label, content] of panels) {
      const tab = h("button", { type: "button", role: "tab", id: `tab-${key}`, "aria-controls": `panel-${key}`, onclick: () => this.select(key) }, label);
      tab.addEventListener("keydown", (e) => this.key(e, key));
      const panel = h("div", { role: "tabpanel", id: `panel-${key}`, "aria-labelledby": `tab-${key}`, tabindex: 0 }, content);
      this.tabs.set(key, { tab, panel });
      list.append(tab);
      bodies.push(panel);
    }
    this.element = h("div", {}, list, ...bodies);
    this.select(panels[0][0]);
  }

  select(key) {
    for (const [k, { tab, panel }] of this.tabs) {
      tab.setAttribute("aria-selected", String(k === key));
      tab.tabIndex = k === key ? 0 : -1;
      panel.hidden = k !== key;
    }
  }

  key(e, key) {
    const keys = [...this.tabs.keys()];
    const at = keys.indexOf(key);
    const next = e.key === "ArrowRight" ? keys[(at + 1) % keys.length] : e.key === "ArrowLeft" ? keys[(at - 1 + keys.length) % keys.length] : null;
    if (next) {
      e.preventDefault();
      this.select(next);
      this.tabs.get(next).tab.focus();
    }
  }
}

function legend() {
  return h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    Object.entries(STATES).map(([key, look]) => {
      const c = h("canvas", { width: 16, height: 16, "aria-hidden": "true" });
      const ctx = c.getContext("2d");
      ctx.fillStyle = look.fill;
      ctx.fillRect(0, 0, 16, 16);
      drawMarker(ctx, look.marker, 8, 8, 5, look.stroke);
      return h("li", { dataset: { state: key } }, c, look.label);
    }),
  );
}
