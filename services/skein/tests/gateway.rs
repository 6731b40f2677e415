//! The gateway as users meet it: a control-plane process and brokers on a real PostgreSQL,
//! gateway processes in front, tokens signed with real keys (some from a JWKS URL), and
//! confluent-kafka on the native side.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use common::grpc;
use common::issuer::{serve_jwks, test_key as key};
use common::processes::*;
use common::{request, Answer};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

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
        Algorithm::HS256 => EncodingKey::from_secret(b"not-a-configured-secret"),
        other => panic!("{other:?}"),
    }
    .unwrap();
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    encode(&header, &claims, &encoding).unwrap()
}

struct Cluster {
    _postgres: skein_testkit::Postgres,
    _data: Vec<tempfile::TempDir>,
    _processes: Vec<Process>,
    gateway_processes: Vec<Process>,
    jwks: String,
    admin: String,
    controller: String,
    /// tenant → Kafka bootstrap address
    bootstrap: std::collections::HashMap<String, String>,
    gateways: Vec<String>,
    /// The gateways' gRPC `host:port`.
    grpc: Vec<String>,
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
        let mut gateway_processes = Vec::new();
        let mut addresses = Vec::new();
        let mut grpc_addresses = Vec::new();
        for _ in 0..gateways {
            let (gateway, rest, grpc) = start_gateway(&controller, &jwks);
            gateway_processes.push(gateway);
            addresses.push(rest);
            grpc_addresses.push(grpc);
        }
        Self {
            _postgres: postgres,
            _data: data,
            _processes: processes,
            gateway_processes,
            jwks,
            admin,
            controller,
            bootstrap,
            gateways: addresses,
            grpc: grpc_addresses,
        }
    }

    /// Stops gateway `index` (SIGTERM) and starts a new one in its place.
    fn restart_gateway(&mut self, index: usize) {
        let (gateway, rest, grpc) = start_gateway(&self.controller, &self.jwks);
        std::mem::replace(&mut self.gateway_processes[index], gateway).stop();
        self.gateways[index] = rest;
        self.grpc[index] = grpc;
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

/// A gateway trusting the test's RS256 key (`rsa-1`) and the keys at `jwks`.
fn start_gateway(controller: &str, jwks: &str) -> (Process, String, String) {
    let public = format!("RS256:{}:rsa-1", key("rsa.pub.pem"));
    gateway(
        controller,
        &[
            "--jwt-public-key",
            &public,
            "--jwks-url",
            jwks,
            "--jwt-audience",
            "skein",
            "--cors-origin",
            "*",
            // A client may keep a connection open through the shutdown: the gateway closes
            // it after this long.
            "--shutdown-grace-secs",
            "3",
            // Every replica opens what any replica sealed.
            "--client-state-key-file",
            &client_state_key(),
        ],
    )
}

/// A client-state key file every gateway of the tests shares.
fn client_state_key() -> String {
    static KEY: std::sync::OnceLock<tempfile::NamedTempFile> = std::sync::OnceLock::new();
    let file = KEY.get_or_init(|| {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "k".repeat(40)).unwrap();
        file
    });
    file.path().display().to_string()
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

    // Group consume: READ on the topic and on the group.
    cluster.allow("acme", "reader", "GROUP", "readers", "READ");
    let join = |token: &str, group: &str| {
        let body = r#"{"topics":["orders"],"session_timeout_ms":6000}"#;
        cluster.call(
            0,
            "POST",
            &format!("/v1/groups/{group}/members"),
            token,
            body,
        )
    };
    cluster.wait_for_status(200, |_| join(&reader, "readers"));
    assert_eq!(join(&reader, "others").status, 403, "no READ on that group");
    assert_eq!(join(&writer, "readers").status, 403, "no READ on the topic");

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
    // A key from the JWKS URL (fetched at start, and again on an unknown kid) verifies.
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
    // A revoked key stops working at once, though the gateway remembered it (it would for a
    // minute): the controller's metadata stream no longer lists it.
    let second = cluster.admin("POST", "/v1/tenants/acme/principals/writer/api-keys", "");
    assert_eq!(second.status, 201, "{}", second.body);
    let second = second.json();
    let second_id = second["id"].as_str().unwrap();
    let revocable = format!(
        "Basic {}",
        b64(format!("{second_id}:{}", second["secret"].as_str().unwrap()).as_bytes())
    );
    assert_eq!(produce(&revocable).status, 200);
    let revoked = cluster.admin(
        "DELETE",
        &format!("/v1/tenants/acme/principals/writer/api-keys/{second_id}"),
        "",
    );
    assert_eq!(revoked.status, 204, "{}", revoked.body);
    wait_for(|| (produce(&revocable).status == 401).then_some(()));

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

    // Byte quotas: a produce that would take more than the bucket holds waits, and a read
    // that brought more than a second's worth makes the next one wait.
    cluster.allow("acme", "bulk", "TOPIC", "orders", "ALL");
    let created = cluster.admin(
        "POST",
        "/v1/tenants/acme/principals",
        r#"{"name":"bulk","kind":"service_account"}"#,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let quota = cluster.admin(
        "PUT",
        "/v1/tenants/acme/principals/bulk/quota",
        r#"{"produce_bytes_per_sec":1000,"fetch_bytes_per_sec":1000}"#,
    );
    assert!(quota.status == 200 || quota.status == 201, "{}", quota.body);
    let bulk = token("acme", "bulk", json!({}));
    let oversized =
        json!({"value_format": "string", "records": [{"value": "x".repeat(1500)}]}).to_string();
    // The ACL and the quota reach the gateway with the metadata stream, not necessarily in
    // the same snapshot: write until the quota holds. A refusal follows an accepted write,
    // whose bytes put the principal in debt.
    let mut accepted = 0;
    let second = wait_for(|| {
        let answer = cluster.call(0, "POST", "/v1/topics/orders/records", &bulk, &oversized);
        match answer.status {
            200 => accepted += 1,
            403 | 429 => {}
            other => panic!("{other}: {}", answer.body),
        }
        (answer.status == 429).then_some(answer)
    });
    assert!(accepted >= 1, "refused before any write");
    assert!(second.header("retry-after").is_some());
    let everything = cluster.call(
        0,
        "GET",
        "/v1/topics/orders/partitions/0/records?offset=0",
        &bulk,
        "",
    );
    assert_eq!(everything.status, 200);
    let next = cluster.call(
        0,
        "GET",
        "/v1/topics/orders/partitions/0/records?offset=0",
        &bulk,
        "",
    );
    assert_eq!(
        next.status, 429,
        "the read before brought over a second's worth"
    );

    // The same decisions over gRPC.
    use skein_proto::gateway as pb;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc::client(&cluster.grpc[0]).await;
        let produce = |topic: &str, token: &str| {
            grpc::authorized(
                pb::ProduceRequest {
                    topic: topic.to_owned(),
                    records: vec![grpc::record("k", "v")],
                },
                token,
            )
        };
        let before = high_watermark(&cluster, &admin, "orders", 0);
        let denied = client
            .produce(produce("orders", &reader))
            .await
            .unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert_eq!(high_watermark(&cluster, &admin, "orders", 0), before);
        for (why, token) in &bad {
            let refused = client.produce(produce("orders", token)).await.unwrap_err();
            assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{why}");
        }
        // Tenant isolation: acme's admin neither sees nor writes beta's topic.
        let missing = client.produce(produce("ledger", &admin)).await.unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);
        let listed = client
            .list_topics(grpc::authorized(pb::ListTopicsRequest {}, &admin))
            .await
            .unwrap()
            .into_inner();
        let names: Vec<&str> = listed.topics.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["orders"]);
        // The writer's request-rate quota: RESOURCE_EXHAUSTED with retry-after.
        let mut exhausted = None;
        for _ in 0..20 {
            if let Err(status) = client.produce(produce("orders", &writer)).await {
                exhausted = Some(status);
                break;
            }
        }
        let exhausted = exhausted.expect("the quota refuses");
        assert_eq!(exhausted.code(), tonic::Code::ResourceExhausted);
        assert!(exhausted.metadata().get("retry-after").is_some());
    });
}

