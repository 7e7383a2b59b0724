// What a resource's type adds to its view in the Resource tab (stack.js opens a resource,
// this draws the rest): a software deployment's status, reason and outputs (each member's,
// for a deployment group), a group's sizes. Read from GET .../resources/<name>/summary
// (services/engine/api/summaries.py) each time the resource is shown.

import { badge, h } from "./dom.js";

const STANDARD = ["deploy_status_code", "deploy_stdout", "deploy_stderr"];

/** The summary's elements (nothing for a type that adds nothing). */
export async function summaryOf(api, resourcePath) {
  const { summary } = await api.call("GET", `${resourcePath}/summary`);
  if (summary.kind === "deployment") return [h("h3", {}, "Deployment"), deployment(summary.deployment)];
  if (summary.kind === "deployment_group") {
    const members = summary.deployments || [];
    return [
      h("h3", {}, `Deployments (${members.length + summary.more_members})`),
      h("div", { id: "deployment-members" }, members.map((d) => member(d, members.length <= 3))),
      summary.more_members ? h("p", { class: "muted" }, `and ${summary.more_members} more`) : "",
    ];
  }
  if (summary.size) return [h("h3", {}, "Group size"), size(summary.kind, summary.size)];
  return [];
}

/** A group's member: a line with its status, opened on its details when it failed (or the group is small). */
function member(d, small) {
  return h(
    "details",
    { class: "member", dataset: { member: d.name }, open: small || d.status === "FAILED" },
    h("summary", {}, h("strong", {}, d.name), d.id ? status(d) : h("span", { class: "muted" }, "not deployed yet")),
    deployment(d, { inSummary: true }),
  );
}

/** The deployment's status badge and exit code. */
function status(d) {
  return [
    h("span", { class: "deployment-status" }, badge(`${d.action}_${d.status}`)),
    d.status === "IN_PROGRESS" ? h("span", { class: "muted" }, "waiting for the server's agent") : "",
    h("span", {}, "exit ", h("strong", { dataset: { output: "deploy_status_code" } }, d.outputs?.deploy_status_code ?? "—")),
  ];
}

function deployment(d, { inSummary = false } = {}) {
  if (!d.id) return h("p", { class: "muted deployment" }, "Not deployed yet.");
  const outputs = d.outputs || {};
  const declared = Object.keys(outputs).filter((k) => !STANDARD.includes(k)).sort();
  return h(
    "div",
    { class: "deployment", dataset: { status: d.status } },
    h(
      "p",
      { class: "deployment-line" },
      inSummary ? "" : status(d),
      h("span", { class: "muted" }, `server ${d.server_id}`),
    ),
    d.status_reason ? h("p", { class: "deployment-reason" }, d.status_reason) : "",
    output("stdout", outputs.deploy_stdout, "deploy_stdout"),
    output("stderr", outputs.deploy_stderr, "deploy_stderr"),
    declared.length
      ? [
          h("h4", {}, "Outputs"),
          h(
            "dl",
            {},
            declared.map((k) => [h("dt", {}, k), h("dd", {}, h("pre", { dataset: { output: k } }, text(outputs[k])))]),
          ),
        ]
      : "",
  );
}

function output(label, value, key) {
  if (value === undefined || value === null || value === "") return "";
  return [h("h4", {}, label), h("pre", { class: `stream ${label}`, dataset: { output: key } }, text(value))];
}

function text(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function size(kind, s) {
  const rows =
    kind === "autoscaling_group"
      ? [
          ["current_size", "Members now"],
          ["desired_size", "Converging to"],
          ["min_size", "Minimum"],
          ["max_size", "Maximum"],
          ["desired_capacity", "desired_capacity"],
        ]
      : [
          ["current_size", "Members now"],
          ["count", "count"],
        ];
  const moving = s.desired_size !== null && s.desired_size !== s.current_size;
  return h(
    "div",
    { id: "group-size" },
    h("p", { class: "size-line" }, `${s.current_size} member${s.current_size === 1 ? "" : "s"}`, moving ? ` → ${s.desired_size}` : "", kind === "autoscaling_group" ? ` (min ${s.min_size}, max ${s.max_size})` : ""),
    h("dl", {}, rows.map(([key, label]) => h("div", {}, h("dt", {}, label), h("dd", { dataset: { size: key } }, s[key] ?? "—")))),
  );
}
