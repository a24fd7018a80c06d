// The API docs, read from /openapi.json and laid out here: no script or style from anywhere else, so /docs
// works offline (the page and the schema are the service's own; the login cookie authorises the fetch).

const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
};

const anchor = (method, path) => `${method}-${path}`.replace(/[^A-Za-z0-9_-]+/g, "-");

function resolve(schema, spec, depth = 0) {
  // a schema with its $refs inlined (a few levels: enough to read, never a cycle)
  if (!schema || typeof schema !== "object" || depth > 6) return schema;
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    return resolve(spec.components?.schemas?.[name] ?? {}, spec, depth + 1);
  }
  if (Array.isArray(schema)) return schema.map((item) => resolve(item, spec, depth + 1));
  const out = {};
  for (const [key, value] of Object.entries(schema)) out[key] = resolve(value, spec, depth + 1);
  return out;
}

function operation(method, path, op, spec) {
  const section = el("section", { id: anchor(method, path) },
    el("h2", {}, el("span", { class: "method" }, method.toUpperCase()), path));
  if (op.summary) section.append(el("p", {}, op.summary));
  if (op.description) section.append(el("p", {}, op.description));
  const params = op.parameters ?? [];
  if (params.length) {
    const table = el("table", {}, el("tr", {}, el("th", {}, "parameter"), el("th", {}, "in"), el("th", {}, "required")));
    for (const p of params) table.append(el("tr", {}, el("td", {}, p.name), el("td", {}, p.in), el("td", {}, p.required ? "yes" : "no")));
    section.append(el("h3", {}, "Parameters"), table);
  }
  const body = op.requestBody?.content;
  if (body) {
    for (const [type, media] of Object.entries(body)) {
      section.append(el("h3", {}, `Request body (${type})`),
        el("pre", {}, JSON.stringify(resolve(media.schema ?? {}, spec), null, 2)));
    }
  }
  const responses = Object.entries(op.responses ?? {});
  if (responses.length) {
    section.append(el("h3", {}, "Responses"),
      el("ul", {}, ...responses.map(([code, r]) => el("li", {}, `${code}: ${r.description ?? ""}`))));
  }
  return section;
}

async function main() {
  const about = document.getElementById("about");
  const answer = await fetch("/openapi.json", { credentials: "same-origin" });
  if (!answer.ok) {
    about.textContent = `The schema needs the service's token: open /docs?token=... (HTTP ${answer.status}).`;
    return;
  }
  const spec = await answer.json();
  about.textContent = `${spec.info?.title ?? "API"} ${spec.info?.version ?? ""}: ${spec.info?.description ?? ""}`;
  const toc = document.getElementById("toc");
  const routes = document.getElementById("routes");
  for (const [path, item] of Object.entries(spec.paths ?? {})) {
    for (const [method, op] of Object.entries(item)) {
      if (!["get", "put", "post", "delete", "patch", "head"].includes(method)) continue;
      toc.append(el("li", {}, el("a", { href: `#${anchor(method, path)}` }, `${method.toUpperCase()} ${path}`)));
      routes.append(operation(method, path, op, spec));
    }
  }
}

main();