#[test]
fn grpc_produce_and_consume_cross_with_native_clients_and_keep_to_credit() {
    use grpc::*;
    use skein_proto::gateway as pb;
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::Duration;

    let python = python();
    let cluster = Cluster::start(&["acme"], 1);
    cluster.topic("acme", "orders", 1);
    cluster.topic("acme", "events", 6);
    cluster.topic("acme", "cutoff", 1);
    // The group binding first: a gateway that sees the topic binding (waited for below)
    // has seen every binding made before it.
    cluster.allow("acme", "svc", "GROUP", "*", "ALL");
    cluster.allow("acme", "svc", "TOPIC", "*", "ALL");
    cluster.allow("acme", "writer", "TOPIC", "*", "WRITE");
    let svc = token("acme", "svc", json!({}));
    let writer = token("acme", "writer", json!({}));
    cluster.wait_for_topic(&svc, "orders");
    cluster.wait_for_topic(&svc, "events");
    cluster.wait_for_topic(&svc, "cutoff");
    let bootstrap = cluster.bootstrap["acme"].clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = client(&cluster.grpc[0]).await;

        // Unary Produce → confluent-kafka: key, value, headers and timestamp as sent.
        let produced = client
            .produce(authorized(
                pb::ProduceRequest {
                    topic: "orders".into(),
                    records: vec![pb::Record {
                        key: Some(b"g-key".to_vec()),
                        value: Some(b"\x00grpc\xff".to_vec()),
                        headers: vec![pb::Header {
                            key: "trace".into(),
                            value: Some(b"g-1".to_vec()),
                        }],
                        partition: None,
                        timestamp: Some(1_700_000_000_789),
                    }],
                },
                &svc,
            ))
            .await
            .unwrap()
            .into_inner();
        let result = &produced.results[0];
        assert_eq!(result.code, 0, "{}", result.message);
        let native: Value = serde_json::from_str(&script(
            &python,
            "gateway_roundtrip.py",
            &bootstrap,
            &["read", "orders", "0", &result.offset.to_string()],
        ))
        .unwrap();
        assert_eq!(native["key"], b64(b"g-key"));
        assert_eq!(native["value"], b64(b"\x00grpc\xff"));
        assert_eq!(native["headers"], json!([["trace", b64(b"g-1")]]));
        assert_eq!(native["timestamp"], 1_700_000_000_789_i64);

        // confluent-kafka → a Consume stream on named partitions.
        let written: Value = serde_json::from_str(&script(
            &python,
            "gateway_roundtrip.py",
            &bootstrap,
            &["produce", "orders"],
        ))
        .unwrap();
        let mut stream = consume(
            &mut client,
            &svc,
            pb::Subscribe {
                topic: "orders".into(),
                mode: Some(pb::subscribe::Mode::Partitions(
                    pb::PartitionsSubscription {
                        partitions: vec![pb::PartitionStart {
                            partition: 0,
                            position: Some(pb::partition_start::Position::Offset(
                                written["offset"].as_i64().unwrap(),
                            )),
                        }],
                        ..Default::default()
                    },
                )),
                isolation: pb::Isolation::ReadCommitted as i32,
                credit: Some(pb::Credit {
                    records: 100,
                    bytes: 0,
                }),
            },
        )
        .await
        .unwrap();
        let record = loop {
            match stream.next(Duration::from_secs(10)).await.unwrap() {
                pb::consume_response::Kind::Records(batch) => break batch.records[0].clone(),
                _ => continue,
            }
        };
        assert_eq!(record.key.as_deref(), Some(&b"native-key"[..]));
        assert_eq!(record.value.as_deref(), Some(&b"\x00\x01binary\xff"[..]));
        assert_eq!(record.headers[1].value.as_deref(), Some(&b"\x00\xfe"[..]));
        assert_eq!(record.timestamp, 1_700_000_000_123);

        // ProduceStream: 60 keyed records to 6 partitions, reports in order, one refusal.
        let records = (0..61_u64)
            .map(|sequence| {
                let mut record =
                    grpc::record(&format!("k{}", sequence % 12), &format!("v{sequence}"));
                if sequence == 60 {
                    record.partition = Some(99);
                }
                record
            })
            .collect();
        let mut reports = produce_stream(&mut client, &svc, "events", records).await;
        let mut sequences = Vec::new();
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        while let Some(report) = reports.message().await.unwrap() {
            let result = report.result.unwrap();
            sequences.push(report.sequence);
            if report.sequence == 60 {
                assert_eq!(
                    result.code,
                    tonic::Code::NotFound as i32,
                    "{}",
                    result.message
                );
                continue;
            }
            assert_eq!(result.code, 0, "{}", result.message);
            if let Some(previous) = last.insert(result.partition, result.offset) {
                assert!(result.offset > previous, "offsets grow in order");
            }
        }
        assert_eq!(sequences, (0..61).collect::<Vec<_>>());

        // A ProduceStream whose client side breaks off (here: a message over the 4 MB limit
        // after 300 small ones) ends with that error; what was written was reported, and
        // nothing read ahead is written after the break (the client resends what has no
        // report).
        let records = (0..301_u64)
            .map(|sequence| {
                let mut record = grpc::record("k", &format!("c{sequence}"));
                if sequence == 300 {
                    record.value = Some(vec![b'x'; 5 * 1024 * 1024]);
                }
                record
            })
            .collect();
        let mut reports = produce_stream(&mut client, &svc, "cutoff", records).await;
        let mut reported = 0;
        let broke = loop {
            match tokio::time::timeout(Duration::from_secs(30), reports.message())
                .await
                .expect("a report or the end")
            {
                Ok(Some(report)) => {
                    assert_eq!(report.sequence, reported);
                    assert_eq!(report.result.map(|r| r.code), Some(0));
                    reported += 1;
                }
                Ok(None) => panic!("the stream ended without the error"),
                Err(status) => break status,
            }
        };
        assert_eq!(broke.code(), tonic::Code::OutOfRange, "{broke:?}");
        // Wait out anything still being written, then count.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let read = cluster.call(
            0,
            "GET",
            "/v1/topics/cutoff/partitions/0/records?offset=0&max_records=1000",
            &svc,
            "",
        );
        assert_eq!(read.status, 200, "{}", read.body);
        let written: Value = serde_json::from_str(&read.body).unwrap();
        assert_eq!(
            written["records"].as_array().unwrap().len() as u64,
            reported,
            "every record written was reported"
        );

        // A writer without READ cannot consume; without a token nothing at all.
        let refused = consume(&mut client, &writer, group("events", "g", 10)).await;
        assert_eq!(refused.err().unwrap().code(), tonic::Code::PermissionDenied);
        let anonymous = client
            .list_topics(pb::ListTopicsRequest {})
            .await
            .unwrap_err();
        assert_eq!(anonymous.code(), tonic::Code::Unauthenticated);

        // Two streams in one group split six partitions; credit bounds what is unacknowledged.
        let mut a = consume(&mut client, &svc, group("events", "g", 10))
            .await
            .unwrap();
        let mut received_a = 0;
        let mut generation_a = -1;
        let mut last_a: BTreeMap<i32, i64> = BTreeMap::new();
        // Until 10 have come (the group's first join waits out its initial delay), then for
        // two more seconds: no eleventh arrives while nothing is acknowledged.
        let mut quiet_until = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < quiet_until {
            let wait = quiet_until - tokio::time::Instant::now();
            match a.next(wait).await {
                Some(pb::consume_response::Kind::Assignment(assignment)) => {
                    generation_a = assignment.generation;
                }
                Some(pb::consume_response::Kind::Records(batch)) => {
                    received_a += batch.records.len();
                    for r in &batch.records {
                        last_a.insert(r.partition, r.offset);
                    }
                    if received_a >= 10 {
                        quiet_until = tokio::time::Instant::now() + Duration::from_secs(2);
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        assert_eq!(
            received_a, 10,
            "a stream granted 10 records holds at most 10 unacknowledged"
        );
        let next: BTreeMap<i32, i64> = last_a.iter().map(|(p, o)| (*p, o + 1)).collect();
        a.commit(generation_a, &next).await;
        let mut b = consume(&mut client, &svc, group("events", "g", 100))
            .await
            .unwrap();
        let assigned = |kind: Option<pb::consume_response::Kind>| match kind {
            Some(pb::consume_response::Kind::Assignment(a)) => Some(a),
            _ => None,
        };
        let mut split: BTreeMap<&str, pb::Assignment> = BTreeMap::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while split.values().map(|a| a.partitions.len()).sum::<usize>() != 6
            || split.len() != 2
            || split
                .values()
                .map(|a| a.generation)
                .collect::<BTreeSet<_>>()
                .len()
                != 1
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the group did not split: {split:?}"
            );
            tokio::select! {
                kind = a.next(Duration::from_millis(300)) => {
                    if let Some(x) = assigned(kind) { split.insert("a", x); }
                }
                kind = b.next(Duration::from_millis(300)) => {
                    if let Some(x) = assigned(kind) { split.insert("b", x); }
                }
            }
        }
        let a_parts: BTreeSet<i32> = split["a"].partitions.iter().copied().collect();
        let b_parts: BTreeSet<i32> = split["b"].partitions.iter().copied().collect();
        assert!(a_parts.is_disjoint(&b_parts));
        assert_eq!(a_parts.len() + b_parts.len(), 6);

        // Closing one hands its partitions to the other.
        drop(b);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            assert!(std::time::Instant::now() < deadline, "a never took over");
            if let Some(x) = assigned(a.next(Duration::from_secs(1)).await) {
                if x.partitions.len() == 6 {
                    break;
                }
            }
        }
    });
}

