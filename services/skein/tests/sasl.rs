//! Native Kafka clients authenticate on a SASL_PLAINTEXT listener with the API keys the
//! control plane issues (SASL/PLAIN: key id as user name, secret as password): a broker
//! process started with Kafka's `listeners` on a control-plane process and a real
//! PostgreSQL; confluent-kafka, kafka-python and kcat produce and consume through it; a wrong
//! secret, another tenant's key and a client without SASL are refused; a key revoked while
//! its connection is open stops working within seconds. Principals' SCRAM-SHA-256 and
//! SCRAM-SHA-512 credentials, set through the admin API or Kafka's
//! AlterUserScramCredentials, serve the same clients and kafkajs over SASL_PLAINTEXT and
//! SASL_SSL, and a deleted one stops working as a revoked key does.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::admin::*;
use common::issuer::{serve_jwks, test_key};
use common::processes::*;
use common::tls::*;

/// An API key for a new principal of `tenant`, which may do anything with its topics and
/// groups: (id, secret).
fn api_key(addr: &str, tenant: &str, principal: &str) -> (String, String) {
    new_principal(addr, tenant, principal, TOPICS_AND_GROUPS);
    issue_api_key(addr, tenant, principal)
}

/// Sets the SCRAM credential for `mechanism` of acme's `principal` through the admin API;
/// answers what the API says of it.
fn scram_credential(
    addr: &str,
    principal: &str,
    mechanism: &str,
    password: &str,
    iterations: u32,
) -> serde_json::Value {
    let body = serde_json::json!({ "password": password, "iterations": iterations });
    admin(
        addr,
        "PUT",
        &format!("/v1/tenants/acme/principals/{principal}/scram-credentials/{mechanism}"),
        &body.to_string(),
    )
}

/// The SCRAM credentials of acme's `principal` the admin API lists: (mechanism, iterations),
/// sorted.
fn scram_credentials(addr: &str, principal: &str) -> Vec<(String, u64)> {
    let listed = admin(
        addr,
        "GET",
        &format!("/v1/tenants/acme/principals/{principal}/scram-credentials"),
        "",
    );
    assert_eq!(listed["kind"], "ScramCredentialList", "{listed}");
    let mut credentials: Vec<_> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["mechanism"].as_str().unwrap().to_owned(),
                c["iterations"].as_u64().unwrap(),
            )
        })
        .collect();
    credentials.sort();
    credentials
}

const SASL_CLIENTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/clients/sasl_clients.py"
);

