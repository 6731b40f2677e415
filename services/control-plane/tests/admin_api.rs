//! The admin API over HTTP against a running server: every endpoint, authentication, bad
//! input (nothing written on any rejection), and the committed OpenAPI document.

#![allow(clippy::unwrap_used)]

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::{Client, Method, Response, StatusCode};
use serde_json::{json, Value};
use skein_catalog::Catalog;
use std::sync::Arc;

use skein_control_plane::{
    serve_admin, AdminApi, AdminAuth, AdminState, ControllerConfig, JwtConfig, Leadership,
    LeaseKeeper, TopicOps,
};
use utoipa::OpenApi;

const BOOTSTRAP: &str = "bootstrap-secret-for-tests";
const JWT_SECRET: &[u8] = b"a-development-signing-secret-of-32-bytes";

struct Server {
    base: String,
    http: Client,
    token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    keeper: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(url: Option<String>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = url.unwrap_or_else(|| format!("sqlite:{}", dir.path().join("c.db").display()));
        let catalog = Catalog::open(&url).await.unwrap();
        let jwt = JwtConfig::hs256(JWT_SECRET);
        let token = jwt.issue_admin_token("ops@example.com", 600).unwrap();
        // An active controller with two live brokers, for the topic endpoints.
        let config = ControllerConfig::new("admin-test");
        let leadership = Arc::new(Leadership::default());
        let keeper = LeaseKeeper::spawn(catalog.clone(), config.clone(), Arc::clone(&leadership));
        for node in [1, 2] {
            catalog
                .register_broker(
                    &skein_catalog::NewBroker {
                        node_id: node,
                        host: "127.0.0.1",
                        port: 9092,
                        rack: None,
                        tenant: None,
                        advertised_listeners: None,
                    },
                    "test",
                )
                .await
                .unwrap();
        }
        while leadership.active_epoch().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let state = AdminState {
            catalog: catalog.clone(),
            auth: AdminAuth {
                bootstrap_token: Some(BOOTSTRAP.to_owned()),
                jwt: Some(jwt),
            },
            topics: Some(TopicOps::new(catalog, config, leadership)),
            sink_key: None,
            sink_targets: skein_sink::TargetPolicy::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve_admin(listener, state, async {
            let _ = stopped.await;
        }));
        Self {
            base,
            http: Client::new(),
            token,
            stop: Some(stop),
            keeper,
            _dir: dir,
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.unwrap()).await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.keeper.abort();
    }
}

async fn read(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let problem = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "application/problem+json");
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    if status.is_client_error() || status.is_server_error() {
        assert!(problem, "{status} without a problem body: {body}");
        assert_eq!(body["status"], status.as_u16(), "{body}");
        assert!(
            body["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{body}"
        );
    }
    (status, body)
}

fn names(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let generated = AdminApi::openapi().to_pretty_json().unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/admin.json");
    if std::env::var_os("SKEIN_UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/admin.json is stale; regenerate it with \
         SKEIN_UPDATE_OPENAPI=1 cargo test -p skein-control-plane --test admin_api"
    );
}