#[test]
fn grpc_streams_end_at_token_expiry_and_resume_from_tokens_and_committed_offsets() {
    use grpc::*;
    use skein_proto::gateway as pb;
    use std::collections::BTreeMap;
    use std::time::Duration;

    let mut cluster = Cluster::start(&["acme"], 1);
    cluster.topic("acme", "events", 2);
    // The group binding first: a gateway that sees the topic binding (waited for below)
    // has seen every binding made before it.
    cluster.allow("acme", "svc", "GROUP", "*", "ALL");
    cluster.allow("acme", "svc", "TOPIC", "*", "ALL");
    let svc = token("acme", "svc", json!({}));
    cluster.wait_for_topic(&svc, "events");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = client(&cluster.grpc[0]).await;

        // The health service and reflection answer.
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", cluster.grpc[0]))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let health = tonic_health::pb::health_client::HealthClient::new(channel.clone())
            .check(tonic_health::pb::HealthCheckRequest {
                service: "skein.v1.Gateway".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            health.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
        let mut reflection =
            tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient::new(
                channel,
            );
        let ask = tokio_stream::iter([tonic_reflection::pb::v1::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(
                tonic_reflection::pb::v1::server_reflection_request::MessageRequest::ListServices(
                    String::new(),
                ),
            ),
        }]);
        let mut answers = reflection
            .server_reflection_info(ask)
            .await
            .unwrap()
            .into_inner();
        let listed = format!("{:?}", answers.message().await.unwrap().unwrap());
        assert!(listed.contains("skein.v1.Gateway"), "{listed}");

        // 40 records over two partitions.
        let records: Vec<pb::Record> = (0..40)
            .map(|i| {
                let mut r = record("k", &format!("v{i}"));
                r.partition = Some(i % 2);
                r
            })
            .collect();
        let produced = client
            .produce(authorized(
                pb::ProduceRequest {
                    topic: "events".into(),
                    records,
                },
                &svc,
            ))
            .await
            .unwrap()
            .into_inner();
        assert!(produced.results.iter().all(|r| r.code == 0));

        // A token about to expire: the stream ends with UNAUTHENTICATED; a new token and the
        // last batch's resume token continue exactly after it.
        let short = token("acme", "svc", json!({"exp": now() + 3}));
        let from_start = pb::Subscribe {
            topic: "events".into(),
            mode: Some(pb::subscribe::Mode::Partitions(
                pb::PartitionsSubscription {
                    start: pb::StartFrom::Earliest as i32,
                    ..Default::default()
                },
            )),
            isolation: pb::Isolation::ReadCommitted as i32,
            credit: Some(pb::Credit {
                records: 5,
                bytes: 0,
            }),
        };
        let mut stream = consume(&mut client, &short, from_start).await.unwrap();
        let mut seen: Vec<(i32, i64)> = Vec::new();
        let mut resume = String::new();
        let ended = loop {
            let message = tokio::time::timeout(Duration::from_secs(30), stream.responses.message())
                .await
                .expect("the stream ends within 30 s of its token's expiry");
            match message {
                Ok(Some(pb::ConsumeResponse {
                    kind: Some(pb::consume_response::Kind::Records(batch)),
                })) => {
                    let mut acked = BTreeMap::new();
                    for r in &batch.records {
                        seen.push((r.partition, r.offset));
                        acked.insert(r.partition, r.offset + 1);
                    }
                    resume = batch.resume_token.clone();
                    // Acknowledge slowly, so the token expires mid-topic.
                    tokio::time::sleep(Duration::from_millis(1000)).await;
                    let ack = pb::Commit {
                        offsets: acked
                            .iter()
                            .map(|(p, o)| pb::PartitionOffset {
                                partition: *p,
                                offset: *o,
                            })
                            .collect(),
                        generation: 0,
                        acknowledge_only: true,
                    };
                    let _ = stream
                        .requests
                        .send(pb::ConsumeRequest {
                            kind: Some(pb::consume_request::Kind::Commit(ack)),
                        })
                        .await;
                }
                Ok(Some(_)) => {}
                Ok(None) => panic!("the stream ended without a status"),
                Err(status) => break status,
            }
        };
        assert_eq!(ended.code(), tonic::Code::Unauthenticated, "{ended:?}");
        assert!(
            seen.len() < 40,
            "the token should expire before the end: {}",
            seen.len()
        );
        let resumed = pb::Subscribe {
            topic: "events".into(),
            mode: Some(pb::subscribe::Mode::Partitions(
                pb::PartitionsSubscription {
                    resume_token: resume,
                    ..Default::default()
                },
            )),
            isolation: pb::Isolation::ReadCommitted as i32,
            credit: Some(pb::Credit {
                records: 0,
                bytes: 0,
            }),
        };
        let mut stream = consume(&mut client, &svc, resumed).await.unwrap();
        while seen.len() < 40 {
            let next = stream.next(Duration::from_secs(10)).await;
            if let pb::consume_response::Kind::Records(batch) = next.expect("the rest arrives") {
                seen.extend(batch.records.iter().map(|r| (r.partition, r.offset)));
            }
        }
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 40, "nothing lost and nothing twice: {seen:?}");
        drop(stream);

        // Offsets committed in a group survive a restart of the gateway.
        let mut member = consume(&mut client, &svc, group("events", "keeper", 10))
            .await
            .unwrap();
        let mut generation = -1;
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        while next.values().sum::<i64>() < 6 {
            match member
                .next(Duration::from_secs(30))
                .await
                .expect("records arrive")
            {
                pb::consume_response::Kind::Assignment(a) => generation = a.generation,
                pb::consume_response::Kind::Records(batch) => {
                    for r in batch.records.iter().take(6) {
                        let entry = next.entry(r.partition).or_insert(0);
                        *entry = (*entry).max(r.offset + 1);
                    }
                }
                _ => {}
            }
        }
        member.commit(generation, &next).await;
        loop {
            let next = member.next(Duration::from_secs(10)).await;
            if let pb::consume_response::Kind::Committed(c) = next.expect("a commit answer") {
                assert_eq!(c.code, 0, "{}", c.message);
                break;
            }
        }
        // A commit naming an older generation is refused and changes nothing.
        member
            .commit(generation - 1, &BTreeMap::from([(0, 20)]))
            .await;
        loop {
            let next = member.next(Duration::from_secs(10)).await;
            if let pb::consume_response::Kind::Committed(c) = next.expect("a commit answer") {
                assert_eq!(c.code, tonic::Code::Aborted as i32);
                break;
            }
        }
        drop(member);

        // A stream open when its gateway is told to stop ends with UNAVAILABLE, telling its
        // client to resume elsewhere. The reflection connection above is still open and idle
        // with a response unread: neither holds the gateway's shutdown up.
        let latest = pb::Subscribe {
            topic: "events".into(),
            mode: Some(pb::subscribe::Mode::Partitions(
                pb::PartitionsSubscription {
                    start: pb::StartFrom::Latest as i32,
                    ..Default::default()
                },
            )),
            isolation: pb::Isolation::ReadCommitted as i32,
            credit: None,
        };
        let mut open = consume(&mut client, &svc, latest).await.unwrap();
        assert!(matches!(
            open.next(Duration::from_secs(10)).await,
            Some(pb::consume_response::Kind::Assignment(_))
        ));
        // So does a ProduceStream whose client still has records to send; what was reported
        // is written.
        let (producing, receiver) = tokio::sync::mpsc::channel(16);
        let mut reports = client
            .produce_stream(authorized(
                tokio_stream::wrappers::ReceiverStream::new(receiver),
                &svc,
            ))
            .await
            .unwrap()
            .into_inner();
        for sequence in 0..5_u64 {
            let mut r = record("k", &format!("late{sequence}"));
            r.partition = Some(0);
            producing
                .send(pb::ProduceStreamRequest {
                    topic: "events".into(),
                    sequence,
                    record: Some(r),
                })
                .await
                .unwrap();
            let report = tokio::time::timeout(Duration::from_secs(10), reports.message())
                .await
                .expect("a report")
                .unwrap()
                .expect("a report");
            assert_eq!(report.sequence, sequence);
            assert_eq!(report.result.map(|r| r.code), Some(0));
        }
        cluster.restart_gateway(0);
        let ended = open.end(Duration::from_secs(10)).await;
        assert_eq!(ended.code(), tonic::Code::Unavailable, "{ended:?}");
        let ended = tokio::time::timeout(Duration::from_secs(10), reports.message())
            .await
            .expect("the produce stream ends");
        assert_eq!(
            ended.map(|m| m.is_some()).map_err(|s| s.code()),
            Err(tonic::Code::Unavailable)
        );
        drop((open, producing, reports, client, answers, reflection));
        let mut client = grpc::client(&cluster.grpc[0]).await;
        wait_for_grpc_topic(&mut client, &svc).await;
        // The five records reported before the shutdown were written.
        let read = cluster.call(
            0,
            "GET",
            "/v1/topics/events/partitions/0/records?offset=0&max_records=1000&value_format=string",
            &svc,
            "",
        );
        assert_eq!(read.status, 200, "{}", read.body);
        let read: Value = serde_json::from_str(&read.body).unwrap();
        let late: Vec<&str> = read["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["value"].as_str())
            .filter(|v| v.starts_with("late"))
            .collect();
        assert_eq!(late, ["late0", "late1", "late2", "late3", "late4"]);
        let mut member = consume(&mut client, &svc, group("events", "keeper", 100))
            .await
            .unwrap();
        let mut first: BTreeMap<i32, i64> = BTreeMap::new();
        while first.len() < next.len() {
            if let pb::consume_response::Kind::Records(batch) = member
                .next(Duration::from_secs(30))
                .await
                .expect("records arrive")
            {
                for r in &batch.records {
                    first.entry(r.partition).or_insert(r.offset);
                }
            }
        }
        for (partition, committed) in &next {
            assert_eq!(
                first.get(partition),
                Some(committed),
                "continues from the committed offset"
            );
        }
    });
}

