// What the create and update forms share: a template and an environment (typed, or read
// from a file) and the template's parameters as fields. The fields come from the engine:
// POST /v1/{project}/validate describes each parameter (type, default, constraints,
// hidden), so the form follows whatever the template declares; hidden ones are password
// fields. The engine checks every value again when the stack is created or updated.

import { h } from "./dom.js";

const DESCRIBE_AFTER_MS = 400; // typing pause before the template is described again

/** A labelled text area with a file picker that fills it. */
export function documentField(id, label, { rows = 12, required = false, hint = "", placeholder = "" } = {}) {
  const text = h("textarea", { id, rows, required, spellcheck: "false", class: "code", placeholder });
  const file = h("input", { id: `${id}-file`, type: "file", accept: ".yaml,.yml,.json,.template,.env", class: "file" });
  file.addEventListener("change", async () => {
    if (!file.files[0]) return;
    text.value = await file.files[0].text();
    text.dispatchEvent(new Event("input"));
  });
  const element = h(
    "div",
    { class: "field" },
    h("div", { class: "field-head" }, h("label", { for: id }, label), h("label", { class: "file-button" }, "Open file…", file)),
    hint ? h("p", { class: "hint" }, hint) : "",
    text,
  );
  return { element, text, file };
}

/**
 * The parameters of the template in `template` (and `environment`) as form fields. `current`
 * holds the values a stack has now (update form): hidden ones are left blank, meaning keep.
 */
export class ParameterFields {
  constructor(api, { template, environment, idPrefix, current = null }) {
    this.api = api;
    this.template = template;
    this.environment = environment;
    this.prefix = idPrefix;
    this.current = current;
    this.fields = new Map(); // name -> {input, schema, initial}
    this.box = h("div", { class: "parameters", id: `${idPrefix}-parameters` });
    this.status = h("p", { class: "hint", id: `${idPrefix}-parameters-status`, role: "status" });
    this.element = h("fieldset", { class: "parameter-set" }, h("legend", {}, "Parameters"), this.status, this.box);
    const later = () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.describe(), DESCRIBE_AFTER_MS);
    };
    template.addEventListener("input", later);
    environment.addEventListener("input", later);
    this.describe();
  }

  setCurrent(current) {
    this.current = current;
    this.describe();
  }

  /** Ask the engine what the template's parameters are, and rebuild the fields (keeping what was typed). */
  async describe() {
    const template = this.template.value.trim();
    if (!template) {
      this.box.replaceChildren();
      this.fields = new Map();
      this.status.textContent = "The template's parameters appear here.";
      return;
    }
    const seq = (this.seq = (this.seq || 0) + 1);
    const body = { template };
    if (this.environment.value.trim()) body.environment = this.environment.value;
    let described;
    try {
      described = await this.api.call("POST", "/validate", body);
    } catch (err) {
      if (seq !== this.seq) return;
      this.status.textContent = `The template is not valid yet: ${err.message}`;
      this.status.className = "hint error";
      return;
    }
    if (seq !== this.seq) return;
    this.status.className = "hint";
    const typed = new Map([...this.fields].map(([name, f]) => [name, f.input.value]));
    const params = described.Parameters || {};
    const names = orderedNames(params, described.ParameterGroups);
    this.fields = new Map();
    this.status.textContent = names.length ? "" : "This template has no parameters.";
    this.box.replaceChildren(...names.map((name) => this.field(name, params[name], typed.get(name))));
    this.element.hidden = false;
  }

  field(name, schema, typed) {
    const id = `${this.prefix}-param-${name}`;
    const hidden = schema.NoEcho === "true";
    const now = this.current?.[name];
    const initial = hidden || now === undefined ? "" : String(now);
    const attrs = { id, name, dataset: { parameter: name, type: schema.Type } };
    let input;
    if (schema.AllowedValues) {
      const choices = schema.AllowedValues.map(String);
      input = h("select", attrs, h("option", { value: "" }, hasDefault(schema) ? `Default (${schema.Default})` : "Choose…"), choices.map((v) => h("option", { value: v }, v)));
    } else if (schema.Type === "Boolean") {
      input = h("select", attrs, h("option", { value: "" }, hasDefault(schema) ? `Default (${schema.Default})` : "Choose…"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    } else if (schema.Type === "Json") {
      input = h("textarea", { ...attrs, rows: 3, class: "code", spellcheck: "false" });
    } else {
      const type = hidden ? "password" : schema.Type === "Number" ? "number" : "text";
      input = h("input", {
        ...attrs,
        type,
        autocomplete: hidden ? "new-password" : "off",
        min: schema.MinValue,
        max: schema.MaxValue,
        step: schema.Type === "Number" ? "any" : undefined,
        minlength: schema.MinLength,
        maxlength: schema.MaxLength,
      });
    }
    const placeholder = hidden && this.current ? "unchanged" : hasDefault(schema) && !hidden ? `default: ${show(schema.Default)}` : "";
    if (placeholder && "placeholder" in input) input.placeholder = placeholder;
    input.value = typed ?? initial;
    if (!hasDefault(schema) && !(hidden && this.current)) input.required = true;
    this.fields.set(name, { input, schema, initial });
    const notes = [schema.Description, schema.ConstraintDescription, rangeText(schema), schema.Type === "CommaDelimitedList" ? "Comma-separated." : ""].filter(Boolean);
    return h(
      "div",
      { class: "field parameter" },
      h("label", { for: id }, schema.Label || name, h("span", { class: "type" }, ` ${schema.Type.toLowerCase()}${hidden ? ", hidden" : ""}`), input.required ? h("span", { class: "required" }, " required") : ""),
      input,
      notes.length ? h("p", { class: "hint" }, notes.join(" ")) : "",
    );
  }

  /** Values to send: what was filled in (create), or what changed (update). */
  values() {
    const out = {};
    for (const [name, { input, initial }] of this.fields) {
      const value = input.value;
      if (value === "" || value === initial) continue;
      out[name] = value;
    }
    return out;
  }
}

function orderedNames(params, groups) {
  const names = [];
  for (const g of groups || []) for (const n of g.parameters || []) if (n in params && !names.includes(n)) names.push(n);
  for (const n of Object.keys(params)) if (!names.includes(n)) names.push(n);
  return names;
}

function hasDefault(schema) {
  return schema.Default !== undefined && schema.Default !== null;
}

function show(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function rangeText(s) {
  const parts = [];
  if (s.MinValue !== undefined || s.MaxValue !== undefined) parts.push(`From ${s.MinValue ?? "any"} to ${s.MaxValue ?? "any"}.`);
  if (s.MinLength !== undefined || s.MaxLength !== undefined) parts.push(`${s.MinLength ?? 0} to ${s.MaxLength ?? "any"} characters.`);
  return parts.join(" ");
}
