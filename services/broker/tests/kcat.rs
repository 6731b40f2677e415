//! kcat (librdkafka) against a real broker over TCP. kcat comes from Debian's package;
//! `.ci/run` installs it.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::TestBroker;

fn kcat(args: &[&str], input: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is not installed: apt-get install kcat (.ci/run does)");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kcat_lists_metadata_and_round_trips_1000_keyed_messages() {
    let broker = TestBroker::start();
    let bootstrap = broker.bootstrap();
    let (ok, out, err) = kcat(&["-b", &bootstrap, "-L"], None);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("broker 0 at {bootstrap} (controller)")),
        "{out}"
    );

    let input: String = (0..1000).map(|i| format!("key-{i}:value-{i}\n")).collect();
    let (ok, _, err) = kcat(
        &["-b", &bootstrap, "-P", "-t", "orders", "-K:"],
        Some(&input),
    );
    assert!(ok, "{err}");

    let (ok, out, err) = kcat(
        &[
            "-b",
            &bootstrap,
            "-C",
            "-t",
            "orders",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k:%s@%o\n",
        ],
        None,
    );
    assert!(ok, "{err}");
    let expected: String = (0..1000)
        .map(|i| format!("key-{i}:value-{i}@{i}\n"))
        .collect();
    assert_eq!(out, expected);

    let (ok, out, _) = kcat(&["-b", &bootstrap, "-L", "-t", "orders"], None);
    assert!(ok);
    assert!(out.contains("topic \"orders\" with 1 partitions"), "{out}");
}

#[test]
fn kcat_balanced_consumer_commits_and_resumes() {
    let broker = TestBroker::start();
    let bootstrap = broker.bootstrap();
    let input: String = (0..50).map(|i| format!("k{i}:v{i}\n")).collect();
    let (ok, _, err) = kcat(
        &["-b", &bootstrap, "-P", "-t", "grouped", "-K:"],
        Some(&input),
    );
    assert!(ok, "{err}");
    let consume = |extra: &[&str]| {
        let mut args = vec![
            "-b",
            bootstrap.as_str(),
            "-G",
            "kcat-group",
            "-e",
            "-f",
            "%s\n",
        ];
        args.extend_from_slice(extra);
        args.push("grouped");
        kcat(&args, None)
    };
    let (ok, out, err) = consume(&["-o", "beginning"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 50, "{out}");
    // The group committed on the way out: the next member sees only what came after.
    let (ok, _, err) = kcat(
        &["-b", &bootstrap, "-P", "-t", "grouped", "-K:"],
        Some("k50:v50\n"),
    );
    assert!(ok, "{err}");
    let (ok, out, err) = consume(&[]);
    assert!(ok, "{err}");
    assert_eq!(out, "v50\n");
}
