"""Runs the chart's rendered pods as local processes and checks that they form a cluster.

Usage: run_rendered.py CHART_DIR SKEIN_BINARY DATABASE_URL

The chart is rendered with its default values (three brokers) and a bootstrap token for
the admin API. Each pod the test needs runs as the rendered container says: the same
arguments and environment, Kubernetes' `$(VAR)` expansion, the downward API's fields, the
rendered Secrets' files, and each volume a directory of its own at the path its mount
names. Each pod gets a network namespace of its own (the root namespace reaches them over
a bridge), whose /etc/hosts (ip netns's /etc/netns/NAME/hosts) resolves the Services'
names as cluster DNS would, so brokers bound to 0.0.0.0 advertise and reach each other
under the names the chart gives them. The control plane runs from its Deployment after the
migrations Job; every broker runs its controller-token init container, then itself.

The one step not run as rendered is the `rack` init container, which asks the Kubernetes
API for the node's zone: its output file is written here instead, as it would write it.

Then: every broker's /readyz answers 200, a topic of three partitions with three replicas
is created through the admin API, and every partition reaches an ISR of all three brokers
(followers fetching from leaders at the advertised names). Prints "cluster formed".
Needs root (network namespaces).
"""

import base64
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import helm_python as helm
import yaml

CHART, SKEIN, DATABASE_URL = sys.argv[1], sys.argv[2], sys.argv[3]
NAMESPACE = "skein"
RELEASE = "demo"
TAG = f"sk{os.getpid() % 100000}"
SUBNET = f"10.250.{os.getpid() % 250}"
BRIDGE_IP = f"{SUBNET}.1"
BOOTSTRAP_TOKEN = secrets.token_hex(16)

cleanups = []
processes = []


def run(*args, **kwargs):
    subprocess.run(args, check=True, capture_output=True, **kwargs)


def render():
    with open(os.path.join(CHART, "ci", "default-values.yaml")) as f:
        values = yaml.safe_load(f)
    values.setdefault("controlPlane", {})["bootstrapToken"] = {"existingSecret": "skein-bootstrap"}
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(d for d in yaml.safe_load_all(text) if d)
    return objects


def one(objects, kind, suffix):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    if len(found) != 1:
        sys.exit(f"expected one {kind} named *{suffix}, found {len(found)}")
    return found[0]


def secrets_of(objects, database_url):
    """Every Secret's keys and values: the rendered ones, and the two the operator makes."""
    found = {
        "skein-database": {"database-url": database_url},
        "skein-bootstrap": {"token": BOOTSTRAP_TOKEN},
    }
    for o in objects:
        if o["kind"] == "Secret":
            data = {k: base64.b64decode(v).decode() for k, v in (o.get("data") or {}).items()}
            data.update(o.get("stringData") or {})
            found[o["metadata"]["name"]] = data
    return found


