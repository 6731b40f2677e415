//! The gateway as users meet it: a control-plane process and brokers on a real PostgreSQL,
//! gateway processes in front, tokens signed with real keys (some from a JWKS URL), and
//! confluent-kafka on the native side.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use common::processes::*;
use common::{request, Answer};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

fn key(name: &str) -> String {
    format!(
        "{}/../../crates/skein-token/tests/keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A token for `sub` of `tenant`, signed with the RS256 key configured as `rsa-1`;
/// `extra` claims replace the defaults.
fn token(tenant: &str, sub: &str, extra: Value) -> String {
    sign(Algorithm::RS256, Some("rsa-1"), tenant, sub, extra)
}

fn sign(algorithm: Algorithm, kid: Option<&str>, tenant: &str, sub: &str, extra: Value) -> String {
    let mut claims = json!({"sub": sub, "tenant": tenant, "exp": now() + 600, "aud": "skein"});
    for (k, v) in extra.as_object().unwrap() {
        claims[k] = v.clone();
    }
    let encoding = match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&std::fs::read(key("rsa.pem")).unwrap()),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&std::fs::read(key("ec.pk8.pem")).unwrap()),
        Algorithm::HS256 => Ok(EncodingKey::from_secret(b"not-a-configured-secret")),
        other => panic!("{other:?}"),
    }
    .unwrap();
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    encode(&header, &claims, &encoding).unwrap()
}

/// Serves `tests/keys/jwks.json` over HTTP, as an issuer would; answers its URL.
fn serve_jwks() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let body = std::fs::read_to_string(key("jwks.json")).unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

struct Cluster {
    _postgres: skein_testkit::Postgres,
    _data: Vec<tempfile::TempDir>,
    _processes: Vec<Process>,
    admin: String,
    _controller: String,
    /// tenant → Kafka bootstrap address
    bootstrap: std::collections::HashMap<String, String>,
    gateways: Vec<String>,
}

