// The dashboard: sign-in, the project's stacks, and one stack converging live.
// Routes live in the URL hash (#/, #/stacks/<name> and #/stacks/<name>/<id>); the token
// and project are kept in sessionStorage only.

import { Api, ApiError } from "./api.js";
import { age, badge, h } from "./dom.js";
import { documentField, ParameterFields } from "./forms.js";
import { StackPage } from "./stack.js";

const SESSION = { token: "converge.token", project: "converge.project" };
let page = null;

function session() {
  const token = sessionStorage.getItem(SESSION.token);
  const project = sessionStorage.getItem(SESSION.project);
  return token && project ? new Api(token, project) : null;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function signIn(message) {
  const token = h("input", { id: "token", type: "password", autocomplete: "off", required: true });
  const project = h("input", { id: "project", value: "demo", required: true });
  const error = h("p", { class: "error", role: "alert" }, message || "");
  const form = h(
    "form",
    { class: "card sign-in", "aria-labelledby": "sign-in-title" },
    h("div", { class: "sign-in-mark", "aria-hidden": "true" }, h("img", { src: "/dashboard/favicon.svg", alt: "", width: 40, height: 40 })),
    h("h1", { id: "sign-in-title" }, "Sign in to Converge"),
    h("p", { class: "muted" }, "Use an API token (converge up prints one). It is kept in this tab only."),
    h("label", { for: "token" }, "Token"),
    token,
    h("label", { for: "project" }, "Project"),
    project,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    error,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const api = new Api(token.value.trim(), project.value.trim());
    try {
      await api.call("GET", "/stacks?limit=1");
    } catch (err) {
      error.textContent =
        err instanceof ApiError && err.status === 401
          ? "That token is not valid."
          : err instanceof ApiError && err.status === 404
            ? "That token is not for this project."
            : `Could not sign in: ${err.message}`;
      return;
    }
    sessionStorage.setItem(SESSION.token, api.token);
    sessionStorage.setItem(SESSION.project, api.project);
    location.hash = "#/";
    route();
  });
  show(form);
  token.focus();
}

const FILTERS = {
  all: () => true,
  progress: (s) => s.stack_status.endsWith("_IN_PROGRESS"),
  failed: (s) => s.stack_status.endsWith("_FAILED"),
  complete: (s) => s.stack_status.endsWith("_COMPLETE"),
  drifted: (s) => (s.observation?.drifted || 0) > 0,
  observed: (s) => Boolean(s.observation?.enabled),
};

class StackList {
  constructor(api) {
    this.api = api;
    this.stacks = [];
    this.timer = null;
  }

