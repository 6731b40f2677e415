//! The README's gateway walkthrough against `skein dev`, with the same commands: curl creates
//! a topic through the admin API and produces through the gateway's REST API, and the short
//! Python client (`tests/clients/grpc_consume.py`) consumes it over gRPC in a group.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::dev::Dev;
use common::processes::python;

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--fail-with-body", "--max-time", "60"])
        .args(args)
        .output()
        .expect("curl is installed (.ci/run installs it)");
    assert!(
        out.status.success(),
        "curl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_readme_walkthrough_produces_with_curl_and_consumes_over_grpc() {
    let python = python();
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    assert!(dev.printed.contains("gRPC http://"), "{}", dev.printed);

    let created = curl(&[
        "-X",
        "POST",
        &format!("http://{}/v1/tenants/dev/topics", dev.admin),
        "-H",
        &format!("Authorization: Bearer {}", dev.admin_token),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"topic_name":"orders","partitions_count":3}"#,
    ]);
    assert!(created.contains(r#""topic_name":"orders""#), "{created}");
    // Read-your-writes: the gateway takes the topic at once, asking the controller when its
    // metadata stream has not brought it yet.
    let produced = curl(&[
        "-X",
        "POST",
        &format!("http://{}/v1/topics/orders/records", dev.rest),
        "-H",
        &format!("Authorization: Bearer {}", dev.dev_token),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"records":[{"key":"alice","value":{"item":"book","qty":1}},{"key":"bob","value":{"item":"pen","qty":3}}]}"#,
    ]);
    assert!(produced.contains(r#""offset":"#), "{produced}");

    let script = format!(
        "{}/../../tests/clients/grpc_consume.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new("timeout")
        .args(["--kill-after=10", "120", python.as_str()])
        .arg(script)
        .args(["--gateway", &dev.grpc, "--token", &dev.dev_token])
        .args(["--topic", "orders", "--group", "billing", "--max", "2"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed.contains("# assigned partitions"), "{printed}");
    assert!(
        printed.contains("\talice\t{\"item\":\"book\",\"qty\":1}"),
        "{printed}"
    );
    assert!(
        printed.contains("\tbob\t{\"item\":\"pen\",\"qty\":3}"),
        "{printed}"
    );
}

#[test]
fn a_topic_created_through_the_admin_api_takes_rest_records_at_once() {
    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    for i in 0..5 {
        let topic = format!("fresh-{i}");
        let created = curl(&[
            "-X",
            "POST",
            &format!("http://{}/v1/tenants/dev/topics", dev.admin),
            "-H",
            &format!("Authorization: Bearer {}", dev.admin_token),
            "-H",
            "Content-Type: application/json",
            "-d",
            &format!(r#"{{"topic_name":"{topic}","partitions_count":2}}"#),
        ]);
        assert!(created.contains(&topic), "{created}");
        // No waiting: curl's --fail-with-body fails the test on a 404.
        let produced = curl(&[
            "-X",
            "POST",
            &format!("http://{}/v1/topics/{topic}/records", dev.rest),
            "-H",
            &format!("Authorization: Bearer {}", dev.dev_token),
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"records":[{"key":"k","value":"v"}]}"#,
        ]);
        assert!(produced.contains(r#""offset":"#), "{topic}: {produced}");
    }
    // A name nobody created is still 404, with a problem body.
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .arg(format!("http://{}/v1/topics/never-made/records", dev.rest))
        .args(["-H", &format!("Authorization: Bearer {}", dev.dev_token)])
        .args(["-H", "Content-Type: application/json"])
        .args(["-d", r#"{"records":[{"key":"k","value":"v"}]}"#])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
}