/// Runs a phase of `tests/clients/sasl_clients.py` with `env` set (SKEIN_TEST_MECHANISM,
/// SKEIN_TEST_CA): its JSON answer, or `None` if the client failed, as it may until the
/// broker has the principal's credentials and ACLs.
fn try_sasl_script(
    python: &str,
    bootstrap: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Option<serde_json::Value> {
    // A client that hangs fails the attempt instead of holding up the test.
    let out = Command::new("timeout")
        .args(["--kill-after=10", "120", python, SASL_CLIENTS, bootstrap])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!(
            "sasl_clients.py {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn sasl_script_with(
    python: &str,
    bootstrap: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> serde_json::Value {
    try_sasl_script(python, bootstrap, env, args)
        .unwrap_or_else(|| panic!("sasl_clients.py {args:?} failed"))
}

fn sasl_script(python: &str, bootstrap: &str, args: &[&str]) -> serde_json::Value {
    sasl_script_with(python, bootstrap, &[], args)
}

/// Runs the `revoked` phase (`args`: TOPIC USER PASSWORD): once the client has written,
/// the admin API is asked to DELETE `revocation`, which takes its credential away; answers
/// how long the client's connection went on being served, and what refused it.
fn revoked(
    python: &str,
    bootstrap: &str,
    env: &[(&str, &str)],
    args: &[&str],
    admin_addr: &str,
    revocation: &str,
) -> serde_json::Value {
    let mut client = Command::new(python)
        .args([SASL_CLIENTS, bootstrap, "revoked"])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    admin(admin_addr, "DELETE", revocation, "");
    writeln!(client.stdin.as_mut().unwrap()).unwrap();
    let outcome = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let status = exits_within(&mut client, Duration::from_secs(90));
    assert!(status.success());
    outcome
}

fn kcat(bootstrap: &str, key: &str, secret: &str, args: &[&str], input: &str) -> (bool, String) {
    let settings = [
        "security.protocol=SASL_PLAINTEXT".to_owned(),
        "sasl.mechanisms=PLAIN".to_owned(),
        format!("sasl.username={key}"),
        format!("sasl.password={secret}"),
    ];
    kcat_with(bootstrap, &settings, args, input)
}

/// kcat with `-X` settings.
fn kcat_with(bootstrap: &str, settings: &[String], args: &[&str], input: &str) -> (bool, String) {
    // cargo puts the benchmark's bundled librdkafka (built without TLS) on the library
    // path of tests; kcat must load the system's.
    let mut child = Command::new("timeout")
        .env_remove("LD_LIBRARY_PATH")
        .args(["60", "kcat", "-b", bootstrap])
        .args(settings.iter().flat_map(|s| ["-X", s.as_str()]))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn clients_authenticate_with_api_keys_over_sasl_plain() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("sasl").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    for tenant in ["acme", "globex"] {
        admin(
            &admin_addr,
            "POST",
            "/v1/tenants",
            &format!(r#"{{"name":"{tenant}"}}"#),
        );
    }
    let (key, secret) = api_key(&admin_addr, "acme", "writer");
    let (other_key, other_secret) = api_key(&admin_addr, "globex", "intruder");

    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(
        &controller,
        data.path(),
        &[
            "--listeners",
            "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
        ],
    );
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    let advertised = field(&broker.first_line, "advertised as ");
    assert_eq!(advertised, sasl, "{}", broker.first_line);
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"orders","partitions_count":1}"#,
    );

    // confluent-kafka and kafka-python, authenticated, write and read.
    let roundtrip =
        wait_for(|| try_sasl_script(&python, &sasl, &[], &["roundtrip", "orders", &key, &secret]));
    assert_eq!(roundtrip["confluent"], 5, "{roundtrip}");
    assert_eq!(roundtrip["kafka_python"], 5, "{roundtrip}");

    // kcat too.
    let (ok, out) = kcat(
        &sasl,
        &key,
        &secret,
        &["-P", "-t", "orders", "-p", "0"],
        "from-kcat\n",
    );
    assert!(ok, "{out}");
    let (ok, out) = kcat(
        &sasl,
        &key,
        &secret,
        &[
            "-C",
            "-t",
            "orders",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
        ],
        "",
    );
    assert!(ok && out.contains("from-kcat"), "{out}");

    // A wrong secret, another tenant's key, and a client that does not speak SASL.
    let wrong = sasl_script(&python, &sasl, &["refused", &key, &"0".repeat(40)]);
    assert_eq!(wrong["error"], "authentication", "{wrong}");
    let foreign = sasl_script(&python, &sasl, &["refused", &other_key, &other_secret]);
    assert_eq!(foreign["error"], "authentication", "{foreign}");
    let plain = sasl_script(&python, &sasl, &["plaintext"]);
    assert_ne!(plain["error"], "none", "{plain}");
    let (ok, out) = kcat(&sasl, &key, "wrong", &["-L"], "");
    assert!(!ok, "{out}");

    // A key revoked while its connection is open stops working within seconds.
    let (revocable, revocable_secret) = api_key(&admin_addr, "acme", "temporary");
    let outcome = revoked(
        &python,
        &sasl,
        &[],
        &["orders", &revocable, &revocable_secret],
        &admin_addr,
        &format!("/v1/tenants/acme/principals/temporary/api-keys/{revocable}"),
    );
    assert_eq!(outcome["error"], "authentication", "{outcome}");
    assert!(
        outcome["refused_after_ms"].as_u64().unwrap() < 15_000,
        "{outcome}"
    );

    broker.stop();
    cp.stop();
}

#[test]
fn skein_dev_serves_sasl_plain_with_the_api_key_it_prints() {
    let data = tempfile::tempdir().unwrap();
    let dev = common::dev::Dev::start(data.path());
    let sasl = common::dev::after(&dev.printed, "): bootstrap server ")
        .trim()
        .to_owned();
    let kcat_line = common::dev::after(&dev.printed, "  kcat -b ");
    let setting = |name: &str| {
        common::dev::after(kcat_line, &format!("sasl.{name}="))
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    };
    let (key, secret) = (setting("username"), setting("password"));
    let (ok, out) = kcat(&sasl, &key, &secret, &["-P", "-t", "dev-sasl"], "hello\n");
    assert!(ok, "{out}");
    let (ok, out) = kcat(
        &sasl,
        &key,
        &secret,
        &["-C", "-t", "dev-sasl", "-o", "beginning", "-e", "-q"],
        "",
    );
    assert!(ok && out.contains("hello"), "{out}");
    let (ok, out) = kcat(&sasl, &key, "not-the-secret", &["-L"], "");
    assert!(!ok, "{out}");
    // The dev token the gateway accepts is an OAUTHBEARER token here; a forged one is not.
    let python = python();
    let oauth = sasl_script(&python, &sasl, &["oauth", "dev-sasl", &dev.dev_token]);
    assert_eq!(oauth["confluent"], 3, "{oauth}");
    let mut forged = dev.dev_token.clone();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    let refused = sasl_script(&python, &sasl, &["oauth-refused", &forged]);
    assert_eq!(refused["error"], "authentication", "{refused}");
    // The unauthenticated listener still serves the dev tenant.
    let listed = Command::new("timeout")
        .args(["30", "kcat", "-b", &dev.kafka, "-L", "-t", "dev-sasl"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("dev-sasl"));
}

/// Connects `skein-client` to the SASL_SSL listener `bootstrap` trusting the authority in
/// `ca`, writes one record to `orders` and reads the partition back: the values read, or why
/// it failed.
fn skein_client_roundtrip(
    bootstrap: &str,
    ca: &std::path::Path,
    key: &str,
    secret: &str,
) -> Result<Vec<String>, String> {
    use skein_client::{Client, ClientConfig, ClientTls, FetchOptions, ProduceRecord, Producer};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut config = ClientConfig::new([bootstrap]);
        config.tls = Some(ClientTls::with_ca_file(ca).map_err(|e| e.to_string())?);
        config.sasl_plain = Some(skein_client::SaslPlain {
            authorization_id: String::new(),
            username: key.to_owned(),
            password: secret.to_owned(),
        });
        config.retries = 0;
        let client = Client::connect(config).await.map_err(|e| {
            // The error and its causes, as a log would show them.
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(next) = cause {
                text = format!("{text}: {next}");
                cause = next.source();
            }
            text
        })?;
        let producer = Producer::new(client.clone(), Default::default());
        producer
            .send("orders", [ProduceRecord::new("over-tls")])
            .await
            .map_err(|e| e.to_string())?;
        // One request of 0.9 MiB (under max.message.bytes): many TLS records, beyond the
        // socket's low-water mark and what rustls may hold, so the connection must wake for
        // each part and for the last.
        let bulk = (0..900).map(|i| ProduceRecord::new(vec![(i % 251) as u8; 1024]));
        let produced = producer
            .send("orders", bulk)
            .await
            .map_err(|e| e.to_string())?;
        let acknowledged: usize = produced.iter().map(|b| b.record_count).sum();
        if acknowledged != 900 {
            return Err(format!("{acknowledged} of 900 bulk records acknowledged"));
        }
        let fetched = client
            .fetch("orders", 0, 0, &FetchOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(fetched
            .records
            .iter()
            .filter_map(|r| r.value.as_ref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .filter(|v| v == "over-tls")
            .collect())
    })
}

#[test]
fn tls_listeners_serve_sasl_ssl_and_take_a_renewed_certificate() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("sasl_ssl").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    let (key, secret) = api_key(&admin_addr, "acme", "writer");
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path(), "first");
    certificates(certs.path(), "second");
    let served = certs.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let serve = |name: &str| {
        // Written beside, then renamed in, as a Secret volume is updated.
        for ext in ["pem", "key"] {
            let staged = served.join(format!("next.{ext}"));
            std::fs::copy(certs.path().join(format!("{name}.{ext}")), &staged).unwrap();
            std::fs::rename(&staged, served.join(format!("server.{ext}"))).unwrap();
        }
    };
    serve("first");
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(
        &controller,
        data.path(),
        &[
            "--listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "--ssl-certificate-location",
            served.join("server.pem").to_str().unwrap(),
            "--ssl-key-location",
            served.join("server.key").to_str().unwrap(),
        ],
    );
    let tls = field(&broker.first_line, "(SASL_SSL) on ");
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"orders","partitions_count":1}"#,
    );
    let first_ca = certs.path().join("first-ca.pem");
    let with_ca = [("SKEIN_TEST_CA", first_ca.to_str().unwrap())];
    let roundtrip = wait_for(|| {
        try_sasl_script(
            &python,
            &tls,
            &with_ca,
            &["roundtrip", "orders", &key, &secret],
        )
    });
    assert_eq!(roundtrip["confluent"], 5, "{roundtrip}");
    assert_eq!(roundtrip["kafka_python"], 5, "{roundtrip}");
    // A client that does not speak TLS gets nowhere.
    let plain = sasl_script(&python, &tls, &["plaintext"]);
    assert_ne!(plain["error"], "none", "{plain}");
    // Skein's own client, which the gateway and the replica fetchers use, writes and reads
    // over SASL_SSL; trusting another authority, it does not connect.
    let read_back = skein_client_roundtrip(&tls, &first_ca, &key, &secret).unwrap();
    assert_eq!(read_back, vec!["over-tls".to_owned()]);
    let strangers = certs.path().join("second-ca.pem");
    let refused = skein_client_roundtrip(&tls, &strangers, &key, &secret).unwrap_err();
    assert!(
        refused.contains("certificate") || refused.contains("Certificate"),
        "{refused}"
    );

    let over_tls = |ca: &std::path::Path| {
        let settings = [
            "security.protocol=SASL_SSL".to_owned(),
            format!("ssl.ca.location={}", ca.display()),
            "sasl.mechanisms=PLAIN".to_owned(),
            format!("sasl.username={key}"),
            format!("sasl.password={secret}"),
        ];
        kcat_with(&tls, &settings, &["-L", "-t", "orders"], "")
    };
    let (ok, out) = over_tls(&first_ca);
    assert!(ok, "{out}");
    // A renewed certificate (from another authority here) is served to new connections.
    serve("second");
    let second_ca = certs.path().join("second-ca.pem");
    wait_for(|| over_tls(&second_ca).0.then_some(()));
    let (ok, out) = over_tls(&first_ca);
    assert!(!ok, "{out}");

    broker.stop();
    cp.stop();
}