class Network:
    """A bridge in the root namespace and, per pod, a namespace with an address on it."""

    def __init__(self):
        self.bridge = f"{TAG}br"
        run("ip", "link", "add", self.bridge, "type", "bridge")
        cleanups.append(lambda: subprocess.run(["ip", "link", "del", self.bridge], capture_output=True))
        run("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        self.count = 0

    def namespace(self):
        self.count += 1
        name, veth = f"{TAG}-{self.count}", f"{TAG}v{self.count}"
        address = f"{SUBNET}.{9 + self.count}"
        run("ip", "netns", "add", name)
        cleanups.append(lambda: subprocess.run(["ip", "netns", "del", name], capture_output=True))
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        cleanups.append(lambda: subprocess.run(["ip", "link", "del", veth], capture_output=True))
        run("ip", "link", "set", veth, "master", self.bridge)
        run("ip", "link", "set", veth, "up")
        for command in (["ip", "addr", "add", f"{address}/24", "dev", "eth0"],
                        ["ip", "link", "set", "eth0", "up"],
                        ["ip", "link", "set", "lo", "up"]):
            run("ip", "netns", "exec", name, *command)
        etc = f"/etc/netns/{name}"
        os.makedirs(etc, exist_ok=True)
        cleanups.append(lambda: shutil.rmtree(etc, ignore_errors=True))
        return name, address, etc


def forward(listen_host, listen_port, target_port):
    """Relays TCP from listen_host:listen_port to 127.0.0.1:target_port (PostgreSQL listens
    on the root namespace's loopback only)."""
    server = socket.create_server((listen_host, listen_port))

    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept():
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", target_port))
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    cleanups.append(server.close)


class Pod:
    """One pod's volumes as directories, and its containers run in its namespace."""

    def __init__(self, spec, name, namespace, address, fields, all_secrets, root):
        self.spec, self.name, self.netns, self.address = spec, name, namespace, address
        self.fields = fields
        self.dirs = {}
        for volume in spec.get("volumes", []):
            path = os.path.join(root, name, volume["name"])
            os.makedirs(path)
            if "secret" in volume:
                data = all_secrets[volume["secret"]["secretName"]]
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    with open(os.path.join(path, item["path"]), "w") as f:
                        f.write(data[item["key"]])
            self.dirs[volume["name"]] = path
        self.secrets = all_secrets

    def add_claim(self, name, root):
        path = os.path.join(root, self.name, name)
        os.makedirs(path)
        self.dirs[name] = path

    def environment(self, container):
        mounts = sorted(((m["mountPath"], self.dirs[m["name"]]) for m in container.get("volumeMounts", [])),
                        key=lambda m: -len(m[0]))

        def local(value):
            # A mount's path, alone or after `=` or `,` (a flag's value, a list), becomes
            # the directory standing in for the volume.
            if not mounts:
                return value
            pattern = r"(?:^|(?<=[=,]))(" + "|".join(re.escape(m) for m, _ in mounts) + r")(?=/|,|$)"
            paths = dict(mounts)
            return re.sub(pattern, lambda m: paths[m.group(1)], value)

        env = {}

        def expand(text):
            return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)

        for entry in container.get("env", []):
            if "value" in entry:
                value = expand(str(entry["value"]))
            elif "fieldRef" in entry.get("valueFrom", {}):
                value = self.fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
            elif "secretKeyRef" in entry.get("valueFrom", {}):
                ref = entry["valueFrom"]["secretKeyRef"]
                value = self.secrets[ref["name"]][ref["key"]]
            else:
                sys.exit(f"{self.name}: env {entry['name']} comes from somewhere unknown")
            env[entry["name"]] = local(value)
        args = [local(expand(a)) for a in container.get("args", [])]
        return args, env

    def command(self, container):
        args, env = self.environment(container)
        base = {"PATH": os.environ["PATH"], "HOME": "/tmp", "RUST_LOG": "info"}
        return ["ip", "netns", "exec", self.netns, "env", "-i",
                *[f"{k}={v}" for k, v in {**base, **env}.items()], SKEIN, *args]

    def init(self, container):
        done = subprocess.run(self.command(container), capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            sys.exit(f"{self.name}: init container {container['name']} failed: {done.stderr}")

    def start(self, container, log_dir):
        log = open(os.path.join(log_dir, f"{self.name}.log"), "w")
        process = subprocess.Popen(self.command(container), stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        processes.append((self.name, process, log.name))
        return process


def http(method, url, body=None, token=BOOTSTRAP_TOKEN):
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return None, str(error)


def answers_ok(url, token=BOOTSTRAP_TOKEN):
    status, body = http("GET", url, token=token)
    return status == 200 or (status, body)


def until(what, check, within=90):
    deadline = time.time() + within
    last = None
    while time.time() < deadline:
        for name, process, log in processes:
            if process.poll() is not None:
                with open(log) as f:
                    sys.exit(f"{name} exited ({process.returncode}) while waiting for {what}:\n{f.read()[-4000:]}")
        last = check()
        if last is True:
            return
        time.sleep(0.5)
    sys.exit(f"gave up waiting for {what}: {last}")


def main():
    if os.geteuid() != 0:
        sys.exit("run_rendered.py needs root for network namespaces")
    objects = render()
    all_secrets = secrets_of(objects, "")
    root = tempfile.mkdtemp(prefix="skein-rendered-")
    cleanups.append(lambda: shutil.rmtree(root, ignore_errors=True))
    statefulset = one(objects, "StatefulSet", "-broker")
    headless = one(objects, "Service", "-broker-headless")["metadata"]["name"]
    control_plane = one(objects, "Deployment", "-control-plane")
    migrations = one(objects, "Job", "")
    controller_host = re.match(r"https?://([^:/]+)", next(
        e["value"] for e in statefulset["spec"]["template"]["spec"]["containers"][0]["env"]
        if e["name"] == "SKEIN_CONTROL_PLANE")).group(1)
    brokers = statefulset["spec"]["replicas"]

    network = Network()
    # The catalog's URL, as the operator's Secret would hold it: PostgreSQL reached over the
    # bridge through a relay.
    pg_port = int(re.search(r":(\d+)/", DATABASE_URL).group(1))
    relay = 15432 + os.getpid() % 1000
    forward(BRIDGE_IP, relay, pg_port)
    all_secrets["skein-database"]["database-url"] = re.sub(
        r"@127\.0\.0\.1:\d+/", f"@{BRIDGE_IP}:{relay}/", DATABASE_URL)

    namespaces = [network.namespace() for _ in range(brokers + 1)]
    hosts = ["127.0.0.1 localhost", f"{namespaces[0][1]} {controller_host}"]
    pod_names = [f"{statefulset['metadata']['name']}-{i}" for i in range(brokers)]
    for i, pod in enumerate(pod_names):
        hosts.append(f"{namespaces[i + 1][1]} {pod}.{headless}.{NAMESPACE}.svc {pod}.{headless}.{NAMESPACE}.svc.cluster.local")
    for _, _, etc in namespaces:
        with open(os.path.join(etc, "hosts"), "w") as f:
            f.write("\n".join(hosts) + "\n")
    log_dir = os.environ.get("SKEIN_TEST_LOG_DIR") or os.path.join(root, "logs")
    os.makedirs(log_dir, exist_ok=True)

    # The migrations Job, then one control-plane replica.
    cp_name = f"{control_plane['metadata']['name']}-0"
    fields = {"metadata.name": cp_name, "metadata.namespace": NAMESPACE,
              "status.hostIP": namespaces[0][1], "spec.nodeName": "node-cp"}
    job = Pod(migrations["spec"]["template"]["spec"], "migrations", namespaces[0][0], namespaces[0][1],
              fields, all_secrets, root)
    job.init(migrations["spec"]["template"]["spec"]["containers"][0])
    cp = Pod(control_plane["spec"]["template"]["spec"], cp_name, namespaces[0][0], namespaces[0][1],
             fields, all_secrets, root)
    cp.start(control_plane["spec"]["template"]["spec"]["containers"][0], log_dir)
    admin_port = next(p["containerPort"] for p in control_plane["spec"]["template"]["spec"]["containers"][0]["ports"]
                      if p["name"] == "admin")
    admin = f"http://{namespaces[0][1]}:{admin_port}"
    until("the admin API", lambda: answers_ok(f"{admin}/v1/tenants"))

    # The brokers, each after its init containers.
    spec = statefulset["spec"]["template"]["spec"]
    ops_port = next(p["containerPort"] for p in spec["containers"][0]["ports"] if p["name"] == "ops")
    for i, name in enumerate(pod_names):
        netns, address, _ = namespaces[i + 1]
        fields = {"metadata.name": name, "metadata.namespace": NAMESPACE, "status.hostIP": address,
                  "spec.nodeName": f"node-{i}", "metadata.labels['apps.kubernetes.io/pod-index']": str(i)}
        pod = Pod(spec, name, netns, address, fields, all_secrets, root)
        for claim in statefulset["spec"].get("volumeClaimTemplates", []):
            pod.add_claim(claim["metadata"]["name"], root)
        for container in spec.get("initContainers", []):
            if container["name"] == "rack":
                # What `skein rack-from-node` writes for a node labelled with a zone.
                out = next(a.split("=", 1)[1] for a in container["args"] if a.startswith("--out="))
                args, _ = pod.environment({**container, "args": [out]})
                with open(args[0], "w") as f:
                    f.write(f'[broker]\nrack = "zone-{"abc"[i % 3]}"\n')
                continue
            pod.init(container)
        pod.start(spec["containers"][0], log_dir)
    for i, name in enumerate(pod_names):
        url = f"http://{namespaces[i + 1][1]}:{ops_port}/readyz"
        until(f"{name} ready", lambda url=url: answers_ok(url, token=None))
        print(f"ok {name} ready")

    status, body = http("POST", f"{admin}/v1/tenants", {"name": "acme"})
    if status != 201:
        sys.exit(f"creating a tenant: {status} {body}")

    def created():
        status, body = http("POST", f"{admin}/v1/tenants/acme/topics",
                            {"topic_name": "replicated", "partitions_count": 3, "replication_factor": brokers})
        return status == 201 or (status, body)

    until("the topic's creation", created)

    def in_sync():
        status, body = http("GET", f"{admin}/v1/tenants/acme/topics/replicated")
        if status != 200:
            return (status, body)
        partitions = json.loads(body).get("partitions", [])
        full = all(len(p["replicas"]) == brokers and sorted(p["isr"]) == sorted(p["replicas"])
                   for p in partitions)
        return (len(partitions) == 3 and full) or body

    until("every replica in sync", in_sync)
    print(f"cluster formed: {brokers} brokers, every partition in sync on all of them")


def stop():
    # The brokers first (their controlled shutdown asks the controller), then the control plane.
    for group in (processes[1:], processes[:1]):
        for _, process, _ in group:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _, process, _ in group:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    for cleanup in reversed(cleanups):
        cleanup()


if __name__ == "__main__":
    try:
        main()
    finally:
        stop()
