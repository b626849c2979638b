#!/usr/bin/env python3
"""Prints every container command of Keel's Kubernetes manifests, as a pod would run it.

usage: k8s_commands.py MANIFEST_FOLDER OUT_FOLDER

ConfigMaps are written to OUT_FOLDER/<configmap>/<key>, and a path under a
container's configMap mount is rewritten to that copy, so the command can run
here. A Secret volume's mount is rewritten to OUT_FOLDER/<secret>/; the files
there (the caller puts those the manifests do not hold, such as the cluster
secret) get the volume's defaultMode, 0644 when it has none, as a pod's would. The environment a pod would have is given for each container: literal
values, the pod's name for metadata.name (ordinal 0 of a StatefulSet), 0 for
an Indexed Job's completion index (and its pod's hostname, JOB-0), and a placeholder for Secret keys.
$(VAR) in args is expanded as Kubernetes does.

Output, one block per container:
  container KIND/NAME/CONTAINER
  restart POLICY               (the pod's restartPolicy, Always when unset)
  grace SECONDS                (the pod's terminationGracePeriodSeconds, 30 when unset)
  env NAME=VALUE
  arg WORD
  port NAME NUMBER             (its containerPorts)
  probe KIND PATH PORT         (readiness, liveness, startup: httpGet's path and port,
                               or "tcp" and the port of a tcpSocket probe)
  job MODE COMPLETIONS PARALLELISM  (a Job's pod: completionMode, NonIndexed when unset)
  subdomain NAME               (the pod's subdomain, when it has one)
  mount PATH KIND NAME SUBPATH (its volumeMounts: the volume's kind, configMap, secret,
                               persistentVolumeClaim, emptyDir, ..., its ConfigMap, Secret
                               or claim's name, and the subPath, "-" for none)
  resource requests.cpu VALUE  (and requests.memory, limits.cpu, limits.memory)
  end

Before the blocks, a line for each headless Service (clusterIP None):
  headless_service NAME PUBLISH  (PUBLISH: publishNotReadyAddresses, true or false)

Also checks that --num_servers and --num_workers in the job's flagfile match
the completions of the Jobs (or the replicas of a StatefulSet) running
`server` and `worker`; exits 1 naming the mismatch.
"""
import os
import re
import sys

import yaml


def pod_spec(document):
    kind = document.get("kind")
    spec = document.get("spec", {})
    if kind == "Pod":
        return spec
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return spec.get("template", {}).get("spec", {})
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", {})
    return None


def pod_env(document, container):
    kind = document["kind"]
    name = document["metadata"]["name"]
    indexed = kind == "Job" and document["spec"].get("completionMode") == "Indexed"
    pod_name = name + "-0" if kind == "StatefulSet" or indexed else name + "-7f9c4"
    env = {"HOSTNAME": pod_name}
    if indexed:
        env["JOB_COMPLETION_INDEX"] = "0"
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
            continue
        source = variable.get("valueFrom", {})
        field = source.get("fieldRef", {}).get("fieldPath", "")
        if field == "metadata.name":
            env[variable["name"]] = pod_name
        elif field == "status.podIP":
            env[variable["name"]] = "10.0.0.10"
        elif "job-completion-index" in field:
            env[variable["name"]] = "0"
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            env[variable["name"]] = "from-" + variable["name"].lower()
        else:
            env[variable["name"]] = ""
    return env


def print_ports_probes_resources(container):
    for port in container.get("ports", []):
        print("port %s %s" % (port.get("name", ""), port.get("containerPort", "")))
    for kind in ("readiness", "liveness", "startup"):
        probe = container.get(kind + "Probe")
        if probe is None:
            continue
        if "tcpSocket" in probe:
            print("probe %s tcp %s" % (kind, probe["tcpSocket"].get("port", "-")))
            continue
        http = probe.get("httpGet", {})
        print("probe %s %s %s" % (kind, http.get("path", "-"), http.get("port", "-")))
    resources = container.get("resources", {})
    for section in ("requests", "limits"):
        for name, value in sorted(resources.get(section, {}).items()):
            print("resource %s.%s %s" % (section, name, value))