/// Waits until a (new) gateway lists `events`.
async fn wait_for_grpc_topic(
    client: &mut skein_proto::gateway::gateway_client::GatewayClient<tonic::transport::Channel>,
    token: &str,
) {
    for _ in 0..100 {
        let listed = client
            .list_topics(grpc::authorized(
                skein_proto::gateway::ListTopicsRequest {},
                token,
            ))
            .await;
        if listed.is_ok_and(|l| l.into_inner().topics.iter().any(|t| t.name == "events")) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the gateway never listed events");
}

#[test]
fn a_rest_group_member_moves_between_gateways_and_reads_each_record_once() {
    let cluster = Cluster::start(&["acme"], 2);
    cluster.topic("acme", "orders", 3);
    // The group binding first: a gateway that sees the topic binding (waited for below)
    // has seen every binding made before it.
    cluster.allow("acme", "svc", "GROUP", "*", "ALL");
    cluster.allow("acme", "svc", "TOPIC", "*", "ALL");
    let svc = token("acme", "svc", json!({}));
    cluster.wait_for_topic(&svc, "orders");
    let produce = |from: usize, to: usize| {
        let records: Vec<Value> = (from..to)
            .map(|i| json!({"key": format!("k{}", i % 10), "value": i}))
            .collect();
        let body = json!({ "records": records }).to_string();
        let answer = cluster.call(0, "POST", "/v1/topics/orders/records", &svc, &body);
        assert_eq!(answer.status, 200, "{}", answer.body);
    };
    produce(0, 90);

    let joined = cluster.call(
        0,
        "POST",
        "/v1/groups/readers/members",
        &svc,
        r#"{"topics":["orders"],"session_timeout_ms":6000}"#,
    );
    assert_eq!(joined.status, 200, "{}", joined.body);
    let mut cursor = joined.json()["cursor"].as_str().unwrap().to_owned();
    assert_eq!(joined.json()["assignment"].as_array().unwrap().len(), 3);

    // Alternate gateways for every read and commit; no sticky routing.
    let mut seen: Vec<(i64, i64, i64)> = Vec::new();
    for round in 0..60 {
        if seen.len() >= 90 {
            break;
        }
        let path =
            format!("/v1/groups/readers/records?cursor={cursor}&max_records=7&max_wait_ms=200");
        let read = cluster.call(round % 2, "GET", &path, &svc, "");
        assert_eq!(read.status, 200, "{}", read.body);
        let body = read.json();
        for r in body["records"].as_array().unwrap() {
            seen.push((
                r["partition"].as_i64().unwrap(),
                r["offset"].as_i64().unwrap(),
                r["value"].as_i64().unwrap(),
            ));
        }
        cursor = body["cursor"].as_str().unwrap().to_owned();
        let commit = json!({ "cursor": cursor }).to_string();
        let committed = cluster.call(
            (round + 1) % 2,
            "POST",
            "/v1/groups/readers/offsets",
            &svc,
            &commit,
        );
        assert_eq!(committed.status, 200, "{}", committed.body);
    }
    let mut values: Vec<i64> = seen.iter().map(|(_, _, v)| *v).collect();
    values.sort_unstable();
    assert_eq!(
        values,
        (0..90).collect::<Vec<_>>(),
        "every record exactly once"
    );
    for partition in 0..3 {
        let offsets: Vec<i64> = seen
            .iter()
            .filter(|(p, _, _)| *p == partition)
            .map(|(_, o, _)| *o)
            .collect();
        assert!(
            offsets.windows(2).all(|w| w[1] == w[0] + 1),
            "in order: {offsets:?}"
        );
    }

    // The member goes idle: after its session timeout a new member gets every partition and
    // continues from the commits, reading only what came after them.
    let second = cluster.call(
        1,
        "POST",
        "/v1/groups/readers/members",
        &svc,
        r#"{"topics":["orders"],"session_timeout_ms":6000}"#,
    );
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(
        second.json()["assignment"].as_array().unwrap().len(),
        3,
        "{}",
        second.body
    );
    let mut cursor = second.json()["cursor"].as_str().unwrap().to_owned();
    produce(90, 93);
    let mut fresh = Vec::new();
    for round in 0..20 {
        if fresh.len() >= 3 {
            break;
        }
        let path = format!("/v1/groups/readers/records?cursor={cursor}&max_wait_ms=300");
        let read = cluster.call(round % 2, "GET", &path, &svc, "");
        assert_eq!(read.status, 200, "{}", read.body);
        for r in read.json()["records"].as_array().unwrap() {
            fresh.push(r["value"].as_i64().unwrap());
        }
        cursor = read.json()["cursor"].as_str().unwrap().to_owned();
    }
    fresh.sort_unstable();
    assert_eq!(fresh, vec![90, 91, 92]);
    // Leaving ends the membership; a cursor from another group is refused.
    let member = second.json()["member_id"].as_str().unwrap().to_owned();
    let left = cluster.call(
        0,
        "DELETE",
        &format!("/v1/groups/readers/members/{member}"),
        &svc,
        "",
    );
    assert_eq!(left.status, 204, "{}", left.body);
    let wrong = cluster.call(
        0,
        "GET",
        &format!("/v1/groups/other/records?cursor={cursor}"),
        &svc,
        "",
    );
    assert_eq!(wrong.status, 400);
}

#[test]
fn a_retried_request_with_an_idempotency_key_writes_nothing_twice() {
    let cluster = Cluster::start(&["acme"], 2);
    cluster.topic("acme", "orders", 3);
    cluster.allow("acme", "svc", "TOPIC", "*", "ALL");
    let svc = token("acme", "svc", json!({}));
    cluster.wait_for_topic(&svc, "orders");
    let total = |cluster: &Cluster| -> i64 {
        (0..3)
            .map(|p| high_watermark(cluster, &svc, "orders", p))
            .sum()
    };
    let body =
        json!({"records": [{"value": 1}, {"value": 2}, {"key": "k", "value": 3}]}).to_string();
    let send = |gateway: usize, key: &str, body: &str| {
        request(
            &cluster.gateways[gateway],
            "POST",
            "/v1/topics/orders/records",
            &[
                ("Authorization", &format!("Bearer {svc}")),
                ("Idempotency-Key", key),
            ],
            body,
        )
    };
    let first = send(0, "order-42", &body);
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(total(&cluster), 3);
    // The retry, through the other gateway: the first answer again, nothing written.
    let retry = send(1, "order-42", &body);
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(retry.json(), first.json());
    assert_eq!(total(&cluster), 3);
    // The same key for another request is refused; nothing is written.
    let other = send(
        0,
        "order-42",
        &json!({"records": [{"value": 9}]}).to_string(),
    );
    assert_eq!(other.status, 422, "{}", other.body);
    assert_eq!(total(&cluster), 3);
    // Attempts racing through both gateways: one write, one answer.
    let racing =
        json!({"records": (0..20).map(|i| json!({"value": i})).collect::<Vec<_>>()}).to_string();
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let racing = &racing;
                let send = &send;
                scope.spawn(move || send(i % 2, "batch-7", racing))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for answer in &answers {
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.json()["results"], answers[0].json()["results"]);
    }
    assert_eq!(total(&cluster), 23);
    // A request larger than one batch may be (1 MiB) goes as several, in order, and a key
    // covers them all.
    let big_value = "x".repeat(1000);
    let big = json!({"value_format": "string", "records": (0..1500)
        .map(|_| json!({"value": big_value, "partition": 2}))
        .collect::<Vec<_>>()})
    .to_string();
    let written = send(0, "big-1", &big);
    assert_eq!(
        written.status,
        200,
        "{}",
        &written.body[..200.min(written.body.len())]
    );
    let offsets: Vec<i64> = written.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .collect();
    assert!(
        offsets.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive offsets"
    );
    let before = total(&cluster);
    let again = send(1, "big-1", &big);
    assert_eq!(again.json(), written.json());
    assert_eq!(total(&cluster), before);
    let unkeyed = cluster.call(0, "POST", "/v1/topics/orders/records", &svc, &big);
    assert_eq!(unkeyed.status, 200);
    assert_eq!(total(&cluster), before + 1500);

    // Without a key, a repeat writes again.
    assert_eq!(
        cluster
            .call(0, "POST", "/v1/topics/orders/records", &svc, &body)
            .status,
        200
    );
    assert_eq!(total(&cluster), 3026);

    // gRPC Produce takes the key as `idempotency-key` metadata, with the same guarantee.
    use skein_proto::gateway as pb;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = grpc::client(&cluster.grpc[1]).await;
        let keyed = || {
            let mut request = grpc::authorized(
                pb::ProduceRequest {
                    topic: "orders".into(),
                    records: vec![grpc::record("g", "1"), grpc::record("h", "2")],
                },
                &svc,
            );
            request
                .metadata_mut()
                .insert("idempotency-key", "grpc-1".parse().unwrap());
            request
        };
        let first = client.produce(keyed()).await.unwrap().into_inner();
        let again = client.produce(keyed()).await.unwrap().into_inner();
        assert_eq!(first, again);
    });
    assert_eq!(total(&cluster), 3028);
}