#[test]
fn clients_authenticate_with_scram_credentials() {
    const PASSWORD: &str = "scram-user-password";
    const ADMIN_PASSWORD: &str = "admin-user-password";
    const CREATED_PASSWORD: &str = "created-by-kafka-password";
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("sasl_scram").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "scram-user", TOPICS_AND_GROUPS);
    let (key, secret) = api_key(&admin_addr, "acme", "writer");

    // The admin API keeps one credential per mechanism and never shows the password again.
    let set = scram_credential(&admin_addr, "scram-user", "SCRAM-SHA-512", PASSWORD, 8192);
    assert_eq!(set["kind"], "ScramCredential", "{set}");
    assert_eq!(set["mechanism"], "SCRAM-SHA-512", "{set}");
    assert_eq!(set["iterations"], 8192, "{set}");
    assert!(!set.to_string().contains(PASSWORD), "{set}");
    scram_credential(&admin_addr, "scram-user", "SCRAM-SHA-256", PASSWORD, 4096);
    assert_eq!(
        scram_credentials(&admin_addr, "scram-user"),
        [
            ("SCRAM-SHA-256".to_owned(), 4096),
            ("SCRAM-SHA-512".to_owned(), 8192)
        ]
    );
    let (status, body) = common::http(
        &admin_addr,
        "PUT",
        "/v1/tenants/acme/principals/nobody/scram-credentials/SCRAM-SHA-512",
        Some(TOKEN),
        r#"{"password":"no-one-to-give-it-to"}"#,
    );
    assert_eq!(status, 404, "{body}");

    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path(), "scram");
    let ca_file = certs.path().join("scram-ca.pem");
    let ca = ca_file.to_str().unwrap();
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(
        &controller,
        data.path(),
        &[
            "--listeners",
            "INTERNAL://127.0.0.1:0,TLS://127.0.0.1:0,CLIENT://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,TLS:SASL_SSL,CLIENT:SASL_PLAINTEXT",
            "--ssl-certificate-location",
            certs.path().join("scram.pem").to_str().unwrap(),
            "--ssl-key-location",
            certs.path().join("scram.key").to_str().unwrap(),
        ],
    );
    let tls = field(&broker.first_line, "(SASL_SSL) on ");
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    for topic in ["orders", "kafkajs-scram", "kafkajs-plain"] {
        admin(
            &admin_addr,
            "POST",
            "/v1/tenants/acme/topics",
            &format!(r#"{{"topic_name":"{topic}","partitions_count":1}}"#),
        );
    }
    let sha256 = [("SKEIN_TEST_MECHANISM", "SCRAM-SHA-256")];
    let sha512 = [("SKEIN_TEST_MECHANISM", "SCRAM-SHA-512")];
    let sha512_tls = [
        ("SKEIN_TEST_MECHANISM", "SCRAM-SHA-512"),
        ("SKEIN_TEST_CA", ca),
    ];

    // confluent-kafka and kafka-python write and read with SCRAM-SHA-512 over SASL_SSL.
    let roundtrip = wait_for(|| {
        try_sasl_script(
            &python,
            &tls,
            &sha512_tls,
            &["roundtrip", "orders", "scram-user", PASSWORD],
        )
    });
    assert_eq!(roundtrip["confluent"], 5, "{roundtrip}");
    assert_eq!(roundtrip["kafka_python"], 5, "{roundtrip}");

    // kcat with SCRAM-SHA-256 over SASL_PLAINTEXT.
    let scram_kcat = |args: &[&str], input: &str| {
        let settings = [
            "security.protocol=SASL_PLAINTEXT".to_owned(),
            "sasl.mechanisms=SCRAM-SHA-256".to_owned(),
            "sasl.username=scram-user".to_owned(),
            format!("sasl.password={PASSWORD}"),
        ];
        kcat_with(&sasl, &settings, args, input)
    };
    let (ok, out) = scram_kcat(&["-P", "-t", "orders", "-p", "0"], "from-kcat\n");
    assert!(ok, "{out}");
    let (ok, out) = scram_kcat(
        &[
            "-C",
            "-t",
            "orders",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
        ],
        "",
    );
    assert!(ok && out.contains("from-kcat"), "{out}");

    // kafkajs with SCRAM-SHA-512 over SASL_SSL, and with an API key (PLAIN) over
    // SASL_PLAINTEXT beside it.
    let kafkajs = |bootstrap: &str, args: &[&str]| -> serde_json::Value {
        let out = node_script("kafkajs_sasl.js", bootstrap, args);
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let scram = kafkajs(
        &tls,
        &["kafkajs-scram", "scram-sha-512", "scram-user", PASSWORD, ca],
    );
    assert_eq!(scram["kafkajs"], 4, "{scram}");
    let plain = kafkajs(&sasl, &["kafkajs-plain", "plain", &key, &secret]);
    assert_eq!(plain["kafkajs"], 4, "{plain}");

    // A wrong password and an unknown user are refused, and so is a SCRAM password given
    // to PLAIN, which takes API keys.
    let wrong = sasl_script_with(
        &python,
        &sasl,
        &sha512,
        &["refused", "scram-user", "not-the-password"],
    );
    assert_eq!(wrong["error"], "authentication", "{wrong}");
    let unknown = sasl_script_with(
        &python,
        &sasl,
        &sha256,
        &["refused", "no-such-user", PASSWORD],
    );
    assert_eq!(unknown["error"], "authentication", "{unknown}");
    let as_plain = sasl_script(&python, &sasl, &["refused", "scram-user", PASSWORD]);
    assert_eq!(as_plain["error"], "authentication", "{as_plain}");

    // Through the Kafka API, a principal allowed to alter the cluster gives a new user a
    // credential, which the admin API then lists and the user logs in with.
    new_principal(
        &admin_addr,
        "acme",
        "admin-user",
        &[("CLUSTER", "kafka-cluster", "ALL")],
    );
    scram_credential(
        &admin_addr,
        "admin-user",
        "SCRAM-SHA-256",
        ADMIN_PASSWORD,
        4096,
    );
    let created = wait_for(|| {
        let answer = try_sasl_script(
            &python,
            &sasl,
            &sha256,
            &[
                "scram-admin",
                "admin-user",
                ADMIN_PASSWORD,
                "created-by-kafka",
                CREATED_PASSWORD,
            ],
        )?;
        answer["error"].is_null().then_some(answer)
    });
    assert_eq!(
        created["described"],
        serde_json::json!([["SCRAM_SHA_512", 8192]]),
        "{created}"
    );
    assert_eq!(
        scram_credentials(&admin_addr, "created-by-kafka"),
        [("SCRAM-SHA-512".to_owned(), 8192)]
    );
    wait_for(|| {
        let login = sasl_script_with(
            &python,
            &sasl,
            &sha512,
            &["refused", "created-by-kafka", CREATED_PASSWORD],
        );
        (login["error"] == "none").then_some(())
    });
    // A principal without ALTER on the cluster may not, and its user gets no credential.
    let denied = sasl_script_with(
        &python,
        &sasl,
        &sha512,
        &[
            "scram-admin",
            "scram-user",
            PASSWORD,
            "not-created",
            "its-password",
        ],
    );
    assert_eq!(denied["error"], "CLUSTER_AUTHORIZATION_FAILED", "{denied}");
    let login = sasl_script_with(
        &python,
        &sasl,
        &sha512,
        &["refused", "not-created", "its-password"],
    );
    assert_eq!(login["error"], "authentication", "{login}");

    // A credential deleted while a connection that logged in with it is open stops working
    // within seconds; the principal's other mechanism still serves.
    let outcome = revoked(
        &python,
        &sasl,
        &sha512,
        &["orders", "scram-user", PASSWORD],
        &admin_addr,
        "/v1/tenants/acme/principals/scram-user/scram-credentials/SCRAM-SHA-512",
    );
    assert_eq!(outcome["error"], "authentication", "{outcome}");
    assert!(
        outcome["refused_after_ms"].as_u64().unwrap() < 15_000,
        "{outcome}"
    );
    assert_eq!(
        scram_credentials(&admin_addr, "scram-user"),
        [("SCRAM-SHA-256".to_owned(), 4096)]
    );
    let other = sasl_script_with(
        &python,
        &sasl,
        &sha256,
        &["refused", "scram-user", PASSWORD],
    );
    assert_eq!(other["error"], "none", "{other}");

    broker.stop();
    cp.stop();
}

/// A token for `sub` of acme signed with the test RSA key under `kid`, expiring in
/// `expires_in` seconds (negative: already expired).
fn rsa_token(kid: &str, sub: &str, expires_in: i64) -> String {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = serde_json::json!({"sub": sub, "tenant": "acme", "exp": now + expires_in});
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_rsa_pem(&std::fs::read(test_key("rsa.pem")).unwrap()).unwrap();
    encode(&header, &claims, &key).unwrap()
}

#[test]
fn oauthbearer_tokens_are_checked_with_the_issuers_jwks() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("sasl_jwks").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "alice", TOPICS_AND_GROUPS);
    let jwks = serve_jwks();
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(
        &controller,
        data.path(),
        &[
            "--listeners",
            "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            "--sasl-oauthbearer-jwks-endpoint-url",
            &jwks,
        ],
    );
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"orders","partitions_count":1}"#,
    );

    // A token signed by a key of the issuer's set, which no flag names, is taken.
    let token = rsa_token("rsa-jwk", "alice", 600);
    let oauth = wait_for(|| {
        try_sasl_script(&python, &sasl, &[], &["oauth", "orders", &token])
            .filter(|answer| answer["confluent"] == 3)
    });
    assert_eq!(oauth["confluent"], 3, "{oauth}");
    // The same key under a kid the set does not list, and an expired token, are refused.
    for refused in [
        rsa_token("not-in-the-set", "alice", 600),
        rsa_token("rsa-jwk", "alice", -600),
    ] {
        let answer = sasl_script(&python, &sasl, &["oauth-refused", &refused]);
        assert_eq!(answer["error"], "authentication", "{answer}");
    }

    broker.stop();
    cp.stop();
}

