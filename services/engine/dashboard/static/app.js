// The dashboard: sign-in, the project's stacks, and one stack converging live.
// Routes live in the URL hash (#/ and #/stacks/<name>/<id>); the token and project
// are kept in sessionStorage only.

import { Api, ApiError } from "./api.js";
import { age, badge, h } from "./dom.js";
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
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h("p", { class: "muted" }, "Use an API token (converge up prints one). It is kept in this tab only."),
    h("label", { for: "token" }, "Token"),
    token,
    h("label", { for: "project" }, "Project"),
    project,
    h("button", { type: "submit" }, "Sign in"),
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
    );
    this.body = h("tbody");
    this.error = h("p", { class: "error", role: "alert" });
    show(
      h("h1", {}, "Stacks"),
      h(
        "div",
        { class: "toolbar" },
        h("label", { for: "search" }, "Search"),
        this.search,
        h("label", { for: "status-filter" }, "Status"),
        this.filter,
      ),
      h(
        "table",
        { class: "stacks" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Name", "Status", "Last operation", "Age", "Resources"].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        this.body,
      ),
      this.error,
      this.createForm(),
    );
    this.refresh();
    this.timer = setInterval(() => this.refresh(), 3000);
  }

  unmount() {
    clearInterval(this.timer);
  }

  createForm() {
    const name = h("input", { id: "new-name", required: true, pattern: "[A-Za-z][A-Za-z0-9_.\\-]*" });
    const template = h("textarea", { id: "new-template", rows: 12, required: true, spellcheck: "false" });
    const file = h("input", { id: "new-file", type: "file", accept: ".yaml,.yml,.json,.template" });
    const result = h("p", { role: "status" });
    file.addEventListener("change", async () => {
      if (file.files[0]) template.value = await file.files[0].text();
    });
    const form = h(
      "form",
      { class: "card", "aria-labelledby": "create-title" },
      h("h2", { id: "create-title" }, "Create a stack"),
      h("label", { for: "new-name" }, "Name"),
      name,
      h("label", { for: "new-file" }, "Template file"),
      file,
      h("label", { for: "new-template" }, "Template (HOT, YAML or JSON)"),
      template,
      h("button", { type: "submit" }, "Create"),
      result,
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      result.textContent = "Creating…";
      try {
        const created = await this.api.call("POST", "/stacks", {
          stack_name: name.value.trim(),
          template: template.value,
        });
        location.hash = `#/stacks/${encodeURIComponent(name.value.trim())}/${created.stack.id}`;
      } catch (err) {
        result.textContent = `Not created: ${err.message}`;
      }
    });
    return form;
  }

  async refresh() {
    try {
      const data = await this.api.call("GET", "/stacks?with_resource_counts=true&sort_keys=creation_time");
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
        const counts = s.resource_counts || {};
        const link = h("a", { href: `#/stacks/${encodeURIComponent(s.stack_name)}/${s.id}` }, s.stack_name);
        return h(
          "tr",
          { dataset: { stack: s.stack_name } },
          h("th", { scope: "row" }, link),
          h("td", {}, badge(s.stack_status)),
          h("td", {}, s.stack_status.split("_")[0].toLowerCase()),
          h("td", { title: s.creation_time }, age(s.updated_time || s.creation_time)),
          h(
            "td",
            { class: "counts" },
            Object.entries(counts).map(([k, n]) => h("span", { class: "count" }, `${n} ${k.replace("_", " ").toLowerCase()}`)),
          ),
        );
      });
    this.body.replaceChildren(...rows);
    if (!rows.length) {
      this.body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No stacks match.")));
    }
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
  page = match
    ? new StackPage(api, { name: decodeURIComponent(match[1]), id: match[2] }, { show, signOut })
    : new StackList(api);
  page.mount();
  document.getElementById("main").focus({ preventScroll: true });
}

document.getElementById("sign-out").addEventListener("click", () => signOut());
window.addEventListener("hashchange", () => route());
route();
