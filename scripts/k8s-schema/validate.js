// Checks Kubernetes manifests against the Kubernetes API's JSON schemas, as
// bundled by kubernetes-models (no cluster, no network).
//
// usage: node validate.js FILE_OR_FOLDER...
// Prints "valid KIND/NAME" per document, or "invalid FILE: KIND/NAME: why"
// (the schema's complaint and the field's path) and exits 1. A document whose
// apiVersion and kind the package does not know is invalid too.
import fs from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";

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
      console.log(`valid ${label}`);
    } catch (error) {
      const details = (error.errors ?? [])
        .map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      problems.push(`${file}: ${label}: ${details || error.message}`);
    }
  }
  return problems;
}

const problems = [];
for (const arg of process.argv.slice(2)) {
  for (const file of manifests(arg)) problems.push(...(await check(file)));
}
for (const problem of problems) console.log(`invalid ${problem}`);
process.exit(problems.length ? 1 : 0);