def print_mounts(spec, container):
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        kind = next((key for key in volume if key != "name"), "-")
        source = volume.get(kind) or {}
        name = source.get("name") or source.get("secretName") or source.get("claimName") or "-"
        print("mount %s %s %s %s" % (mount["mountPath"], kind, name, mount.get("subPath", "-")))


def expand(text, env):
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda match: env.get(match.group(1), match.group(0)), text)


def main():
    folder, out = sys.argv[1], sys.argv[2]
    documents = []
    for name in sorted(os.listdir(folder)):
        if name.endswith((".yaml", ".yml")):
            with open(os.path.join(folder, name)) as stream:
                documents += [d for d in yaml.safe_load_all(stream) if d]
    configmaps = {}
    for document in documents:
        if document.get("kind") == "ConfigMap":
            name = document["metadata"]["name"]
            configmaps[name] = document.get("data", {})
            os.makedirs(os.path.join(out, name), exist_ok=True)
            for key, value in configmaps[name].items():
                with open(os.path.join(out, name, key), "w") as stream:
                    stream.write(value)

    for document in documents:
        spec = document.get("spec", {})
        if document.get("kind") == "Service" and spec.get("clusterIP") == "None":
            print("headless_service %s %s" % (document["metadata"]["name"],
                                              str(spec.get("publishNotReadyAddresses",
                                                           False)).lower()))

    problems = []
    counts = {}
    for document in documents:
        spec = pod_spec(document)
        if spec is None:
            continue
        volumes = {v["name"]: v["configMap"]["name"]
                   for v in spec.get("volumes", []) if "configMap" in v}
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                secret = volume["secret"]["secretName"]
                volumes[volume["name"]] = secret
                secret_folder = os.path.join(out, secret)
                os.makedirs(secret_folder, exist_ok=True)
                for key in os.listdir(secret_folder):
                    os.chmod(os.path.join(secret_folder, key),
                             volume["secret"].get("defaultMode", 0o644))
        containers = spec.get("initContainers", []) + spec.get("containers", [])
        for container in containers:
            env = pod_env(document, container)
            mounts = {m["mountPath"]: volumes[m["name"]]
                      for m in container.get("volumeMounts", []) if m["name"] in volumes}
            argv = []
            for word in container.get("command", []) + container.get("args", []):
                word = expand(str(word), env)
                for path, configmap in mounts.items():
                    word = word.replace(path.rstrip("/") + "/",
                                        os.path.join(out, configmap) + "/")
                if "\n" in word:
                    problems.append("%s: an argument spans lines" % container["name"])
                argv.append(word)
            label = "%s/%s/%s" % (document["kind"], document["metadata"]["name"],
                                  container["name"])
            print("container " + label)
            print("restart " + spec.get("restartPolicy", "Always"))
            print("grace %s" % spec.get("terminationGracePeriodSeconds", 30))
            for name, value in sorted(env.items()):
                print("env %s=%s" % (name, value))
            for word in argv:
                print("arg " + word)
            print_ports_probes_resources(container)
            print_mounts(spec, container)
            if document["kind"] == "Job":
                job = document["spec"]
                print("job %s %s %s" % (job.get("completionMode", "NonIndexed"),
                                        job.get("completions", 1), job.get("parallelism", 1)))
            if "subdomain" in spec:
                print("subdomain " + spec["subdomain"])
            print("end")
            role = argv[1] if len(argv) > 1 else ""
            count_key = {"server": "num_servers", "worker": "num_workers"}.get(role)
            if count_key and document["kind"] == "StatefulSet":
                counts[count_key] = (label, document["spec"].get("replicas", 1))
            if count_key and document["kind"] == "Job":
                counts[count_key] = (label, document["spec"].get("completions", 1))

    flags = "\n".join(value for data in configmaps.values() for value in data.values())
    for flag, (label, count) in counts.items():
        found = re.findall(r"^\s*--%s=(\d+)\s*$" % flag, flags, re.MULTILINE)
        if not found:
            problems.append("no --%s in the job's flagfile (%s runs %d)" % (flag, label, count))
        elif int(found[-1]) != count:
            problems.append("--%s=%s in the flagfile, but %s runs %d"
                            % (flag, found[-1], label, count))
    for problem in problems:
        print("problem: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
