//! The gateway's and the admin API's OpenAPI documents, fuzzed with schemathesis
//! (`tests/clients/schemathesis_run.py`) against a `skein dev` process: no operation may
//! answer with a server error (5xx), and every body must match the document's schema for its
//! status.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::dev::Dev;

/// The last lines of a log file.
fn log_tail(log: &std::path::Path) -> String {
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The interpreter with schemathesis: `SKEIN_PYTHON`, or the environment that
/// `tests/clients/setup.sh` creates (and, on first use, fills from PyPI).
fn python() -> String {
    std::env::var("SKEIN_PYTHON").unwrap_or_else(|_| common::processes::python())
}

/// Runs `tests/clients/schemathesis_run.py` against `base` (an `http://` URL) and its
/// document at `{base}/openapi.json`, with `token` and the runner's `args`.
fn fuzz(
    dev: &mut Dev,
    log: &std::path::Path,
    python: &str,
    base: &str,
    token: &str,
    args: &[&str],
) {
    let script = format!(
        "{}/../../tests/clients/schemathesis_run.py",
        env!("CARGO_MANIFEST_DIR")
    );
    // A run that hangs fails after 15 minutes instead of holding the suite up.
    let out = Command::new("timeout")
        .args(["--kill-after=10", "900", python])
        .arg(&script)
        .arg(base)
        .arg(format!("{base}/openapi.json"))
        .arg(token)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("failed to run {python} {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "schemathesis against {base} failed\nstdout:\n{stdout}\nstderr:\n{stderr}\n\
         skein dev's log (last lines):\n{}",
        log_tail(log)
    );
    assert!(
        dev.process.0.try_wait().unwrap().is_none(),
        "skein dev exited during the run against {base}\n{}",
        log_tail(log)
    );
}

#[test]
fn schemathesis_finds_no_server_error_in_the_gateway_or_the_admin_api() {
    let python = python();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("skein-dev.log");
    let mut dev = Dev::start_logging(data.path(), Some(&log));
    // A topic for the fuzzed requests to reach, besides the made-up names that answer 404.
    dev.create_topic("orders", 3);
    let (gateway, admin) = (dev.rest.clone(), dev.admin.clone());
    let (dev_token, admin_token) = (dev.dev_token.clone(), dev.admin_token.clone());

    fuzz(
        &mut dev,
        &log,
        &python,
        &format!("http://{gateway}"),
        &dev_token,
        &["--hint", "topic=orders", "--hint", "partition=0,1,2"],
    );
    // Last: the fuzzed requests delete tenants and topics, `dev` among them.
    fuzz(
        &mut dev,
        &log,
        &python,
        &format!("http://{admin}"),
        &admin_token,
        &["--hint", "tenant=dev", "--hint", "topic=orders"],
    );
}