/// Reads `count` `record` events from the SSE tail of `topic`; answers (id, data) pairs.
fn sse_events(
    gateway: &str,
    token: &str,
    topic: &str,
    last_event_id: Option<&str>,
    count: usize,
) -> Vec<(String, Value)> {
    sse_read(&mut sse_open(gateway, token, topic, last_event_id), count)
}

/// A tail of `topic` from the start, or after `last_event_id`.
fn sse_open(
    gateway: &str,
    token: &str,
    topic: &str,
    last_event_id: Option<&str>,
) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(gateway).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let resume = last_event_id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
    write!(
        stream,
        "GET /v1/topics/{topic}/events?offset=earliest HTTP/1.1\r\nHost: {gateway}\r\n\
         Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n{resume}\r\n"
    )
    .unwrap();
    std::io::BufReader::new(stream)
}

/// The next `count` events: (id, data).
fn sse_read(
    reader: &mut std::io::BufReader<std::net::TcpStream>,
    count: usize,
) -> Vec<(String, Value)> {
    (0..count)
        .map(|_| sse_next(reader).expect("the stream ended"))
        .collect()
}

/// The next event, or `None` when the stream ends.
fn sse_next(reader: &mut std::io::BufReader<std::net::TcpStream>) -> Option<(String, Value)> {
    use std::io::BufRead;
    let mut id = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("id:") {
            id = rest.trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("data:") {
            return Some((id, serde_json::from_str(rest.trim()).unwrap()));
        }
    }
}