impl Cluster {
    /// A control plane, one broker for each tenant, and `gateways` gateways.
    fn start(tenants: &[&str], gateways: usize) -> Self {
        let postgres = skein_testkit::Postgres::start().unwrap();
        let url = postgres.database("gateway").unwrap();
        let (cp, admin, controller) = control_plane(&url);
        let mut processes = vec![cp];
        let mut data = Vec::new();
        let mut bootstrap = std::collections::HashMap::new();
        for (node, tenant) in tenants.iter().enumerate() {
            let body = format!(r#"{{"name":"{tenant}"}}"#);
            assert_eq!(admin_call(&admin, "POST", "/v1/tenants", &body).status, 201);
            let dir = tempfile::tempdir().unwrap();
            let (broker, address) = tenant_broker(&controller, dir.path(), tenant, node as i32);
            processes.push(broker);
            data.push(dir);
            bootstrap.insert((*tenant).to_owned(), address);
        }
        let jwks = serve_jwks();
        let public = format!("RS256:{}:rsa-1", key("rsa.pub.pem"));
        let mut addresses = Vec::new();
        for _ in 0..gateways {
            let (gateway, rest) = gateway(
                &controller,
                &[
                    "--jwt-public-key",
                    &public,
                    "--jwks-url",
                    &jwks,
                    "--jwt-audience",
                    "skein",
                    "--cors-origin",
                    "*",
                ],
            );
            processes.push(gateway);
            addresses.push(rest);
        }
        Self {
            _postgres: postgres,
            _data: data,
            _processes: processes,
            admin,
            _controller: controller,
            bootstrap,
            gateways: addresses,
        }
    }

    fn admin(&self, method: &str, path: &str, body: &str) -> Answer {
        admin_call(&self.admin, method, path, body)
    }

    fn topic(&self, tenant: &str, name: &str, partitions: u32) {
        let body = format!(r#"{{"topic_name":"{name}","partitions_count":{partitions}}}"#);
        let created = self.admin("POST", &format!("/v1/tenants/{tenant}/topics"), &body);
        assert_eq!(created.status, 201, "{}", created.body);
    }

    fn allow(
        &self,
        tenant: &str,
        principal: &str,
        resource_type: &str,
        name: &str,
        operation: &str,
    ) {
        let body = json!({
            "principal": format!("User:{principal}"),
            "resource_type": resource_type,
            "resource_name": name,
            "pattern_type": "LITERAL",
            "operation": operation,
            "permission": "ALLOW",
        });
        let created = self.admin(
            "POST",
            &format!("/v1/tenants/{tenant}/acls"),
            &body.to_string(),
        );
        assert!(
            created.status == 201 || created.status == 200,
            "{}",
            created.body
        );
    }

    /// A gateway call with `token` (a full Authorization value when it has a space).
    fn call(&self, gateway: usize, method: &str, path: &str, token: &str, body: &str) -> Answer {
        let authorization = if token.contains(' ') {
            token.to_owned()
        } else {
            format!("Bearer {token}")
        };
        request(
            &self.gateways[gateway],
            method,
            path,
            &[("Authorization", &authorization)],
            body,
        )
    }

    /// Waits until the gateways know a topic (the metadata stream delivers it).
    fn wait_for_topic(&self, token: &str, topic: &str) {
        for gateway in 0..self.gateways.len() {
            wait_for(|| {
                let answer = self.call(gateway, "GET", &format!("/v1/topics/{topic}"), token, "");
                (answer.status == 200).then_some(())
            });
        }
    }

    /// Waits until an ACL change reached every gateway: `probe` answers `status`.
    fn wait_for_status(&self, status: u16, probe: impl Fn(usize) -> Answer) {
        for gateway in 0..self.gateways.len() {
            wait_for(|| (probe(gateway).status == status).then_some(()));
        }
    }
}

fn admin_call(admin: &str, method: &str, path: &str, body: &str) -> Answer {
    request(
        admin,
        method,
        path,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        body,
    )
}

fn b64(text: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn high_watermark(cluster: &Cluster, token: &str, topic: &str, partition: i32) -> i64 {
    let read = cluster.call(
        0,
        "GET",
        &format!("/v1/topics/{topic}/partitions/{partition}/records?offset=latest"),
        token,
        "",
    );
    assert_eq!(read.status, 200, "{}", read.body);
    read.json()["high_watermark"].as_i64().unwrap()
}

#[test]
fn records_cross_between_rest_and_native_kafka_clients_unchanged() {
    let python = python();
    let cluster = Cluster::start(&["acme"], 1);
    cluster.topic("acme", "orders", 3);
    cluster.allow("acme", "alice", "TOPIC", "orders", "ALL");
    let alice = token("acme", "alice", json!({}));
    cluster.wait_for_topic(&alice, "orders");
    let bootstrap = &cluster.bootstrap["acme"];

    // REST → confluent-kafka: key, value, headers and timestamp arrive as sent.
    let body = json!({"records": [{
        "key": "k-rest",
        "value": {"n": 1, "s": "é"},
        "headers": [{"key": "trace", "value": "t-1"}, {"key": "empty", "value": null}],
        "timestamp": 1_700_000_000_456_i64,
    }]});
    let produced = cluster.call(
        0,
        "POST",
        "/v1/topics/orders/records",
        &alice,
        &body.to_string(),
    );
    assert_eq!(produced.status, 200, "{}", produced.body);
    let result = &produced.json()["results"][0];
    let (partition, offset) = (
        result["partition"].as_i64().unwrap(),
        result["offset"].as_i64().unwrap(),
    );
    assert_eq!(result["timestamp"], 1_700_000_000_456_i64);
    let native: Value = serde_json::from_str(&script(
        &python,
        "gateway_roundtrip.py",
        bootstrap,
        &[
            "read",
            "orders",
            &partition.to_string(),
            &offset.to_string(),
        ],
    ))
    .unwrap();
    assert_eq!(native["key"], b64(b"k-rest"));
    assert_eq!(native["value"], b64(r#"{"n":1,"s":"é"}"#.as_bytes()));
    assert_eq!(
        native["headers"],
        json!([["trace", b64(b"t-1")], ["empty", null]])
    );
    assert_eq!(native["timestamp"], 1_700_000_000_456_i64);

    // confluent-kafka → REST: a binary value and header come back in base64, and say so.
    let written: Value = serde_json::from_str(&script(
        &python,
        "gateway_roundtrip.py",
        bootstrap,
        &["produce", "orders"],
    ))
    .unwrap();
    let path = format!(
        "/v1/topics/orders/partitions/{}/records?offset={}&max_records=1",
        written["partition"], written["offset"]
    );
    let read = cluster.call(0, "GET", &path, &alice, "");
    assert_eq!(read.status, 200, "{}", read.body);
    let record = &read.json()["records"][0];
    assert_eq!(record["key"], "native-key");
    assert_eq!(record["value"], b64(b"\x00\x01binary\xff"));
    assert_eq!(
        record["headers"][0],
        json!({"key": "trace", "value": "n-1"})
    );
    assert_eq!(
        record["headers"][1],
        json!({"key": "raw", "value": b64(b"\x00\xfe")})
    );
    assert_eq!(record["base64"], json!(["value", "headers.1"]));
    assert_eq!(record["timestamp"], 1_700_000_000_123_i64);
    assert_eq!(
        read.json()["next_offset"],
        written["offset"].as_i64().unwrap() + 1
    );

    // Asked as base64 throughout, nothing needs a fallback.
    let read = cluster.call(
        0,
        "GET",
        &format!("{path}&value_format=base64&header_format=base64"),
        &alice,
        "",
    );
    assert_eq!(read.json()["records"][0].get("base64"), None);

    // An NDJSON stream: one outcome per line, in order, a bad line refused alone.
    let lines = "{\"key\":\"a\",\"value\":1}\n{\"value\":2,\"partition\":9}\nnot json\n{\"key\":\"a\",\"value\":3}\n";
    let streamed = request(
        &cluster.gateways[0],
        "POST",
        "/v1/topics/orders/records/stream",
        &[
            ("Authorization", &format!("Bearer {alice}")),
            ("Content-Type", "application/x-ndjson"),
        ],
        lines,
    );
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    let outcomes: Vec<Value> = streamed
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outcomes.len(), 4, "{}", streamed.body);
    assert_eq!(outcomes[1]["error"]["status"], 404);
    assert_eq!(outcomes[2]["error"]["status"], 400);
    assert_eq!(
        outcomes[0]["partition"], outcomes[3]["partition"],
        "same key, same partition"
    );
    assert_eq!(
        outcomes[3]["offset"].as_i64(),
        outcomes[0]["offset"].as_i64().map(|o| o + 1)
    );

    // A batch with one bad record: 207, the others written.
    let body =
        json!({"records": [{"value": 1}, {"value": "x", "partition": 5}], "value_format": "json"});
    let mixed = cluster.call(
        0,
        "POST",
        "/v1/topics/orders/records",
        &alice,
        &body.to_string(),
    );
    assert_eq!(mixed.status, 207, "{}", mixed.body);
    assert!(mixed.json()["results"][0]["offset"].is_i64());
    assert_eq!(mixed.json()["results"][1]["error"]["status"], 404);
}

#[test]
fn tokens_acls_quotas_and_tenants_decide_every_call() {
    let cluster = Cluster::start(&["acme", "beta"], 1);
    cluster.topic("acme", "orders", 1);
    cluster.topic("beta", "ledger", 1);
    cluster.allow("acme", "writer", "TOPIC", "orders", "WRITE");
    cluster.allow("acme", "reader", "TOPIC", "orders", "READ");
    cluster.allow("acme", "admin", "TOPIC", "*", "ALL");
    cluster.allow("beta", "admin", "TOPIC", "*", "ALL");
    let writer = token("acme", "writer", json!({}));
    let reader = token("acme", "reader", json!({}));
    let nobody = token("acme", "nobody", json!({}));
    let admin = token("acme", "admin", json!({}));
    cluster.wait_for_topic(&admin, "orders");
    cluster.wait_for_status(200, |g| {
        cluster.call(g, "GET", "/v1/topics/orders", &reader, "")
    });

    let produce = |token: &str| {
        cluster.call(
            0,
            "POST",
            "/v1/topics/orders/records",
            token,
            r#"{"records":[{"value":1}]}"#,
        )
    };
    let read = |token: &str| {
        cluster.call(
            0,
            "GET",
            "/v1/topics/orders/partitions/0/records?offset=0",
            token,
            "",
        )
    };
    // Produce: WRITE allows; READ alone does not, and nothing is written.
    assert_eq!(produce(&writer).status, 200);
    let before = high_watermark(&cluster, &admin, "orders", 0);
    for denied in [&reader, &nobody] {
        let answer = produce(denied);
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json")
        );
    }
    assert_eq!(high_watermark(&cluster, &admin, "orders", 0), before);
    // Read: READ allows; WRITE alone does not.
    assert_eq!(read(&reader).status, 200);
    assert_eq!(read(&writer).status, 403);
    assert_eq!(read(&nobody).status, 403);
    // Describe and list: READ or WRITE imply DESCRIBE; with nothing, describe is refused and
    // the list is empty.
    assert_eq!(
        cluster
            .call(0, "GET", "/v1/topics/orders", &writer, "")
            .status,
        200
    );
    assert_eq!(
        cluster
            .call(0, "GET", "/v1/topics/orders", &nobody, "")
            .status,
        403
    );
    let listed = cluster.call(0, "GET", "/v1/topics", &nobody, "");
    assert_eq!(listed.json()["topics"], json!([]));
    let listed = cluster.call(0, "GET", "/v1/topics", &reader, "");
    assert_eq!(listed.json()["topics"][0]["name"], "orders");

    // Tokens that must not pass: 401 with a problem body, whatever the reason.
    let bad = [
        (
            "expired",
            token("acme", "admin", json!({"exp": now() - 120})),
        ),
        (
            "not yet valid",
            token("acme", "admin", json!({"nbf": now() + 600})),
        ),
        (
            "wrong audience",
            token("acme", "admin", json!({"aud": "elsewhere"})),
        ),
        (
            "unknown kid",
            sign(Algorithm::RS256, Some("nope"), "acme", "admin", json!({})),
        ),
        (
            "HS256 not configured",
            sign(Algorithm::HS256, None, "acme", "admin", json!({})),
        ),
        ("no tenant", token("acme", "admin", json!({"tenant": null}))),
        ("alg none", {
            let unsigned =
                |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
            format!(
                "{}.{}.",
                unsigned(json!({"alg": "none", "typ": "JWT"})),
                unsigned(
                    json!({"sub": "admin", "tenant": "acme", "exp": now() + 600, "aud": "skein"})
                )
            )
        }),
        ("garbage", "not.a.token".to_owned()),
    ];
    for (why, token) in &bad {
        let answer = produce(token);
        assert_eq!(answer.status, 401, "{why}: {}", answer.body);
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"), "{why}");
    }
    assert_eq!(
        request(&cluster.gateways[0], "GET", "/v1/topics", &[], "").status,
        401
    );
    // A key from the JWKS URL (fetched on first sight of its kid) verifies.
    let from_jwks = sign(Algorithm::ES256, Some("ec-jwk"), "acme", "admin", json!({}));
    assert_eq!(
        cluster
            .call(0, "GET", "/v1/topics/orders", &from_jwks, "")
            .status,
        200
    );

    // Tenant isolation: acme's admin may do anything in acme, and nothing touches beta.
    let beta_admin = token("beta", "admin", json!({}));
    cluster.wait_for_topic(&beta_admin, "ledger");
    assert_eq!(
        cluster
            .call(0, "GET", "/v1/topics/ledger", &admin, "")
            .status,
        404
    );
    let listed = cluster.call(0, "GET", "/v1/topics", &admin, "").json();
    assert_eq!(listed["topics"].as_array().unwrap().len(), 1, "{listed}");
    let into_beta = cluster.call(
        0,
        "POST",
        "/v1/topics/ledger/records",
        &admin,
        r#"{"records":[{"value":1}]}"#,
    );
    assert_eq!(into_beta.status, 404);
    assert_eq!(high_watermark(&cluster, &beta_admin, "ledger", 0), 0);
    assert_eq!(
        cluster
            .call(0, "GET", "/v1/topics/orders", &beta_admin, "")
            .status,
        404
    );

    // An API key, as Basic credentials: the principal's ACLs apply.
    let created = cluster.admin(
        "POST",
        "/v1/tenants/acme/principals",
        r#"{"name":"writer","kind":"service_account"}"#,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let key = cluster.admin("POST", "/v1/tenants/acme/principals/writer/api-keys", "");
    assert_eq!(key.status, 201, "{}", key.body);
    let key = key.json();
    let basic = format!(
        "Basic {}",
        b64(format!(
            "{}:{}",
            key["id"].as_str().unwrap(),
            key["secret"].as_str().unwrap()
        )
        .as_bytes())
    );
    assert_eq!(produce(&basic).status, 200);
    assert_eq!(read(&basic).status, 403);
    let wrong = format!(
        "Basic {}",
        b64(format!("{}:{}", key["id"].as_str().unwrap(), "0".repeat(64)).as_bytes())
    );
    assert_eq!(produce(&wrong).status, 401);

    // A request-rate quota for the writer: refused with 429 and Retry-After once used up.
    let quota = cluster.admin(
        "PUT",
        "/v1/tenants/acme/principals/writer/quota",
        r#"{"requests_per_sec":2}"#,
    );
    assert!(quota.status == 200 || quota.status == 201, "{}", quota.body);
    let refused = wait_for(|| {
        let answer = produce(&writer);
        (answer.status == 429).then_some(answer)
    });
    assert!(
        refused
            .header("retry-after")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    // The reader is not limited by the writer's quota.
    assert_eq!(read(&reader).status, 200);
}
