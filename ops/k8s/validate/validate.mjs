// Validates Kubernetes objects offline against the Kubernetes API's OpenAPI schema, with the
// models of the npm package kubernetes-models: every object of every file, every field. The
// models check types, formats, enums and required fields; they accept fields the API does not
// know (which the API server drops or refuses), so every field is also looked up in the models'
// type declarations (.d.ts, generated from the same schema): an unknown field is an error.
// With --restricted, every pod (Pod, and the pod templates of Deployments, StatefulSets, Jobs,
// ...) must also meet Pod Security's "restricted" profile (its rules as of Kubernetes 1.30:
// https://kubernetes.io/docs/concepts/security/pod-security-standards/), and satrap's own rule
// on top: a read-only root file system in every container.
// usage: node validate.mjs [--restricted] FILE...   exit 0: all valid; 1: errors listed.
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

// The pod spec of an object, or null: a Pod's spec, a workload's template, a CronJob's job's.
function podSpec(doc) {
  if (doc.kind === "Pod") return doc.spec ?? null;
  if (doc.kind === "CronJob") return doc.spec?.jobTemplate?.spec?.template?.spec ?? null;
  return doc.spec?.template?.spec ?? null;
}

const allowedVolumes = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                        "persistentVolumeClaim", "projected", "secret"];

// Pod Security "restricted" and a read-only root: what `spec` breaks, as messages.
function restrictedProblems(spec) {
  const out = [];
  const pod = spec.securityContext ?? {};
  for (const f of ["hostNetwork", "hostPID", "hostIPC"])
    if (spec[f]) out.push(`${f} is true`);
  for (const v of spec.volumes ?? []) {
    const type = Object.keys(v).find((k) => k !== "name");
    if (!allowedVolumes.includes(type)) out.push(`volume ${v.name}: type ${type} not allowed`);
  }
  const seccompOk = (s) => s && (s.type === "RuntimeDefault" || s.type === "Localhost");
  if (pod.seccompProfile && !seccompOk(pod.seccompProfile))
    out.push(`pod seccompProfile ${pod.seccompProfile.type}`);
  if (pod.runAsUser === 0) out.push("pod runAsUser 0");
  const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? []),
                      ...(spec.ephemeralContainers ?? [])];
  for (const c of containers) {
    const s = c.securityContext ?? {};
    const where = `container ${c.name}`;
    if (s.privileged) out.push(`${where}: privileged`);
    if (s.allowPrivilegeEscalation !== false) out.push(`${where}: allowPrivilegeEscalation not false`);
    if (!(s.runAsNonRoot ?? pod.runAsNonRoot)) out.push(`${where}: runAsNonRoot not true`);
    if (s.runAsUser === 0) out.push(`${where}: runAsUser 0`);
    if (!seccompOk(s.seccompProfile ?? pod.seccompProfile))
      out.push(`${where}: seccompProfile not RuntimeDefault or Localhost`);
    const caps = s.capabilities ?? {};
    if (!(caps.drop ?? []).includes("ALL")) out.push(`${where}: capabilities do not drop ALL`);
    for (const a of caps.add ?? [])
      if (a !== "NET_BIND_SERVICE") out.push(`${where}: adds capability ${a}`);
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`${where}: hostPort ${p.hostPort}`);
    if (s.readOnlyRootFilesystem !== true) out.push(`${where}: readOnlyRootFilesystem not true`);
  }
  return out;
}

let errors = 0;
let count = 0;
let restricted = false;
let pods = 0;
for (const file of process.argv.slice(2)) {
  if (file === "--restricted") {
    restricted = true;
    continue;
  }
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
    const spec = restricted ? podSpec(doc) : null;
    if (spec) {
      const problems = restrictedProblems(spec);
      if (problems.length > 0) {
        console.error(`${where}: not Pod Security "restricted": ${problems.join("; ")}`);
        ++errors;
        continue;
      }
      ++pods;
    }
    ++count;
  }
}
if (errors > 0) {
  console.error(`validate: ${errors} invalid object(s)`);
  process.exit(1);
}
console.log(`validate: ${count} object(s) valid` +
            (restricted ? `, ${pods} pod spec(s) meet Pod Security "restricted"` : ""));