#[test]
fn the_sse_tail_resumes_from_last_event_id_losing_and_repeating_nothing() {
    let mut cluster = Cluster::start(&["acme"], 1);
    cluster.topic("acme", "feed", 2);
    // One binding, so the topic being visible means the permission has arrived too.
    cluster.allow("acme", "svc", "TOPIC", "feed", "ALL");
    let svc = token("acme", "svc", json!({}));
    cluster.wait_for_topic(&svc, "feed");
    let produce = |cluster: &Cluster, values: std::ops::Range<i64>| {
        let records: Vec<Value> = values
            .map(|i| json!({"value": i, "partition": i % 2}))
            .collect();
        let body = json!({ "records": records }).to_string();
        assert_eq!(
            cluster
                .call(0, "POST", "/v1/topics/feed/records", &svc, &body)
                .status,
            200
        );
    };
    produce(&cluster, 0..10);
    // A tail open when its gateway stops ends (so that EventSource reconnects), and resumes
    // on the new one from the last event id it received.
    let mut tail = sse_open(&cluster.gateways[0], &svc, "feed", None);
    let mut first = sse_read(&mut tail, 4);
    cluster.restart_gateway(0);
    while let Some(event) = sse_next(&mut tail) {
        first.push(event);
    }
    let (resume_id, _) = first.last().unwrap().clone();
    cluster.wait_for_topic(&svc, "feed");
    produce(&cluster, 10..20);
    let rest = sse_events(
        &cluster.gateways[0],
        &svc,
        "feed",
        Some(&resume_id),
        20 - first.len(),
    );
    let mut values: Vec<i64> = first
        .iter()
        .chain(&rest)
        .map(|(_, data)| data["value"].as_i64().unwrap())
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..20).collect::<Vec<_>>(), "each record once");
    // Each event id is the positions after its record.
    for (id, data) in first.iter().chain(&rest) {
        let own = format!(
            "{}:{}",
            data["partition"],
            data["offset"].as_i64().unwrap() + 1
        );
        let positions = common::event_positions(id, "feed").unwrap();
        assert!(positions.split(',').any(|p| p == own), "{id} lacks {own}");
    }
    // An event id is sealed: positions written by hand, or an id of another topic, are
    // refused rather than trusted.
    for forged in ["0:0,1:0".to_owned(), resume_id.replacen('.', ".x", 1)] {
        let refused = request(
            &cluster.gateways[0],
            "GET",
            "/v1/topics/feed/events",
            &[
                ("Authorization", &format!("Bearer {svc}")),
                ("Last-Event-ID", &forged),
            ],
            "",
        );
        assert_eq!(refused.status, 400, "{forged}: {}", refused.body);
    }
    // Without READ, no tail.
    let other = token("acme", "other", json!({}));
    let refused = request(
        &cluster.gateways[0],
        "GET",
        "/v1/topics/feed/events",
        &[("Authorization", &format!("Bearer {other}"))],
        "",
    );
    assert_eq!(refused.status, 403);
}