#[tokio::test]
async fn credentials_are_checked_before_anything_happens() {
    let server = Server::start(None).await;
    let url = format!("{}/v1/tenants", server.base);
    let post = |token: Option<String>| {
        let mut request = server.http.post(&url).json(&json!({"name": "acme"}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    // No token, a wrong token, a token signed with another key, an unsigned token: 401.
    let other_key = JwtConfig::hs256(b"another-secret-entirely-32-bytes!!")
        .issue_admin_token("mallory", 600)
        .unwrap();
    let unsigned = {
        let claims = format!(
            r#"{{"sub":"x","exp":{},"roles":["admin"]}}"#,
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + 600
        );
        let b64 = |s: &str| {
            use std::fmt::Write;
            // base64url without padding, enough for a test token
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let bytes = s.as_bytes();
            let mut out = String::new();
            for chunk in bytes.chunks(3) {
                let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b))
                    << (8 * (3 - chunk.len()));
                for i in 0..=chunk.len() {
                    let _ = out.write_char(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        };
        format!("{}.{}.", b64(r#"{"alg":"none","typ":"JWT"}"#), b64(&claims))
    };
    for token in [
        None,
        Some("nonsense".to_owned()),
        Some(other_key),
        Some(unsigned),
    ] {
        let response = post(token.clone()).await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap()),
            Some("Bearer")
        );
        let (status, _) = read(response).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
    }
    // An expired admin token: 401. A valid token without the admin role: 403.
    let jwt = JwtConfig::hs256(JWT_SECRET);
    let mut expired_claims = serde_json::Map::new();
    expired_claims.insert("sub".into(), json!("ops"));
    expired_claims.insert("exp".into(), json!(1_000_000_000));
    expired_claims.insert("roles".into(), json!(["admin"]));
    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &expired_claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET).unwrap(),
    )
    .unwrap();
    assert_eq!(
        read(post(Some(expired)).await.unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );
    // A token the same key signed with the admin role but for another audience, or none
    // (a tenant's token, where one key signs both): 401.
    for audience in [None, Some("skein-gateway")] {
        let mut claims = expired_claims.clone();
        claims.insert("exp".into(), json!(4_000_000_000u64));
        if let Some(audience) = audience {
            claims.insert("aud".into(), json!(audience));
        }
        let token = jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET).unwrap(),
        )
        .unwrap();
        assert_eq!(
            read(post(Some(token)).await.unwrap()).await.0,
            StatusCode::UNAUTHORIZED,
            "audience {audience:?}"
        );
    }
    let mut reader_claims = expired_claims.clone();
    reader_claims.insert("exp".into(), json!(4_000_000_000u64));
    reader_claims.insert("roles".into(), json!(["reader"]));
    reader_claims.insert("aud".into(), json!("skein-admin"));
    let reader = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &reader_claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET).unwrap(),
    )
    .unwrap();
    assert_eq!(
        read(post(Some(reader)).await.unwrap()).await.0,
        StatusCode::FORBIDDEN
    );
    drop(jwt);
    // Nothing was written by any of those.
    assert!(names(&server.call(Method::GET, "/v1/tenants", None).await.1).is_empty());
    // The bootstrap token and an admin JWT both work.
    assert_eq!(
        read(post(Some(BOOTSTRAP.to_owned())).await.unwrap())
            .await
            .0,
        StatusCode::CREATED
    );
    let (status, _) = server.call(Method::GET, "/v1/tenants/acme", None).await;
    assert_eq!(status, StatusCode::OK);
    // The OpenAPI document needs no token.
    let doc = server
        .http
        .get(format!("{}/openapi.json", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(doc.status(), StatusCode::OK);
}

#[tokio::test]
async fn bad_input_gets_a_problem_and_writes_nothing() {
    let server = Server::start(None).await;
    let url = format!("{}/v1/tenants", server.base);
    let raw = |body: Vec<u8>, content_type: &str| {
        server
            .http
            .post(&url)
            .bearer_auth(&server.token)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(Vec<u8>, &str, StatusCode)> = vec![
        (
            b"{\"name\": ".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"{\"name\": \"acme\", \"color\": \"red\"}".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"{\"name\": 7}".to_vec(),
            "application/json",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"name=acme".to_vec(),
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            format!("{{\"name\": \"{}\"}}", "a".repeat(100_000)).into_bytes(),
            "application/json",
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            b"{\"name\": \"Not Valid!\"}".to_vec(),
            "application/json",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ];
    for (body, content_type, expected) in cases {
        let (status, problem) = read(raw(body, content_type).await.unwrap()).await;
        assert_eq!(status, expected, "{problem}");
    }
    for (path, expected) in [
        ("/v1/tenants?page_size=0", StatusCode::BAD_REQUEST),
        ("/v1/tenants?page_size=abc", StatusCode::BAD_REQUEST),
        ("/v1/tenants?colour=red", StatusCode::BAD_REQUEST),
        ("/v1/tenants/nobody", StatusCode::NOT_FOUND),
        ("/v1/nothing-here", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(
            server.call(Method::GET, path, None).await.0,
            expected,
            "{path}"
        );
    }
    assert_eq!(
        server.call(Method::PATCH, "/v1/tenants", None).await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert!(names(&server.call(Method::GET, "/v1/tenants", None).await.1).is_empty());
}

/// Every endpoint, on the given catalog.
async fn every_endpoint(server: &Server) {
    use Method as M;
    // Tenants, paginated by name.
    for name in ["acme", "beta", "gamma"] {
        let (status, body) = server
            .call(M::POST, "/v1/tenants", Some(json!({"name": name})))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["kind"], "Tenant");
        assert_eq!(body["metadata"]["self"], format!("/v1/tenants/{name}"));
    }
    let (status, _) = server
        .call(M::POST, "/v1/tenants", Some(json!({"name": "acme"})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (_, page) = server.call(M::GET, "/v1/tenants?page_size=2", None).await;
    assert_eq!(names(&page), ["acme", "beta"]);
    let next = page["metadata"]["next"].as_str().unwrap().to_owned();
    let (_, rest) = server.call(M::GET, &next, None).await;
    assert_eq!(names(&rest), ["gamma"]);
    assert!(rest["metadata"]["next"].is_null());
    assert_eq!(
        server.call(M::DELETE, "/v1/tenants/gamma", None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        server.call(M::GET, "/v1/tenants/gamma", None).await.0,
        StatusCode::NOT_FOUND
    );

    // Principals and their API keys.
    let (status, alice) = server
        .call(
            M::POST,
            "/v1/tenants/acme/principals",
            Some(json!({"name": "alice", "kind": "user"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{alice}");
    assert_eq!(alice["acl_principal"], "User:alice");
    let (status, _) = server
        .call(
            M::POST,
            "/v1/tenants/acme/principals",
            Some(json!({"name": "svc", "kind": "robot"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    server
        .call(
            M::POST,
            "/v1/tenants/acme/principals",
            Some(json!({"name": "billing", "kind": "service_account"})),
        )
        .await;
    let (_, listed) = server
        .call(M::GET, "/v1/tenants/acme/principals", None)
        .await;
    assert_eq!(names(&listed), ["alice", "billing"]);
    let (_, page) = server
        .call(M::GET, "/v1/tenants/acme/principals?page_size=1", None)
        .await;
    assert_eq!(names(&page), ["alice"]);
    let (_, rest) = server
        .call(M::GET, page["metadata"]["next"].as_str().unwrap(), None)
        .await;
    assert_eq!(names(&rest), ["billing"]);
    let (status, key) = server
        .call(M::POST, "/v1/tenants/acme/principals/alice/api-keys", None)
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(key["secret"].as_str().unwrap().len(), 64);
    let key_id = key["id"].as_str().unwrap().to_owned();
    let (_, keys) = server
        .call(M::GET, "/v1/tenants/acme/principals/alice/api-keys", None)
        .await;
    assert_eq!(keys["data"][0]["id"], key_id.as_str());
    assert!(
        keys["data"][0].get("secret").is_none(),
        "secrets are shown once"
    );
    assert!(keys["data"][0]["revoked_at"].is_null());
    // A key is revoked only through its own principal.
    let other = format!("/v1/tenants/acme/principals/billing/api-keys/{key_id}");
    assert_eq!(
        server.call(M::DELETE, &other, None).await.0,
        StatusCode::NOT_FOUND
    );
    let own = format!("/v1/tenants/acme/principals/alice/api-keys/{key_id}");
    assert_eq!(
        server.call(M::DELETE, &own, None).await.0,
        StatusCode::NO_CONTENT
    );
    let (_, keys) = server
        .call(M::GET, "/v1/tenants/acme/principals/alice/api-keys", None)
        .await;
    assert!(keys["data"][0]["revoked_at"].is_i64());
    assert_eq!(
        server
            .call(M::DELETE, "/v1/tenants/acme/principals/billing", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );

    // ACLs, per tenant.
    let acl = |name: &str, pattern: &str, operation: &str, permission: &str| {
        json!({"principal": "User:alice", "resource_type": "topic", "resource_name": name,
               "pattern_type": pattern, "operation": operation, "permission": permission})
    };
    let (status, created) = server
        .call(
            M::POST,
            "/v1/tenants/acme/acls",
            Some(acl("orders", "LITERAL", "READ", "ALLOW")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        (created["resource_type"].as_str(), created["host"].as_str()),
        (Some("TOPIC"), Some("*"))
    );
    server
        .call(
            M::POST,
            "/v1/tenants/acme/acls",
            Some(acl("ord", "PREFIXED", "WRITE", "ALLOW")),
        )
        .await;
    server
        .call(
            M::POST,
            "/v1/tenants/beta/acls",
            Some(acl("orders", "LITERAL", "READ", "ALLOW")),
        )
        .await;
    for bad in [
        acl("orders", "LITERAL", "FLY", "ALLOW"),
        acl("*", "PREFIXED", "READ", "ALLOW"),
        acl("orders", "MATCH", "READ", "ALLOW"),
        json!({"principal": "alice", "resource_type": "TOPIC", "resource_name": "x", "pattern_type": "LITERAL", "operation": "READ", "permission": "ALLOW"}),
    ] {
        let (status, problem) = server
            .call(M::POST, "/v1/tenants/acme/acls", Some(bad.clone()))
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad} -> {problem}"
        );
    }
    let (_, all) = server.call(M::GET, "/v1/tenants/acme/acls", None).await;
    assert_eq!(all["data"].as_array().unwrap().len(), 2);
    let (_, one) = server
        .call(M::GET, "/v1/tenants/acme/acls?page_size=1", None)
        .await;
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    let (_, other) = server
        .call(M::GET, one["metadata"]["next"].as_str().unwrap(), None)
        .await;
    assert_eq!(other["data"].as_array().unwrap().len(), 1);
    assert_ne!(one["data"][0]["id"], other["data"][0]["id"]);
    assert!(other["metadata"]["next"].is_null());
    let (_, applying) = server
        .call(M::GET, "/v1/tenants/acme/acls?resource_type=TOPIC&resource_name=orders&pattern_type=MATCH&operation=WRITE", None)
        .await;
    assert_eq!(applying["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        server
            .call(M::DELETE, "/v1/tenants/acme/acls", None)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let (status, deleted) = server
        .call(
            M::DELETE,
            "/v1/tenants/acme/acls?resource_type=ANY&operation=READ",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deleted["data"][0]["operation"], "READ");
    let (_, left) = server.call(M::GET, "/v1/tenants/acme/acls", None).await;
    assert_eq!(left["data"].as_array().unwrap().len(), 1);
    let (_, theirs) = server.call(M::GET, "/v1/tenants/beta/acls", None).await;
    assert_eq!(theirs["data"].as_array().unwrap().len(), 1);

    // Quotas.
    let (status, quota) = server
        .call(
            M::PUT,
            "/v1/tenants/acme/quota",
            Some(json!({"produce_bytes_per_sec": 1048576, "partitions": 50})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{quota}");
    server
        .call(
            M::PUT,
            "/v1/tenants/acme/principals/alice/quota",
            Some(json!({"fetch_bytes_per_sec": 65536})),
        )
        .await;
    // Partitions belong to the tenant's topics, not to a principal.
    let (status, refused) = server
        .call(
            M::PUT,
            "/v1/tenants/acme/principals/alice/quota",
            Some(json!({"partitions": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let (status, _) = server
        .call(
            M::PUT,
            "/v1/tenants/acme/quota",
            Some(json!({"partitions": -1})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (_, quotas) = server.call(M::GET, "/v1/tenants/acme/quotas", None).await;
    let data = quotas["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert!(data[0]["principal"].is_null());
    assert_eq!(data[0]["limits"]["partitions"], 50);
    assert_eq!(data[1]["principal"], "alice");
    assert_eq!(data[1]["limits"]["fetch_bytes_per_sec"], 65536);
    assert_eq!(
        server
            .call(M::DELETE, "/v1/tenants/acme/principals/alice/quota", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        server
            .call(M::DELETE, "/v1/tenants/acme/quota", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        server
            .call(M::DELETE, "/v1/tenants/acme/quota", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    topics(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_on_sqlite() {
    every_endpoint(&Server::start(None).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_on_postgres() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let server = Server::start(Some(postgres.database("admin").unwrap())).await;
    every_endpoint(&server).await;
}

async fn topics(server: &Server) {
    use Method as M;
    let create = |name: &str, partitions: i32, replication: i32| {
        json!({"topic_name": name, "partitions_count": partitions, "replication_factor": replication,
               "configs": {"retention.ms": "60000"}})
    };
    let (status, topic) = server
        .call(
            M::POST,
            "/v1/tenants/acme/topics",
            Some(create("orders", 4, 2)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{topic}");
    assert_eq!(topic["partitions_count"], 4);
    assert_eq!(topic["configs"]["retention.ms"], "60000");
    let partitions = topic["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 4);
    for p in partitions {
        let replicas = p["replicas"].as_array().unwrap();
        assert_eq!(replicas.len(), 2);
        assert_ne!(replicas[0], replicas[1]);
        assert_eq!(p["leader"], replicas[0]);
    }
    // The same name in another tenant is another topic.
    let (status, _) = server
        .call(
            M::POST,
            "/v1/tenants/beta/topics",
            Some(create("orders", 1, 1)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for (body, expected) in [
        (create("orders", 1, 1), StatusCode::CONFLICT),
        (create("big", 1, 3), StatusCode::UNPROCESSABLE_ENTITY),
        (create("bad name", 1, 1), StatusCode::UNPROCESSABLE_ENTITY),
        // Beside "acme." a name may have 244 characters (Kafka's 249 in all).
        (
            create(&"t".repeat(245), 1, 1),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (create("none", 0, 1), StatusCode::UNPROCESSABLE_ENTITY),
        (
            create("huge", 2_147_483_647, 1),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"topic_name": "cfg", "partitions_count": 1, "configs": {"retention.ms": "forever"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"topic_name": "cfg", "partitions_count": 1, "configs": {"no.such.config": "1"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"topic_name": "x", "partitions_count": 1, "colour": "red"}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, problem) = server
            .call(M::POST, "/v1/tenants/acme/topics", Some(body.clone()))
            .await;
        assert_eq!(status, expected, "{body} -> {problem}");
    }
    let longest = "t".repeat(244);
    let (status, _) = server
        .call(
            M::POST,
            "/v1/tenants/acme/topics",
            Some(create(&longest, 1, 1)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = server
        .call(
            M::DELETE,
            &format!("/v1/tenants/acme/topics/{longest}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Pages: two more topics, listed two at a time.
    for name in ["payments", "refunds"] {
        let (status, _) = server
            .call(M::POST, "/v1/tenants/acme/topics", Some(create(name, 1, 1)))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (_, first) = server
        .call(M::GET, "/v1/tenants/acme/topics?page_size=2", None)
        .await;
    let next = first["metadata"]["next"].as_str().unwrap().to_owned();
    let (_, second) = server.call(M::GET, &next, None).await;
    let paged: Vec<&str> = first["data"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["data"].as_array().unwrap())
        .map(|t| t["topic_name"].as_str().unwrap())
        .collect();
    assert_eq!(paged, ["orders", "payments", "refunds"]);
    assert!(second["metadata"]["next"].is_null());
    for name in ["payments", "refunds"] {
        let path = format!("/v1/tenants/acme/topics/{name}");
        assert_eq!(
            server.call(M::DELETE, &path, None).await.0,
            StatusCode::NO_CONTENT
        );
    }
    let (_, listed) = server.call(M::GET, "/v1/tenants/acme/topics", None).await;
    let listed: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["topic_name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["orders"]);
    let (status, grown) = server
        .call(
            M::PATCH,
            "/v1/tenants/acme/topics/orders",
            Some(json!({"partitions_count": 6})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{grown}");
    assert_eq!(grown["partitions"].as_array().unwrap().len(), 6);
    let (status, _) = server
        .call(
            M::PATCH,
            "/v1/tenants/acme/topics/orders",
            Some(json!({"partitions_count": 2})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (_, fetched) = server
        .call(M::GET, "/v1/tenants/acme/topics/orders", None)
        .await;
    assert_eq!(fetched["partitions_count"], 6);
    assert_eq!(
        server
            .call(M::DELETE, "/v1/tenants/acme/topics/orders", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        server
            .call(M::GET, "/v1/tenants/acme/topics/orders", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (_, theirs) = server
        .call(M::GET, "/v1/tenants/beta/topics/orders", None)
        .await;
    assert_eq!(theirs["partitions_count"], 1);
}

/// The (mechanism, iterations) a SCRAM credential list at `path` holds.
async fn scram_listed(server: &Server, path: &str) -> Vec<(String, u64)> {
    let (status, list) = server.call(Method::GET, path, None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["mechanism"].as_str().unwrap().to_owned(),
                c["iterations"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// SCRAM credentials: set (never shown back), listed by mechanism, replaced, deleted; bad
/// mechanisms, passwords and iteration counts get a problem and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_credentials_are_set_listed_and_deleted() {
    let server = Server::start(None).await;
    server
        .call(Method::POST, "/v1/tenants", Some(json!({"name": "acme"})))
        .await;
    let (status, _) = server
        .call(
            Method::POST,
            "/v1/tenants/acme/principals",
            Some(json!({"name": "alice", "kind": "user"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let base = "/v1/tenants/acme/principals/alice/scram-credentials";
    let (status, set) = server
        .call(
            Method::PUT,
            &format!("{base}/SCRAM-SHA-512"),
            Some(json!({"password": "correct horse"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(set["mechanism"], "SCRAM-SHA-512");
    assert_eq!(set["iterations"], 8192, "the default");
    assert!(!set.to_string().contains("correct horse"));
    for (path, body, expected) in [
        (
            format!("{base}/SCRAM-SHA-1"),
            json!({"password": "pw"}),
            StatusCode::NOT_FOUND,
        ),
        (
            format!("{base}/SCRAM-SHA-256"),
            json!({"password": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            format!("{base}/SCRAM-SHA-256"),
            json!({"password": "x".repeat(1025)}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            format!("{base}/SCRAM-SHA-256"),
            json!({"password": "pw", "iterations": 4095}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            format!("{base}/SCRAM-SHA-256"),
            json!({"password": "pw", "iterations": 16385}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            format!("{base}/SCRAM-SHA-256"),
            json!({"password": "pw", "salt": "mine"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/v1/tenants/acme/principals/bob/scram-credentials/SCRAM-SHA-256".to_owned(),
            json!({"password": "pw"}),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (status, body) = server.call(Method::PUT, &path, Some(body)).await;
        assert!(
            status == expected || (expected.is_client_error() && status.is_client_error()),
            "{path}: {status} {body}"
        );
    }
    assert_eq!(
        scram_listed(&server, base).await,
        [("SCRAM-SHA-512".to_owned(), 8192)],
        "nothing refused was written"
    );
    let (status, _) = server
        .call(
            Method::PUT,
            &format!("{base}/SCRAM-SHA-512"),
            Some(json!({"password": "battery staple", "iterations": 4096})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        scram_listed(&server, base).await,
        [("SCRAM-SHA-512".to_owned(), 4096)]
    );
    let (status, _) = server
        .call(Method::DELETE, &format!("{base}/SCRAM-SHA-512"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = server
        .call(Method::DELETE, &format!("{base}/SCRAM-SHA-512"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(scram_listed(&server, base).await.is_empty());
}