/// KIP-368: a token's session ends with the token; librdkafka fetches new tokens and
/// re-authenticates on the same connection before then, and writes go on without a break.
#[test]
fn librdkafka_re_authenticates_before_its_token_expires() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("sasl_reauth").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "alice", TOPICS_AND_GROUPS);
    let secrets = tempfile::tempdir().unwrap();
    let secret_file = secrets.path().join("hs256");
    std::fs::write(&secret_file, "a-test-signing-secret-of-32-bytes!").unwrap();
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(
        &controller,
        data.path(),
        &[
            "--listeners",
            "INTERNAL://127.0.0.1:0,CLIENT://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            "--sasl-oauthbearer-jwt-hs256-secret-file",
            secret_file.to_str().unwrap(),
        ],
    );
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"orders","partitions_count":1}"#,
    );
    let secret = secret_file.to_str().unwrap();
    // Tokens of 6 s over 20 s of writes: three sessions at least, on one connection.
    let answer = wait_for(|| {
        try_sasl_script(
            &python,
            &sasl,
            &[],
            &["reauth", "orders", secret, "20", "6"],
        )
    });
    eprintln!("re-authentication: {answer}");
    assert!(answer["sent"].as_u64().unwrap() >= 30, "{answer}");
    assert_eq!(answer["delivered"], answer["sent"], "{answer}");
    assert!(answer["tokens"].as_u64().unwrap() >= 3, "{answer}");
    // Without re-authentication the broker closes the connection as each token expires,
    // which librdkafka reports as the broker going down.
    assert_eq!(answer["errors"], serde_json::json!([]), "{answer}");

    broker.stop();
    cp.stop();
}

