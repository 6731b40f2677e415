"""Property-based checks of an HTTP API against its OpenAPI document, with schemathesis.

    schemathesis_run.py BASE_URL OPENAPI_URL TOKEN [--hint NAME=VALUE[,VALUE...]]...
        [--skip "METHOD PATH"]... [--checks CHECK[,CHECK...]] [--max-examples N] [--seed N]

Every request carries `Authorization: Bearer TOKEN` and goes to BASE_URL only. A hint makes
a path or query parameter named NAME take one of the given values about half the time (and
whatever schemathesis generates otherwise), so that requests reach a topic or tenant that
exists instead of answering 404 every time. A skipped operation is not called at all.

The run is bounded (examples per operation, a deadline for the whole run) and seeded. It
fails when a check fails: by default, when a response is a server error (5xx) or a body
does not match the document's schema for its status. Prints schemathesis' report and, when
every check passed, `ok`. With SCHEMATHESIS_HAR=PATH set, every request and response of the
run is kept there as a HAR file.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

# Every answer is one the document lists: its status, its media type and its schema.
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)

# Seconds an event stream (text/event-stream) is read before the response counts as complete;
# a tail never ends by itself.
STREAM_SECS = 2
# Above the longest wait a request may ask for (30 s of long polling for records).
REQUEST_TIMEOUT_SECS = 40

# Loaded by schemathesis through SCHEMATHESIS_HOOKS: NDJSON bodies (the streaming produce
# takes one JSON record per line and answers one outcome per line).
HOOKS = '''
import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx, value):
    return (json.dumps(value) + "\\n").encode()


@schemathesis.deserializer("application/x-ndjson")
def _ndjson_lines(ctx, response):
    # Each request carries one record, so a good answer is one line, checked against the
    # schema; any other number of lines is a list, which that schema rejects.
    lines = [json.loads(line) for line in response.content.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else lines
'''


def toml_value(value):
    try:
        return str(int(value, 10))
    except ValueError:
        return json.dumps(value)


def select(lines, method, path):
    # By name: separate include-method and include-path filters would match either.
    lines.append("[[operations]]")
    lines.append(f"include-name = {json.dumps(f'{method} {path}')}")


def config(document, hints, skips):
    """A schemathesis.toml with the hints, the skipped operations and, for event streams, a
    shorter request timeout."""
    lines = []
    for name, values in hints:
        lines.append(f"[dictionaries.{name}]")
        lines.append("values = [" + ", ".join(toml_value(v) for v in values) + "]")
    if hints:
        lines.append("[parameters]")
        for name, _ in hints:
            for location in ("path", "query"):
                binding = f'{{ dictionary = "{name}", probability = 0.5 }}'
                lines.append(f'"{location}.{name}" = {binding}')
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            media = {
                media_type
                for response in operation.get("responses", {}).values()
                for media_type in response.get("content", {})
            }
            if "text/event-stream" in media and (method.upper(), path) not in skips:
                select(lines, method.upper(), path)
                lines.append(f"request-timeout = {STREAM_SECS}")
    for method, path in skips:
        select(lines, method, path)
        lines.append("enabled = false")
    return "\n".join(lines) + "\n"


def hint(arg):
    name, sep, values = arg.partition("=")
    if not sep or not name.isidentifier() or not values:
        raise argparse.ArgumentTypeError(f"not NAME=VALUE[,VALUE...]: {arg}")
    return name, values.split(",")


def operation(arg):
    method, sep, path = arg.partition(" ")
    if not sep or not path.startswith("/"):
        raise argparse.ArgumentTypeError(f'not "METHOD PATH": {arg}')
    return method.upper(), path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base_url")
    parser.add_argument("openapi_url")
    parser.add_argument("token")
    parser.add_argument("--hint", type=hint, action="append", default=[])
    parser.add_argument("--skip", type=operation, action="append", default=[])
    parser.add_argument("--checks", default=CHECKS)
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20240917)
    parser.add_argument("--deadline-secs", type=int, default=300)
    args = parser.parse_args()

    # Only the API under test, never through a proxy.
    env = dict(os.environ)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(proxy, None)
        env.pop(proxy.lower(), None)
    env["NO_PROXY"] = env["no_proxy"] = "*"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(args.openapi_url, timeout=30) as response:
        document = json.load(response)

    with tempfile.TemporaryDirectory(prefix="schemathesis-") as work:
        hooks = os.path.join(work, "ndjson_hooks.py")
        with open(hooks, "w") as f:
            f.write(HOOKS)
        toml = os.path.join(work, "schemathesis.toml")
        with open(toml, "w") as f:
            f.write(config(document, args.hint, args.skip))
        schemathesis = os.path.join(os.path.dirname(sys.executable), "schemathesis")
        command = [
            schemathesis,
            "--config-file",
            toml,
            "--no-color",
            "run",
            args.openapi_url,
            "--url",
            args.base_url,
            "--header",
            f"Authorization: Bearer {args.token}",
            "--checks",
            args.checks,
            "--max-examples",
            str(args.max_examples),
            "--seed",
            str(args.seed),
            "--generation-database",
            "none",
            # Generation slows down on a busy machine; that says nothing about the API.
            "--suppress-health-check",
            "too_slow",
            "--workers",
            "1",
            "--request-timeout",
            str(REQUEST_TIMEOUT_SECS),
            "--continue-on-failure",
            "--output-truncate",
            "false",
            # The token is one of a throwaway test instance, and sanitizing would hide the
            # values of `key_format` and the like too, which makes reproductions useless.
            "--output-sanitize",
            "false",
        ]
        if env.get("SCHEMATHESIS_HAR"):
            command += ["--report", "har", "--report-har-path", env["SCHEMATHESIS_HAR"]]
        env["SCHEMATHESIS_HOOKS"] = hooks
        try:
            result = subprocess.run(command, cwd=work, env=env, timeout=args.deadline_secs)
        except subprocess.TimeoutExpired:
            sys.exit(f"schemathesis did not finish in {args.deadline_secs} s")
    if result.returncode != 0:
        sys.exit(f"schemathesis exited with {result.returncode}")
    print("ok")


if __name__ == "__main__":
    main()
