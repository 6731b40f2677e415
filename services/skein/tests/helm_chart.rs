//! The Helm chart (`helm/skein`), checked without a cluster by `tests/helm/check_chart.py`:
//! Helm's lint and render (Helm's Go SDK through helm-python-sdk) for every values file in
//! `helm/skein/ci/`, each rendered object validated against the Kubernetes schemas in strict
//! mode, what operators rely on asserted on the renders, and broken values refused by the
//! schema with the offending key named. And the rendered pods, run as local processes as
//! their containers say (`tests/helm/run_rendered.py`), form a cluster: the chart and the
//! binary cannot drift apart.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

/// Runs `tests/helm/<script>` on the chart with `args` after it; asserts it succeeded and
/// answers what it printed.
fn run_script(script: &str, args: &[&str]) -> String {
    let python = std::env::var("SKEIN_PYTHON").unwrap_or_else(|_| common::processes::python());
    let root = format!("{}/../..", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(&python)
        .arg(format!("{root}/tests/helm/{script}"))
        .arg(format!("{root}/helm/skein"))
        .args(args)
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    printed
}

#[test]
fn the_chart_lints_renders_and_validates_for_every_values_file() {
    let printed = run_script("check_chart.py", &[]);
    assert!(printed.contains("chart ok"), "{printed}");
    // All five values files were rendered and validated.
    for values in [
        "default",
        "tls",
        "external-access",
        "single-broker",
        "bundled-postgresql",
    ] {
        assert!(
            printed.contains(&format!("ok {values}-values.yaml")),
            "{values}:\n{printed}"
        );
    }
}

#[test]
fn the_rendered_pods_run_as_local_processes_form_a_cluster() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("rendered").unwrap();
    let printed = run_script("run_rendered.py", &[common::processes::SKEIN, &url]);
    for broker in 0..3 {
        assert!(
            printed.contains(&format!("ok demo-skein-broker-{broker} ready")),
            "{printed}"
        );
    }
    assert!(printed.contains("cluster formed: 3 brokers"), "{printed}");
}
