"""Checks helm/skein without a cluster: Helm's own lint (Helm's Go SDK, through
helm-python-sdk), then for each values file in helm/skein/ci/ the schema check, a render, and
every rendered object validated against the Kubernetes schemas of KUBERNETES_VERSION in strict
mode (unknown fields refused). Objects of custom resources (ServiceMonitor, cert-manager's
Certificate) have no schema there and are checked for what the chart relies on. Then what
operators rely on is asserted on the renders, and values the schema must refuse are refused.

Usage: check_chart.py CHART_DIR [RENDER_DIR]  (renders are written to RENDER_DIR if given)
"""

import json
import os
import sys

import helm_python as helm
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.37.0"
CHART = sys.argv[1]
RENDERS = sys.argv[2] if len(sys.argv) > 2 else None
CUSTOM_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ["selector", "endpoints"],
    ("cert-manager.io/v1", "Certificate"): ["secretName", "issuerRef", "dnsNames"],
}

failures = []


def fail(message):
    failures.append(message)
    print("FAIL", message)


def render(chart, values, name="demo", namespace="skein"):
    manifests = chart.render(values, name=name, namespace=namespace, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for document in yaml.safe_load_all(text):
            if document:
                objects.append((path, document))
    return objects, manifests


def find(objects, kind, suffix=""):
    return [o for _, o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


lint = helm.lint(CHART, yaml.safe_load(open(os.path.join(CHART, "ci", "default-values.yaml"))))
if lint["errors"]:
    fail(f"helm lint: {lint['errors']}")
for message in lint["messages"]:
    if message["severity"] >= 2:
        fail(f"helm lint: {message}")

values_dir = os.path.join(CHART, "ci")
with helm.Chart.load(CHART) as chart:
    for file in sorted(os.listdir(values_dir)):
        values = yaml.safe_load(open(os.path.join(values_dir, file))) or {}
        try:
            chart.validate_schema(values)
            objects, manifests = render(chart, values)
        except helm.HelmError as error:
            fail(f"{file}: {error}")
            continue
        if RENDERS:
            os.makedirs(RENDERS, exist_ok=True)
            with open(os.path.join(RENDERS, file.replace("-values", "")), "w") as out:
                out.write(yaml.safe_dump_all([o for _, o in objects], sort_keys=False))
        custom = 0
        for path, obj in objects:
            key = (obj["apiVersion"], obj["kind"])
            if key in CUSTOM_KINDS:
                custom += 1
                missing = [f for f in CUSTOM_KINDS[key] if f not in obj.get("spec", {})]
                if missing:
                    fail(f"{file}: {path}: {obj['kind']} lacks {missing}")
                continue
            try:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                fail(f"{file}: {path}: {obj['kind']}/{obj['metadata']['name']}: {error.message} at {list(error.path)}")
            except kubernetes_validate.SchemaNotFoundError:
                fail(f"{file}: {path}: no schema for {key}")
        print(f"ok {file}: {len(objects)} objects valid for Kubernetes {KUBERNETES_VERSION}"
              + (f" ({custom} custom resources checked by field)" if custom else ""))

        # What an operator relies on, in every render.
        (brokers,) = find(objects, "StatefulSet", "-broker")
        spec = brokers["spec"]
        if spec["podManagementPolicy"] != "Parallel":
            fail(f"{file}: brokers are not started in parallel")
        if not spec["volumeClaimTemplates"]:
            fail(f"{file}: brokers have no volume claim")
        (headless,) = find(objects, "Service", "-broker-headless")
        if not headless["spec"].get("publishNotReadyAddresses") or headless["spec"].get("clusterIP") != "None":
            fail(f"{file}: the brokers' headless Service does not publish unready brokers")
        broker = spec["template"]["spec"]["containers"][0]
        env = env_of(broker)
        if spec["serviceName"] != headless["metadata"]["name"]:
            fail(f"{file}: the StatefulSet's serviceName is not the headless Service")
        if headless["metadata"]["name"] not in (env.get("SKEIN_ADVERTISED_LISTENERS") or ""):
            fail(f"{file}: brokers do not advertise their stable names")
        for probe in ["startupProbe", "readinessProbe", "livenessProbe"]:
            if probe not in broker:
                fail(f"{file}: the broker has no {probe}")
        for pdb in find(objects, "PodDisruptionBudget"):
            if pdb["spec"].get("maxUnavailable") != 1:
                fail(f"{file}: {pdb['metadata']['name']} allows more than one pod down")
        for workload in find(objects, "StatefulSet") + find(objects, "Deployment"):
            pod = workload["spec"]["template"]["spec"]
            for container in pod["containers"] + pod.get("initContainers", []):
                if container["image"].endswith("postgres:16"):
                    continue
                context = container.get("securityContext", {})
                if not (pod.get("securityContext", {}).get("runAsNonRoot") and context.get("readOnlyRootFilesystem")):
                    fail(f"{file}: {workload['metadata']['name']}/{container['name']} may run as root or write its root filesystem")
        jobs = find(objects, "Job")
        if not jobs or "helm.sh/hook" not in jobs[0]["metadata"].get("annotations", {}):
            fail(f"{file}: the migrations are not a hook Job")
        bundled = values.get("postgresql", {}).get("bundled", {}).get("enabled", False)
        if bundled != bool(find(objects, "StatefulSet", "-postgresql")):
            fail(f"{file}: the bundled PostgreSQL is {'missing' if bundled else 'present'}")
        if values.get("tls", {}).get("enabled"):
            if "SASL_SSL" not in (env.get("SKEIN_LISTENER_SECURITY_PROTOCOL_MAP") or ""):
                fail(f"{file}: TLS on, yet the listeners are not SASL_SSL")
            # The controller's gRPC and the gateway's in TLS, and reached as such.
            (control_plane,) = find(objects, "Deployment", "-control-plane")
            (gateway,) = find(objects, "Deployment", "-gateway")
            cp_env = env_of(control_plane["spec"]["template"]["spec"]["containers"][0])
            gw_env = env_of(gateway["spec"]["template"]["spec"]["containers"][0])
            for name, container_env in [("control plane", cp_env), ("gateway", gw_env)]:
                if not container_env.get("SKEIN_GRPC_TLS_CERT_FILE"):
                    fail(f"{file}: TLS on, yet the {name}'s gRPC is plaintext")
            for name, container_env in [("broker", env), ("gateway", gw_env)]:
                if not (container_env.get("SKEIN_CONTROL_PLANE") or "").startswith("https://") \
                        or not container_env.get("SKEIN_CONTROL_PLANE_CA_FILE"):
                    fail(f"{file}: TLS on, yet the {name} reaches the controller in plaintext")
        external = values.get("broker", {}).get("external", {})
        if external.get("enabled"):
            if "EXTERNAL://" not in (env.get("SKEIN_ADVERTISED_LISTENERS") or ""):
                fail(f"{file}: external access on, yet no EXTERNAL listener is advertised")
            kind = external.get("type", "LoadBalancer")
            services = [s for s in find(objects, "Service") if s["spec"].get("type") == kind]
            wanted = 1 if kind == "NodePort" else spec["replicas"]
            if len(services) != wanted:
                fail(f"{file}: {len(services)} {kind} Services for {spec['replicas']} brokers")
        dashboards = find(objects, "ConfigMap", "-dashboard")
        if values.get("metrics", {}).get("grafanaDashboard", {}).get("enabled"):
            if len(dashboards) != 1 or "grafana_dashboard" not in dashboards[0]["metadata"]["labels"]:
                fail(f"{file}: the dashboard is on, yet no ConfigMap carries it for Grafana's sidecar")
            with open(os.path.join(CHART, "dashboards", "skein.json")) as source:
                if json.loads(dashboards[0]["data"]["skein.json"]) != json.load(source):
                    fail(f"{file}: the dashboard's ConfigMap differs from dashboards/skein.json")
        elif dashboards:
            fail(f"{file}: a dashboard ConfigMap though the dashboard is off")
        if "NOTES.txt" not in "".join(manifests):
            fail(f"{file}: no NOTES.txt")

    # Values the schema (or the templates) refuse, each with a reason an operator can act on.
    base = {"postgresql": {"external": {"existingSecret": "db"}}}
    refused = [
        ({}, "existingSecret"),
        ({**base, "broker": {"replicas": "three"}}, "/broker/replicas"),
        ({**base, "broker": {"replicas": 0}}, "/broker/replicas"),
        ({**base, "broker": {"podAntiAffinity": "never"}}, "/broker/podAntiAffinity"),
        ({**base, "broker": {"external": {"type": "Ingress"}}}, "/broker/external/type"),
        ({**base, "broker": {"ports": {"client": 70000}}}, "/broker/ports/client"),
        ({**base, "broker": {"persistence": {"size": "lots"}}}, "/broker/persistence/size"),
        ({**base, "gateway": {"replica": 2}}, "replica"),
        ({**base, "tls": {"enabled": True}}, "existingSecret"),
        ({**base, "controlPlane": {"jwt": {"publicKey": {"algorithm": "none"}}}}, "algorithm"),
    ]
    for values, reason in refused:
        try:
            chart.validate_schema(values)
            fail(f"the schema accepted {values}")
        except helm.HelmValuesError as error:
            if reason not in str(error):
                fail(f"{values} was refused without naming {reason}: {error}")
    # Combinations only the templates can judge fail the render with a reason.
    for values, reason in [
        ({**base, "broker": {"external": {"enabled": True, "type": "NodePort"}}}, "hard"),
        ({**base, "broker": {"external": {"enabled": True, "type": "LoadBalancer"}}}, "domain"),
    ]:
        try:
            render(chart, values)
            fail(f"the chart rendered {values}")
        except helm.HelmError as error:
            if reason not in str(error):
                fail(f"{values} failed without naming {reason}: {error}")
    print(f"ok {len(refused) + 2} broken values refused")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("chart ok")