/// A client certificate for `subject` signed by the authority `<authority>-ca.pem` in `dir`
/// (made by [`certificates`]), as `<name>.pem` and `<name>.key`.
fn client_certificate(dir: &std::path::Path, authority: &str, name: &str, subject: &str) {
    signed(dir, authority, name, subject, "extendedKeyUsage=clientAuth");
}

/// An SSL listener that requires client certificates names each client's principal by
/// its certificate's subject, through Kafka's ssl.principal.mapping.rules, and authorizes
/// it with the tenant's ACLs.
#[test]
fn client_certificates_name_principals_on_ssl_listeners() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("mtls").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "alice", TOPICS_AND_GROUPS);
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path(), "server");
    // The clients' authority is another than the server's.
    certificates(certs.path(), "clients");
    client_certificate(
        certs.path(),
        "clients",
        "alice",
        "/C=US/O=Acme/OU=payments/CN=Alice",
    );
    client_certificate(
        certs.path(),
        "clients",
        "mallory",
        "/C=US/O=Acme/OU=payments/CN=mallory",
    );
    // Signed by the server's authority, which clients' certificates may not be.
    client_certificate(
        certs.path(),
        "server",
        "forged",
        "/C=US/O=Acme/OU=payments/CN=alice",
    );
    let data = tempfile::tempdir().unwrap();
    let broker = acme_broker(
        &controller,
        data.path(),
        &[
            "--listeners",
            "INTERNAL://127.0.0.1:0,TLS://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,TLS:SSL",
            "--ssl-client-auth",
            "required",
            "--ssl-principal-mapping-rules",
            "RULE:^CN=([^,]*),OU=payments,.*$/$1/L,DEFAULT",
            "--ssl-truststore-location",
            certs.path().join("clients-ca.pem").to_str().unwrap(),
            "--ssl-certificate-location",
            certs.path().join("server.pem").to_str().unwrap(),
            "--ssl-key-location",
            certs.path().join("server.key").to_str().unwrap(),
        ],
    );
    let tls = field(&broker.first_line, "(SSL) on ");
    admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"orders","partitions_count":1}"#,
    );
    let server_ca = certs.path().join("server-ca.pem");
    let with_ca = [("SKEIN_TEST_CA", server_ca.to_str().unwrap())];
    let client = |name: &str| {
        let (cert, key) = if name == "-" {
            ("-".to_owned(), "-".to_owned())
        } else {
            (
                certs
                    .path()
                    .join(format!("{name}.pem"))
                    .display()
                    .to_string(),
                certs
                    .path()
                    .join(format!("{name}.key"))
                    .display()
                    .to_string(),
            )
        };
        try_sasl_script(&python, &tls, &with_ca, &["mtls", "orders", &cert, &key])
    };
    // CN=Alice,OU=payments,... maps to alice, whose ACLs allow her topics and groups.
    let alice = wait_for(|| client("alice").filter(|answer| answer["confluent"] == 3));
    assert_eq!(alice["confluent"], 3, "{alice}");
    // mallory authenticates, and is held to his (absent) ACLs.
    let mallory = client("mallory").unwrap();
    assert_eq!(mallory["error"], "TOPIC_AUTHORIZATION_FAILED", "{mallory}");
    // Without a certificate, or with one from another authority, the handshake fails.
    for refused in ["-", "forged"] {
        let answer = client(refused).unwrap();
        assert!(
            answer["confluent"].is_null() && answer["error"] != "none",
            "{refused}: {answer}"
        );
    }

    broker.stop();
    cp.stop();
}
