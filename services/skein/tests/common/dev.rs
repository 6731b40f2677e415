//! `skein dev` for the tests: started on ephemeral ports, with what it printed parsed, and
//! killed when dropped (so a failing assertion leaves nothing running).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The text after `marker` up to the end of its line.
pub fn after<'a>(text: &'a str, marker: &str) -> &'a str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {text}"))
        + marker.len();
    text[start..].lines().next().unwrap_or_default()
}

fn first_word(text: &str) -> String {
    text.split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_end_matches(';')
        .to_owned()
}

/// `skein dev` with its data in `data` and every listener on an ephemeral port.
pub fn command(data: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skein"));
    command
        .args([
            "dev",
            "--kafka-listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--gateway-listen",
            "127.0.0.1:0",
            "--gateway-grpc-listen",
            "127.0.0.1:0",
            "--kafka-sasl-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(data);
    command
}

/// A running `skein dev` and the addresses and tokens it printed.
pub struct Dev {
    pub process: Killed,
    /// Everything printed up to "press Ctrl-C".
    pub printed: String,
    /// `host:port` of the Kafka listener, the admin API, the gateway's REST and gRPC.
    pub kafka: String,
    pub admin: String,
    pub rest: String,
    pub grpc: String,
    pub admin_token: String,
    /// May write and read every topic and group of tenant `dev`.
    pub dev_token: String,
}

impl Dev {
    /// `skein dev` with its data in `data`, every listener on an ephemeral port.
    pub fn start(data: &std::path::Path) -> Self {
        Self::start_logging(data, None)
    }

    /// Like [`Dev::start`], with the process's log (stderr) written to `log`.
    pub fn start_logging(data: &std::path::Path, log: Option<&std::path::Path>) -> Self {
        Self::start_with(data, log, &[])
    }

    /// Like [`Dev::start_logging`], with more arguments for `skein dev`.
    pub fn start_with(
        data: &std::path::Path,
        log: Option<&std::path::Path>,
        args: &[&str],
    ) -> Self {
        Self::start_with_env(data, log, args, &[])
    }

    /// Like [`Dev::start_with`], with environment variables for `skein dev` (and the
    /// brokers it starts).
    pub fn start_with_env(
        data: &std::path::Path,
        log: Option<&std::path::Path>,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        };
        let mut child = Killed(
            command(data)
                .args(args)
                .envs(envs.iter().copied())
                .stdout(Stdio::piped())
                .stderr(stderr)
                .spawn()
                .unwrap(),
        );
        let stdout = BufReader::new(child.0.stdout.take().unwrap());
        // Lines go through a channel, so waiting for them has a deadline; the thread keeps
        // draining afterwards so the process never blocks on a full pipe.
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                let _ = lines.send(line);
            }
        });
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !seen.contains("press Ctrl-C") {
            let left = deadline.saturating_duration_since(Instant::now());
            match received.recv_timeout(left) {
                Ok(line) => {
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(e) => {
                    // What the processes wrote to stderr says why, when it was kept.
                    let logged = log
                        .and_then(|path| std::fs::read_to_string(path).ok())
                        .unwrap_or_default();
                    let tail: Vec<&str> = logged.lines().rev().take(40).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    let how = match e {
                        mpsc::RecvTimeoutError::Timeout => "did not start",
                        mpsc::RecvTimeoutError::Disconnected => "exited",
                    };
                    panic!("skein dev {how}: {seen}\nstderr:\n{}", tail.join("\n"))
                }
            }
        }
        let dev_token = after(&seen, "dev token (24 h; ")
            .split_whitespace()
            .next_back()
            .unwrap_or_default()
            .to_owned();
        Self {
            kafka: first_word(after(&seen, "kafka: bootstrap server ")),
            admin: first_word(after(&seen, "admin API: http://")),
            rest: first_word(after(&seen, "gateway: REST http://")),
            grpc: first_word(after(&seen, "gRPC http://")),
            admin_token: after(&seen, "admin token (24 h): ").trim().to_owned(),
            dev_token,
            printed: seen,
            process: child,
        }
    }

    /// Creates a topic of tenant `dev` through the admin API and waits until the gateway
    /// knows it.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        self.create_replicated_topic(name, partitions, 1);
    }

    /// Creates a topic whose partitions have `replicas` copies each.
    pub fn create_replicated_topic(&self, name: &str, partitions: u32, replicas: u32) {
        let (status, body) = super::http(
            &self.admin,
            "POST",
            "/v1/tenants/dev/topics",
            Some(&self.admin_token),
            &format!(
                r#"{{"topic_name":"{name}","partitions_count":{partitions},"replication_factor":{replicas}}}"#
            ),
        );
        assert_eq!(status, 201, "{body}");
        self.wait_for_topic(name);
    }

    /// Waits until the gateway knows a topic.
    pub fn wait_for_topic(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (status, body) = super::http(
                &self.rest,
                "GET",
                &format!("/v1/topics/{name}"),
                Some(&self.dev_token),
                "",
            );
            if status == 200 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway never saw {name}: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
