// Validates Kubernetes objects offline against the Kubernetes API's OpenAPI schema, with the
// models of the npm package kubernetes-models: every object of every file, every field. The
// models check types, formats, enums and required fields; they accept fields the API does not
// know (which the API server drops or refuses), so every field is also looked up in the models'
// type declarations (.d.ts, generated from the same schema): an unknown field is an error.
// usage: node validate.mjs FILE...   exit 0: all valid; 1: errors listed.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as yaml from "js-yaml";

const require = createRequire(import.meta.url);
const modelsRoot = dirname(require.resolve("kubernetes-models/package.json"));
const nodeModules = dirname(modelsRoot);

// The properties of the first interface a .d.ts file declares: name -> {type, file of the
// interface the type refers to (or null)}. null when the file declares a type, not an interface.
const declarations = new Map();
function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
    const target = m[2].startsWith(".") ? join(dirname(file), m[2]) : join(nodeModules, m[2]);
    imports.set(m[1], target + ".d.ts");
  }
  const start = text.search(/^export interface \w+/m);
  let props = null;
  if (start >= 0) {
    props = new Map();
    const body = text.slice(start, text.indexOf("\n}", start));
    for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
      const type = m[2];
      const ref = (type.match(/IIoK8s\w+/) || [null])[0];
      props.set(m[1], { map: type.startsWith("{"), file: ref ? imports.get(ref) ?? null : null });
    }
  }
  declarations.set(file, props);
  return props;
}

function unknownFields(value, file, path, out) {
  if (value === null || typeof value !== "object" || !file || !existsSync(file)) return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, file, `${path}/${i}`, out));
    return;
  }
  const props = declaration(file);
  if (!props) return;  // a type such as Quantity or IntOrString
  for (const [key, v] of Object.entries(value)) {
    const prop = props.get(key);
    if (!prop) {
      out.push(`${path}/${key}: unknown field`);
      continue;
    }
    if (prop.map) {
      if (prop.file && v && typeof v === "object")
        for (const [k, item] of Object.entries(v)) unknownFields(item, prop.file, `${path}/${key}/${k}`, out);
    } else {
      unknownFields(v, prop.file, `${path}/${key}`, out);
    }
  }
}

let errors = 0;
let count = 0;
for (const file of process.argv.slice(2)) {
  const docs = yaml.loadAll(readFileSync(file, "utf8")).filter((d) => d !== null && d !== undefined);
  for (const [i, doc] of docs.entries()) {
    const where = `${file}: object ${i + 1} (${doc.kind ?? "?"} ${doc.metadata?.name ?? "?"})`;
    const group = (doc.apiVersion ?? "").includes("/") ? doc.apiVersion : `v1`;
    let Model;
    try {
      const mod = await import(`kubernetes-models/${group}/${doc.kind}`);
      Model = mod[doc.kind] ?? mod.default;
    } catch (e) {
      console.error(`${where}: no model for apiVersion ${doc.apiVersion} kind ${doc.kind}`);
      ++errors;
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      console.error(`${where}: ${e.message}`);
      ++errors;
      continue;
    }
    const unknown = [];
    unknownFields(doc, join(modelsRoot, group, `${doc.kind}.d.ts`), "data", unknown);
    if (unknown.length > 0) {
      console.error(`${where}: ${unknown.join("; ")}`);
      ++errors;
      continue;
    }
    ++count;
  }
}
if (errors > 0) {
  console.error(`validate: ${errors} invalid object(s)`);
  process.exit(1);
}
console.log(`validate: ${count} object(s) valid`);
