// Checks Kubernetes manifests against the Kubernetes API's JSON schemas, as
// bundled by kubernetes-models (no cluster, no network): types and allowed
// values through the package's validators, and unknown fields (which those
// validators let through, and `kubectl apply` refuses) against the field
// lists of the package's type declarations.
//
// usage: node validate.js FILE_OR_FOLDER...
// Prints "valid KIND/NAME" per document, or "invalid FILE: KIND/NAME: why"
// (the schema's complaint and the field's path) and exits 1. A document whose
// apiVersion and kind the package does not know is invalid too.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const modules = path.join(path.dirname(fileURLToPath(import.meta.url)), "node_modules");

// The fields of the first interface a type declaration file (.d.ts) exports,
// each with its type's text, and the file each imported type comes from.
// Empty fields for a file that declares no interface (a type alias).
const declarations = new Map();
function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
  const imports = new Map();
  for (const [, names, from] of text.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm)) {
    const target = from.startsWith(".")
      ? path.join(path.dirname(file), from.replace(/\.js$/, ".d.ts"))
      : path.join(modules, from + ".d.ts");
    for (const name of names.split(",")) imports.set(name.trim(), target);
  }
  const fields = new Map();
  const body = text.match(/^export interface \w+[^{]*\{\n([\s\S]*?)^\}/m);
  for (const [, name, type] of (body ? body[1] : "").matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
    fields.set(name, type.replace(/;$/, ""));
  }
  const parsed = { fields, imports, known: Boolean(body) };
  declarations.set(file, parsed);
  return parsed;
}

// Appends to `problems` every field of `value` (at `where`) that the type
// declared in `file` lacks, recursing into fields of object and array types.
function unknownFields(value, file, where, problems) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return;
  const { fields, imports, known } = declaration(file);
  if (!known) return;
  for (const [key, child] of Object.entries(value)) {
    const at = where ? `${where}.${key}` : key;
    if (!fields.has(key)) {
      problems.push(`unknown field ${at}`);
      continue;
    }
    const type = fields.get(key);
    const single = type.match(/^(I\w+)$/);
    const list = type.match(/^Array<(I\w+)>$/);
    if (single && imports.has(single[1])) unknownFields(child, imports.get(single[1]), at, problems);
    if (list && imports.has(list[1]) && Array.isArray(child)) {
      child.forEach((item, i) => unknownFields(item, imports.get(list[1]), `${at}[${i}]`, problems));
    }
  }
}

// The module kubernetes-models keeps a kind's model in: "v1" for the core
// group, "GROUP/VERSION" otherwise.
async function modelOf(apiVersion, kind) {
  if (!/^[a-z0-9.]+(\/[a-z0-9]+)?$/.test(apiVersion) || !/^[A-Za-z]+$/.test(kind)) return null;
  try {
    const module = await import(`kubernetes-models/${apiVersion}/${kind}`);
    return module[kind] ?? null;
  } catch {
    return null;
  }
}

function manifests(arg) {
  if (fs.statSync(arg).isDirectory()) {
    return fs.readdirSync(arg).filter((name) => /\.ya?ml$/.test(name)).sort()
      .map((name) => path.join(arg, name));
  }
  return [arg];
}

async function check(file) {
  const problems = [];
  const documents = parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const document of documents) {
    if (document.errors.length) {
      problems.push(`${file}: ${document.errors[0].message}`);
      continue;
    }
    const object = document.toJS();
    if (!object) continue;
    const label = `${object.kind}/${object.metadata?.name}`;
    const Model = await modelOf(String(object.apiVersion), String(object.kind));
    if (!Model) {
      problems.push(`${file}: ${label}: no schema for apiVersion ${object.apiVersion}`);
      continue;
    }
    try {
      new Model(object).validate();
    } catch (error) {
      const details = (error.errors ?? [])
        .map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      problems.push(`${file}: ${label}: ${details || error.message}`);
      continue;
    }
    const unknown = [];
    const declared = path.join(modules, "kubernetes-models", object.apiVersion, `${object.kind}.d.ts`);
    unknownFields(object, declared, "", unknown);
    if (unknown.length) {
      problems.push(`${file}: ${label}: ${unknown.join("; ")}`);
      continue;
    }
    console.log(`valid ${label}`);
  }
  return problems;
}

const problems = [];
for (const arg of process.argv.slice(2)) {
  for (const file of manifests(arg)) problems.push(...(await check(file)));
}
for (const problem of problems) console.log(`invalid ${problem}`);
process.exit(problems.length ? 1 : 0);