  mount() {
    this.search = h("input", {
      id: "search",
      type: "search",
      placeholder: "Name or status",
      oninput: () => this.render(),
    });
    this.filter = h(
      "select",
      { id: "status-filter", onchange: () => this.render() },
      h("option", { value: "all" }, "All"),
      h("option", { value: "progress" }, "In progress"),
      h("option", { value: "failed" }, "Failed"),
      h("option", { value: "complete" }, "Complete"),
      h("option", { value: "drifted" }, "Drifted"),
      h("option", { value: "observed" }, "Observed"),
    );
    this.body = h("tbody");
    this.summary = h("p", { id: "stack-summary", class: "muted" });
    this.error = h("p", { class: "error", role: "alert" });
    show(
      h(
        "div",
        { class: "list-layout" },
        h(
          "section",
          { class: "panel", "aria-labelledby": "stacks-title" },
          h("div", { class: "page-head" }, h("h1", { id: "stacks-title" }, "Stacks"), this.summary),
          h(
            "div",
            { class: "toolbar" },
            h("label", { for: "search", class: "sr-only" }, "Search"),
            this.search,
            h("label", { for: "status-filter", class: "sr-only" }, "Status"),
            this.filter,
          ),
          h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "stacks" },
              h("thead", {}, h("tr", {}, ["Name", "Status", "Resources", "Observation", "Drift", "Updated"].map((t) => h("th", { scope: "col" }, t)))),
              this.body,
            ),
          ),
          this.error,
        ),
        this.createForm(),
      ),
    );
    this.refresh();
    this.timer = setInterval(() => this.refresh(), 3000);
  }

  unmount() {
    clearInterval(this.timer);
  }

  createForm() {
    const name = h("input", { id: "new-name", required: true, autocomplete: "off", pattern: "[A-Za-z][A-Za-z0-9_.\\-]*", placeholder: "e.g. web" });
    const template = documentField("new-template", "Template", { rows: 10, required: true, hint: "HOT, YAML or JSON." });
    const environment = documentField("new-environment", "Environment", {
      rows: 4,
      hint: "Optional: parameters, parameter_defaults, resource_registry (YAML or JSON).",
    });
    const parameters = new ParameterFields(this.api, { template: template.text, environment: environment.text, idPrefix: "new" });
    const rollback = h("input", { id: "new-rollback", type: "checkbox" });
    const result = h("p", { id: "create-result", role: "status" });
    const form = h(
      "form",
      { class: "panel create", "aria-labelledby": "create-title" },
      h("h2", { id: "create-title" }, "Create a stack"),
      h("div", { class: "field" }, h("label", { for: "new-name" }, "Name"), name),
      template.element,
      h("details", { class: "environment", open: false }, h("summary", {}, "Environment"), environment.element),
      parameters.element,
      h("label", { class: "check" }, rollback, " Roll back if it fails"),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create stack")),
      result,
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      result.className = "";
      result.textContent = "Creating…";
      const body = { stack_name: name.value.trim(), template: template.text.value, parameters: parameters.values(), disable_rollback: !rollback.checked };
      if (environment.text.value.trim()) body.environment = environment.text.value;
      try {
        const created = await this.api.call("POST", "/stacks", body);
        location.hash = `#/stacks/${encodeURIComponent(body.stack_name)}/${created.stack.id}`;
      } catch (err) {
        result.className = "error";
        result.setAttribute("role", "alert");
        result.textContent = `Not created: ${err.message}`;
      }
    });
    return form;
  }

  async refresh() {
    try {
      const data = await this.api.call("GET", "/stacks?with_resource_counts=true&with_observation=true&sort_keys=creation_time");
      this.stacks = data.stacks;
      this.error.textContent = "";
      this.render();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return signOut("Your token is no longer valid.");
      this.error.textContent = `Could not list stacks: ${err.message}`;
    }
  }

  render() {
    const text = this.search.value.trim().toLowerCase();
    const keep = FILTERS[this.filter.value];
    const rows = this.stacks
      .filter(keep)
      .filter((s) => !text || s.stack_name.toLowerCase().includes(text) || s.stack_status.toLowerCase().includes(text))
      .map((s) => {
        const link = h("a", { href: `#/stacks/${encodeURIComponent(s.stack_name)}/${s.id}` }, s.stack_name);
        const o = s.observation || {};
        const drifted = o.drifted || 0;
        return h(
          "tr",
          { dataset: { stack: s.stack_name } },
          h("th", { scope: "row" }, link),
          h("td", {}, badge(s.stack_status)),
          h("td", {}, h("div", { class: "counts" }, resourceCounts(s.resource_counts || {}))),
          h("td", { class: "observation" }, o.enabled ? [h("span", { class: "dot on", "aria-hidden": "true" }), `every ${seconds(o.interval)}`, o.heal ? h("span", { class: "tag" }, "heal") : ""] : h("span", { class: "muted" }, "off")),
          h("td", { class: "drift" }, drifted ? h("span", { class: "badge drifted" }, `${drifted} drifted`) : h("span", { class: "muted" }, o.enabled ? "none" : "—")),
          h("td", { title: s.updated_time || s.creation_time }, `${age(s.updated_time || s.creation_time)} ago`),
        );
      });
    this.body.replaceChildren(...rows);
    if (!rows.length) {
      this.body.append(h("tr", {}, h("td", { colspan: 6, class: "muted empty" }, this.stacks.length ? "No stacks match." : "No stacks yet: create one with the form.")));
    }
    const failed = this.stacks.filter(FILTERS.failed).length;
    const drifted = this.stacks.filter(FILTERS.drifted).length;
    this.summary.textContent = [`${this.stacks.length} stack${this.stacks.length === 1 ? "" : "s"}`, failed ? `${failed} failed` : "", drifted ? `${drifted} drifted` : ""].filter(Boolean).join(" · ");
  }
}

function resourceCounts(counts) {
  const order = [["COMPLETE", "complete"], ["IN_PROGRESS", "in progress"], ["FAILED", "failed"], ["INIT", "not started"]];
  const parts = order.filter(([k]) => counts[k]).map(([k, label]) => h("span", { class: `count ${k.toLowerCase()}` }, `${counts[k]} ${label}`));
  return parts.length ? parts : h("span", { class: "muted" }, "none");
}

export function seconds(value) {
  return `${Number(value) % 1 ? Number(value).toFixed(1) : Number(value)} s`;
}

/** #/stacks/<name>: find the stack by name (the API answers with its id), then open it. */
async function openByName(api, name) {
  show(h("p", { class: "muted" }, `Opening ${name}…`));
  try {
    const { stack } = await api.call("GET", `/stacks/${encodeURIComponent(name)}`);
    history.replaceState(null, "", `#/stacks/${encodeURIComponent(stack.stack_name)}/${stack.id}`);
    route();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return signOut("Your token is no longer valid.");
    show(
      h("div", { class: "panel notice" }, h("h1", {}, "No such stack"), h("p", { role: "alert", class: "error" }, err instanceof ApiError && err.status === 404 ? `There is no stack named ${name} in project ${api.project}.` : `Could not open ${name}: ${err.message}`), h("p", {}, h("a", { href: "#/" }, "← All stacks"))),
    );
  }
}

function signOut(message) {
  sessionStorage.removeItem(SESSION.token);
  sessionStorage.removeItem(SESSION.project);
  location.hash = "#/";
  route(message);
}

function route(message) {
  page?.unmount();
  page = null;
  const api = session();
  const out = document.getElementById("sign-out");
  out.hidden = !api;
  document.getElementById("whoami").textContent = api ? `project ${api.project}` : "";
  if (!api) return signIn(message);
  const match = location.hash.match(/^#\/stacks\/([^/]+)\/([^/]+)$/);
  const byName = location.hash.match(/^#\/stacks\/([^/]+)\/?$/);
  if (byName) return openByName(api, decodeURIComponent(byName[1]));
  page = match
    ? new StackPage(api, { name: decodeURIComponent(match[1]), id: match[2] }, { show, signOut })
    : new StackList(api);
  page.mount();
  document.getElementById("main").focus({ preventScroll: true });
}

document.getElementById("sign-out").addEventListener("click", () => signOut());
window.addEventListener("hashchange", () => route());
route();
