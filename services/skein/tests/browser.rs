//! The gateway in a real browser: `skein dev` runs, headless Chromium opens a page served from
//! another origin (`tests/browser/sse_page.html`, served by `tests/browser/sse_roundtrip.js`),
//! and the page produces records with `fetch()` (a bearer token and a JSON body, so a CORS
//! preflight comes first) and reads them back through `EventSource` on the topic's
//! Server-Sent Events tail.
//!
//! Needs Debian's `chromium` (`/usr/bin/chromium`, or `CHROMIUM`; `.ci/run` installs it) and
//! `playwright-core` from `tests/clients/package.json` (`tests/clients/setup.sh` installs it
//! into `~/.cache/skein/node`, or `SKEIN_NODE_DIR`). No browser is downloaded.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::dev::{Dev, Killed};
const TOPIC: &str = "web";

fn chromium() -> String {
    let path = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        std::path::Path::new(&path).is_file(),
        "{path} is missing: install Debian's chromium (`apt-get install chromium`, as .ci/run does)"
    );
    path
}

fn node_modules() -> String {
    let dir = std::env::var("SKEIN_NODE_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/skein/node",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let modules = format!("{dir}/node_modules");
    if !std::path::Path::new(&format!("{modules}/playwright-core")).is_dir() {
        let setup = format!(
            "{}/../../tests/clients/setup.sh",
            env!("CARGO_MANIFEST_DIR")
        );
        let out = Command::new("bash").arg(&setup).output().unwrap();
        assert!(
            out.status.success(),
            "{setup} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    modules
}

/// Runs the browser script; answers its exit status, stdout and stderr. Killed after 45 s,
/// though the script gives up by itself well before that.
fn run_browser(gateway: &str, token: &str) -> (Option<i32>, String, String) {
    let script = format!(
        "{}/../../tests/browser/sse_roundtrip.js",
        env!("CARGO_MANIFEST_DIR")
    );
    let out_dir = tempfile::tempdir().unwrap();
    let stdout_path = out_dir.path().join("stdout");
    let stderr_path = out_dir.path().join("stderr");
    let mut node = Killed(
        Command::new("node")
            .arg(script)
            .args([gateway, token, TOPIC])
            .env("NODE_PATH", node_modules())
            .env("CHROMIUM", chromium())
            .env("SKEIN_BROWSER_TIMEOUT_MS", "20000")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path).unwrap())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(45);
    let status = loop {
        if let Some(status) = node.0.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(node);
    (
        status,
        std::fs::read_to_string(stdout_path).unwrap(),
        std::fs::read_to_string(stderr_path).unwrap(),
    )
}

/// Whether `id` is `partition:offset` pairs separated by commas, as the gateway's event ids are.
fn is_event_id(id: &str) -> bool {
    common::event_positions(id, TOPIC).is_some_and(|pairs| {
        !pairs.is_empty()
            && pairs.split(',').all(|pair| {
                pair.split_once(':').is_some_and(|(p, o)| {
                    !p.is_empty()
                        && !o.is_empty()
                        && p.bytes().all(|b| b.is_ascii_digit())
                        && o.bytes().all(|b| b.is_ascii_digit())
                })
            })
    })
}

#[test]
fn a_page_on_another_origin_produces_with_fetch_and_tails_with_event_source() {
    let chromium = chromium();
    let modules = node_modules();
    assert!(
        std::path::Path::new(&format!("{modules}/playwright-core")).is_dir(),
        "playwright-core is not in {modules}"
    );

    let data = tempfile::tempdir().unwrap();
    let dev = Dev::start(data.path());
    let gateway = format!("http://{}", dev.rest);
    let dev_token = dev.dev_token.clone();
    dev.create_topic(TOPIC, 2);

    let (code, stdout, stderr) = run_browser(&gateway, &dev_token);
    drop(dev);
    let context =
        format!("chromium {chromium}, exit {code:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("the browser script printed no report; {context}"));
    let report: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}; {context}"));
    assert_eq!(code, Some(0), "{context}");
    assert_eq!(report["ok"], true, "{context}");
    assert_eq!(report["problems"], serde_json::json!([]), "{context}");

    // The page's origin is not the gateway's, so CORS was needed, and a preflight went first.
    let origin = report["origin"].as_str().unwrap();
    assert_ne!(origin, gateway, "{context}");
    assert!(origin.starts_with("http://127.0.0.1:"), "{context}");
    let preflights = report["preflights"].as_array().unwrap();
    assert!(
        preflights.iter().any(|p| {
            let p = p.as_str().unwrap_or_default();
            p.starts_with("OPTIONS ")
                && p.contains(&format!("/v1/topics/{TOPIC}/records"))
                && p.contains("authorization")
        }),
        "{context}"
    );

    // Every record produced came back, in order within its partition, on both partitions.
    assert_eq!(report["produced"], 10, "{context}");
    assert_eq!(report["received"], 10, "{context}");
    let records = report["records"].as_array().unwrap();
    let mut next = [0i64; 2];
    for record in records {
        let partition = usize::try_from(record["partition"].as_i64().unwrap()).unwrap();
        assert!(partition < 2, "{context}");
        assert_eq!(record["offset"], next[partition], "{context}");
        next[partition] += 1;
        let key = record["key"].as_str().unwrap();
        let (batch, seq) = key
            .strip_prefix('b')
            .and_then(|k| k.split_once("-k"))
            .unwrap_or_else(|| panic!("key {key}; {context}"));
        assert_eq!(record["value"]["batch"].to_string(), batch, "{context}");
        assert_eq!(record["value"]["seq"].to_string(), seq, "{context}");
        let id = record["id"].as_str().unwrap();
        assert!(is_event_id(id), "event id {id:?}; {context}");
    }
    assert!(next[0] > 0 && next[1] > 0, "{context}");
    // EventSource.lastEventId: the position of each partition after the last record.
    let last = report["lastEventId"].as_str().unwrap();
    assert!(is_event_id(last), "lastEventId {last:?}; {context}");
    let last = common::event_positions(last, TOPIC).unwrap_or_default();
    let mut pairs: Vec<&str> = last.split(',').collect();
    pairs.sort_unstable();
    assert_eq!(
        pairs,
        [format!("0:{}", next[0]), format!("1:{}", next[1])],
        "{context}"
    );
}