/// A tenant's produce byte quota holds for the tenant as a whole, however many gateway
/// replicas it writes through: each replica's own bucket would allow the full rate, but the
/// broker holds the tenant's traffic to it.
#[test]
fn a_tenants_byte_quota_holds_across_gateway_replicas() {
    let cluster = Cluster::start(&["acme"], 2);
    // Set before the topic exists: a gateway that sees the topic has seen the quota too.
    let quota = cluster.admin(
        "PUT",
        "/v1/tenants/acme/quota",
        r#"{"produce_bytes_per_sec":100000}"#,
    );
    assert_eq!(quota.status, 200, "{}", quota.body);
    cluster.topic("acme", "flow", 1);
    cluster.allow("acme", "svc", "TOPIC", "flow", "ALL");
    let svc = token("acme", "svc", json!({}));
    cluster.wait_for_topic(&svc, "flow");
    let value = "x".repeat(10_000);
    let body = json!({"records": [{"value": value}]}).to_string();
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for gateway in 0..2 {
            let (cluster, svc, body) = (&cluster, &svc, &body);
            scope.spawn(move || {
                let mut written = 0;
                while written < 30 {
                    let answer =
                        cluster.call(gateway, "POST", "/v1/topics/flow/records", svc, body);
                    match answer.status {
                        200 => written += 1,
                        429 => {
                            let secs: f64 = answer
                                .header("retry-after")
                                .and_then(|s| s.parse().ok())
                                .unwrap_or(1.0);
                            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
                        }
                        other => panic!("{other}: {}", answer.body),
                    }
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    // 600 KB at 100 KB/s after one second's burst takes 5 s; the two replicas' own buckets
    // alone would let it through in 2 s.
    assert!(elapsed >= 4.0, "600 KB in {elapsed:.2} s");
}

/// A REST group cursor names the topics it reads; a client that edits it to name a topic
/// its principal may not read gets an error and no record of that topic, as a direct read
/// of the topic does. Cursors are sealed, so an edited one is refused whatever it names.
#[test]
fn an_edited_group_cursor_cannot_read_a_topic_the_principal_may_not() {
    let cluster = Cluster::start(&["acme"], 1);
    cluster.topic("acme", "public", 1);
    cluster.topic("acme", "secret", 1);
    cluster.allow("acme", "admin", "TOPIC", "*", "ALL");
    cluster.allow("acme", "reader", "GROUP", "readers", "READ");
    cluster.allow("acme", "reader", "TOPIC", "public", "READ");
    let admin = token("acme", "admin", json!({}));
    let reader = token("acme", "reader", json!({}));
    cluster.wait_for_topic(&admin, "secret");
    cluster.wait_for_topic(&reader, "public");
    let body = json!({"records": [{"value": "classified"}]}).to_string();
    let written = cluster.call(0, "POST", "/v1/topics/secret/records", &admin, &body);
    assert_eq!(written.status, 200, "{}", written.body);
    let direct = cluster.call(
        0,
        "GET",
        "/v1/topics/secret/partitions/0/records?offset=0",
        &reader,
        "",
    );
    assert_eq!(direct.status, 403, "{}", direct.body);

    let joined = cluster.call(
        0,
        "POST",
        "/v1/groups/readers/members",
        &reader,
        r#"{"topics":["public"],"session_timeout_ms":6000}"#,
    );
    assert_eq!(joined.status, 200, "{}", joined.body);
    let cursor = joined.json()["cursor"].as_str().unwrap().to_owned();
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    // The cursor is sealed: `payload.tag`. An editor changes the payload and keeps the tag,
    // or sends the payload alone as the unsealed cursors of before were.
    let (payload, tag) = cursor.split_once('.').unwrap();
    let decoded: Value = serde_json::from_slice(&engine.decode(payload).unwrap()).unwrap();
    // Positions in the forbidden topic, alone or beside the subscribed one.
    let mut positions_only = decoded.clone();
    positions_only["positions"] = json!({"secret": {"0": 0}});
    let mut both = decoded.clone();
    both["positions"]["secret"] = json!({"0": 0});
    let mut subscribed_too = decoded;
    subscribed_too["topics"] = json!(["public", "secret"]);
    subscribed_too["positions"]["secret"] = json!({"0": 0});
    let forgeries = [positions_only, both, subscribed_too]
        .into_iter()
        .flat_map(|forged| {
            let payload = engine.encode(forged.to_string());
            [format!("{payload}.{tag}"), payload]
        });
    for forged in forgeries {
        let path = format!("/v1/groups/readers/records?cursor={forged}&max_wait_ms=0");
        let read = cluster.call(0, "GET", &path, &reader, "");
        assert!(
            read.status == 400 || read.status == 403,
            "{} {}",
            read.status,
            read.body
        );
        assert!(!read.body.contains("classified"), "{}", read.body);
        let commit = json!({ "cursor": forged }).to_string();
        let committed = cluster.call(0, "POST", "/v1/groups/readers/offsets", &reader, &commit);
        assert!(
            committed.status == 400 || committed.status == 403,
            "{} {}",
            committed.status,
            committed.body
        );
    }
}

/// Reads raw SSE events (name, data) until one named `until` arrives; `None` if the stream
/// ends first.
fn sse_until(reader: &mut std::io::BufReader<std::net::TcpStream>, until: &str) -> Option<String> {
    use std::io::BufRead;
    let mut event = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("event:") {
            event = rest.trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("data:") {
            if event == until {
                return Some(rest.trim().to_owned());
            }
        }
    }
}

/// An SSE tail of `topic` from its start with any Authorization value.
fn sse_open_as(
    gateway: &str,
    authorization: &str,
    topic: &str,
) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(gateway).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /v1/topics/{topic}/events?offset=earliest HTTP/1.1\r\nHost: {gateway}\r\n\
         Authorization: {authorization}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    std::io::BufReader::new(stream)
}

/// Long streams follow the credential and the ACLs as they change: an SSE tail or an NDJSON
/// produce stream opened with an API key ends once the key is revoked, and a tail whose READ
/// binding is removed ends too; nothing is written after the revocation.
#[test]
fn long_streams_end_when_their_key_is_revoked_or_their_acl_removed() {
    use std::io::{BufRead, Write};
    let cluster = Cluster::start(&["acme"], 1);
    cluster.topic("acme", "live", 1);
    let created = cluster.admin(
        "POST",
        "/v1/tenants/acme/principals",
        r#"{"name":"streamer","kind":"service_account"}"#,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    cluster.allow("acme", "watcher", "TOPIC", "live", "READ");
    cluster.allow("acme", "streamer", "TOPIC", "live", "ALL");
    let key = |cluster: &Cluster| {
        let key = cluster.admin("POST", "/v1/tenants/acme/principals/streamer/api-keys", "");
        assert_eq!(key.status, 201, "{}", key.body);
        let key = key.json();
        let id = key["id"].as_str().unwrap().to_owned();
        let basic = format!(
            "Basic {}",
            b64(format!("{id}:{}", key["secret"].as_str().unwrap()).as_bytes())
        );
        (id, basic)
    };
    let revoke = |id: &str| {
        let revoked = cluster.admin(
            "DELETE",
            &format!("/v1/tenants/acme/principals/streamer/api-keys/{id}"),
            "",
        );
        assert_eq!(revoked.status, 204, "{}", revoked.body);
    };
    let (tail_key, tail_basic) = key(&cluster);
    cluster.wait_for_topic(&tail_basic, "live");
    let body = json!({"records": [{"value": "first"}]}).to_string();
    let first = cluster.call(0, "POST", "/v1/topics/live/records", &tail_basic, &body);
    assert_eq!(first.status, 200, "{}", first.body);

    // An SSE tail with an API key ends with `revoked` once the key is.
    let mut tail = sse_open_as(&cluster.gateways[0], &tail_basic, "live");
    assert!(sse_until(&mut tail, "record").is_some());
    revoke(&tail_key);
    let said = sse_until(&mut tail, "revoked").expect("the tail ended without saying why");
    assert!(said.contains("revoked"), "{said}");

    // An SSE tail whose READ binding is removed ends with `forbidden`.
    let watcher = token("acme", "watcher", json!({}));
    let mut watched = sse_open_as(&cluster.gateways[0], &format!("Bearer {watcher}"), "live");
    assert!(sse_until(&mut watched, "record").is_some());
    let removed = cluster.admin(
        "DELETE",
        "/v1/tenants/acme/acls?principal=User:watcher&resource_type=TOPIC&resource_name=live",
        "",
    );
    assert_eq!(removed.status, 200, "{}", removed.body);
    assert!(sse_until(&mut watched, "forbidden").is_some());

    // An NDJSON produce stream with an API key: written while the key holds, refused after.
    let (stream_key, stream_basic) = key(&cluster);
    // The metadata stream lists a new key within a second; a stream that has seen its key
    // listed ends as soon as the list drops it (before that, within 5 s of opening).
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut stream = std::net::TcpStream::connect(&cluster.gateways[0]).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let opened = std::time::Instant::now();
    write!(
        stream,
        "POST /v1/topics/live/records/stream HTTP/1.1\r\nHost: x\r\nAuthorization: {stream_basic}\r\n\
         Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let send_line = |stream: &mut std::net::TcpStream, line: &str| {
        let line = format!("{line}\n");
        write!(stream, "{:x}\r\n{line}\r\n", line.len()).unwrap();
        stream.flush().unwrap();
    };
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    // The reports: JSON lines among the chunk-size lines of the chunked answer.
    let mut next_report = || loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        if line.trim_start().starts_with('{') {
            return Some(serde_json::from_str::<Value>(line.trim()).unwrap());
        }
    };
    send_line(&mut stream, r#"{"value":"while the key holds"}"#);
    let report = next_report().unwrap();
    assert!(report.get("offset").is_some(), "{report}");
    revoke(&stream_key);
    wait_for(|| {
        let refused = cluster.call(0, "GET", "/v1/topics/live", &stream_basic, "");
        (refused.status == 401).then_some(())
    });
    // Past the 5 s within which a stream that never saw its new key listed still trusts
    // it, so that the outcome does not hang on how fast the metadata stream was.
    let since_open = opened.elapsed();
    if since_open < std::time::Duration::from_millis(5500) {
        std::thread::sleep(std::time::Duration::from_millis(5500) - since_open);
    }
    send_line(&mut stream, r#"{"value":"after the revocation"}"#);
    let report = next_report().unwrap();
    assert!(
        report.get("offset").is_none(),
        "written after revocation: {report}"
    );
    assert!(report.to_string().contains("revoked"), "{report}");
    // Only what was written before: "first" and one streamed record.
    let admin = token("acme", "streamer", json!({}));
    assert_eq!(high_watermark(&cluster, &admin, "live", 0), 2);
}

/// The gateway's RSS in bytes, from `/proc`.
fn rss_bytes(process: &Process) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.child.id())).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// A ProduceStream sending `count` records of `LARGE_BYTES` to `uploads`, counting in `sent`
/// each message the stream took; it reads no report until the caller does.
async fn large_produce_stream(
    address: &str,
    token: &str,
    count: usize,
    sent: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> tonic::Streaming<skein_proto::gateway::ProduceReport> {
    use skein_proto::gateway as pb;
    let mut client = grpc::client(address).await;
    let (requests, receiver) = tokio::sync::mpsc::channel::<pb::ProduceStreamRequest>(1);
    tokio::spawn(async move {
        for sequence in 0..count {
            let request = pb::ProduceStreamRequest {
                topic: "uploads".to_owned(),
                sequence: sequence as u64,
                record: Some(pb::Record {
                    value: Some(vec![b'x'; LARGE_BYTES]),
                    ..Default::default()
                }),
            };
            if requests.send(request).await.is_err() {
                return;
            }
            sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    client
        .produce_stream(grpc::authorized(
            tokio_stream::wrappers::ReceiverStream::new(receiver),
            token,
        ))
        .await
        .unwrap()
        .into_inner()
}

const LARGE_BYTES: usize = 3_500_000;

/// Waits until `sent` has not moved for a second.
async fn until_held_back(sent: &std::sync::atomic::AtomicUsize) {
    let mut last = usize::MAX;
    loop {
        let now = sent.load(std::sync::atomic::Ordering::Relaxed);
        if now == last {
            return;
        }
        last = now;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// While the gateway's writes to a tenant's broker cannot complete (the broker is stopped
/// with SIGSTOP), clients keep sending ProduceStream messages of 3.5 MiB. The gateway reads
/// ahead no more than its budgets (16 MiB a stream, a 32 MiB total for this gateway), counted
/// as each message arrives and before anything else (its ACL check included) is done with
/// it: the senders are held back, the gateway's memory stays near where it was, and another
/// tenant is served meanwhile; once the broker runs again, the streams go on. Without the
/// byte budgets each stream read up to 1024 such messages (3.5 GiB) ahead.
#[test]
fn produce_streams_hold_the_gateway_to_its_read_ahead_budget() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    const STREAMS: usize = 4;
    const LARGE: usize = 24;
    const GATEWAY_BUDGET: usize = 32 * 1024 * 1024;

    let mut cluster = Cluster::start(&["acme", "globex"], 0);
    let public = format!("RS256:{}:rsa-1", key("rsa.pub.pem"));
    let (process, rest, grpc_address) = gateway(
        &cluster.controller,
        &[
            "--jwt-public-key",
            &public,
            "--jwt-audience",
            "skein",
            "--client-state-key-file",
            &client_state_key(),
            "--stream-read-ahead-bytes",
            &(16 * 1024 * 1024).to_string(),
            "--read-ahead-bytes",
            &GATEWAY_BUDGET.to_string(),
        ],
    );
    cluster.gateway_processes.push(process);
    cluster.gateways.push(rest);
    cluster.grpc.push(grpc_address.clone());
    let created = cluster.admin(
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"uploads","partitions_count":1,"configs":{"max.message.bytes":"4194304"}}"#,
    );
    assert_eq!(created.status, 201, "{}", created.body);
    cluster.allow("acme", "uploader", "TOPIC", "uploads", "ALL");
    cluster.topic("globex", "orders", 1);
    cluster.allow("globex", "bob", "TOPIC", "orders", "ALL");
    let uploader = token("acme", "uploader", json!({}));
    let bob = token("globex", "bob", json!({}));
    cluster.wait_for_topic(&uploader, "uploads");
    cluster.wait_for_topic(&bob, "orders");
    // The gateway has a connection to acme's broker before the broker stops.
    assert_eq!(high_watermark(&cluster, &uploader, "uploads", 0), 0);

    let acme_broker = cluster._processes[1].child.id().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill")
            .args([name, &acme_broker])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let before = rss_bytes(&cluster.gateway_processes[0]);
    signal("-STOP");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sent: Vec<Arc<AtomicUsize>> = (0..STREAMS).map(|_| Arc::default()).collect();
    let mut peak = before;
    let streams = runtime.block_on(async {
        let mut streams = Vec::new();
        for counter in &sent {
            streams.push(
                large_produce_stream(&grpc_address, &uploader, LARGE, Arc::clone(counter)).await,
            );
        }
        for counter in &sent {
            until_held_back(counter).await;
        }
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            peak = peak.max(rss_bytes(&cluster.gateway_processes[0]));
        }
        streams
    });

    // Meanwhile another tenant writes and reads as usual.
    let written = cluster.call(
        0,
        "POST",
        "/v1/topics/orders/records",
        &bob,
        &json!({"records": [{"value": "still served"}]}).to_string(),
    );
    assert_eq!(written.status, 200, "{}", written.body);
    assert_eq!(high_watermark(&cluster, &bob, "orders", 0), 1);

    let sent: Vec<usize> = sent.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let total: usize = sent.iter().sum();
    // What the gateway holds (32 MiB: 9 messages) plus, per stream, what is in flight
    // between the client's channel and encoder, the HTTP/2 window, and the gateway's decoder
    // and the message waiting for budget.
    assert!(
        total <= GATEWAY_BUDGET / LARGE_BYTES + 5 * STREAMS,
        "the senders got {sent:?} messages of {LARGE} each past the gateway"
    );
    let growth = peak.saturating_sub(before);
    assert!(
        growth < 200 * 1024 * 1024,
        "the gateway grew by {} MiB while {} MiB were pushed at it",
        growth >> 20,
        (STREAMS * LARGE * LARGE_BYTES) >> 20
    );

    // Once the broker runs again, what was held back is written.
    signal("-CONT");
    runtime.block_on(async {
        for mut reports in streams {
            let report = tokio::time::timeout(Duration::from_secs(60), reports.message())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let result = report.result.unwrap();
            assert_eq!(result.code, 0, "{result:?}");
        }
    });
    // The broker's session lapsed while it was stopped: the gateway routes to it again once
    // its next heartbeat is in the metadata.
    wait_for(|| {
        let read = cluster.call(
            0,
            "GET",
            "/v1/topics/uploads/partitions/0/records?offset=latest",
            &uploader,
            "",
        );
        (read.status == 200 && read.json()["high_watermark"].as_i64() >= Some(STREAMS as i64))
            .then_some(())
    });
}
