//! One ACL model on every way in: a table of principals, their bindings, calls and the
//! answers those bindings give, played over the native Kafka protocol (confluent-kafka with
//! SASL/OAUTHBEARER), the gateway's REST API and its gRPC API. Each principal presents the
//! same token on all three, so the three must agree row by row; a denied write leaves the
//! log as it was on every transport.
//!
//! The processes are real: a control plane on PostgreSQL, a broker with a SASL listener
//! trusting the issuer's JWKS, and a gateway trusting the same JWKS.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::admin::{admin, new_principal};
use common::grpc;
use common::issuer::{serve_jwks, test_key};
use common::kafka::RawKafka;
use common::processes::*;
use common::{request, sasl_acls};
use serde_json::json;
use skein_proto::gateway as pb;

/// An ALLOW binding: (resource type, literal name, operation).
type Binding = (&'static str, &'static str, &'static str);

/// One call, as each transport makes it.
#[derive(Debug, Clone, Copy)]
enum Call {
    /// One record to partition 0 of `orders`.
    Produce,
    /// Partition 0 of `orders` from its start, without a group.
    Read,
    /// `orders` through the named group (joining it, reading a record).
    Consume(&'static str),
    /// The topics the principal is shown.
    ListTopics,
}

/// What a call came to, in terms every transport can say.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done,
    TopicDenied,
    GroupDenied,
    Topics(Vec<String>),
    /// Anything else, with what the transport said.
    Other(String),
}

use Outcome::*;

/// The outcome a refusal message names (the gateway says "... may not READ group g").
fn refused(message: &str) -> Outcome {
    if message.contains(" group ") {
        GroupDenied
    } else if message.contains(" topic ") {
        TopicDenied
    } else {
        Other(message.to_owned())
    }
}

/// A token of acme's `sub`, signed with the key the issuer's JWKS lists as `rsa-jwk`.
fn token(sub: &str) -> String {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"sub": sub, "tenant": "acme", "exp": now + 900});
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa-jwk".to_owned());
    let key = EncodingKey::from_rsa_pem(&std::fs::read(test_key("rsa.pem")).unwrap()).unwrap();
    encode(&header, &claims, &key).unwrap()
}

/// The call over the native protocol: confluent-kafka with OAUTHBEARER.
fn kafka(python: &str, bootstrap: &str, token: &str, call: Call) -> Outcome {
    let args: Vec<&str> = match call {
        Call::Produce => vec!["produce", "orders"],
        Call::Read => vec!["read", "orders"],
        Call::Consume(group) => vec!["consume", "orders", group],
        Call::ListTopics => vec!["metadata"],
    };
    let who = ("OAUTHBEARER".to_owned(), token.to_owned());
    let answer = sasl_acls(python, bootstrap, &who, &args);
    match answer["result"].as_str().unwrap() {
        "ok" => match call {
            Call::ListTopics => Topics(
                answer["topics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_owned())
                    .collect(),
            ),
            _ => Done,
        },
        "TOPIC_AUTHORIZATION_FAILED" => TopicDenied,
        "GROUP_AUTHORIZATION_FAILED" => GroupDenied,
        other => Other(other.to_owned()),
    }
}

/// The call over REST.
fn rest(address: &str, token: &str, call: Call) -> Outcome {
    let authorization = format!("Bearer {token}");
    let send = |method: &str, path: &str, body: &str| {
        request(
            address,
            method,
            path,
            &[("Authorization", &authorization)],
            body,
        )
    };
    let answer = match call {
        Call::Produce => send(
            "POST",
            "/v1/topics/orders/records",
            r#"{"records":[{"partition":0,"value":"rest"}]}"#,
        ),
        Call::Read => send("GET", "/v1/topics/orders/partitions/0/records?offset=0", ""),
        Call::Consume(group) => {
            let joined = send(
                "POST",
                &format!("/v1/groups/{group}/members"),
                r#"{"topics":["orders"],"session_timeout_ms":6000}"#,
            );
            if joined.status != 200 {
                joined
            } else {
                let cursor = joined.json()["cursor"].as_str().unwrap().to_owned();
                let read = send(
                    "GET",
                    &format!("/v1/groups/{group}/records?cursor={cursor}&max_wait_ms=2000"),
                    "",
                );
                let member = joined.json()["member_id"].as_str().unwrap_or("").to_owned();
                send(
                    "DELETE",
                    &format!("/v1/groups/{group}/members/{member}"),
                    "",
                );
                read
            }
        }
        Call::ListTopics => send("GET", "/v1/topics", ""),
    };
    match answer.status {
        200 => match call {
            Call::ListTopics => Topics(
                answer.json()["topics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_owned())
                    .collect(),
            ),
            Call::Read | Call::Consume(_)
                if answer.json()["records"]
                    .as_array()
                    .is_none_or(|records| records.is_empty()) =>
            {
                Other(format!("no records: {}", answer.body))
            }
            _ => Done,
        },
        403 => refused(answer.json()["detail"].as_str().unwrap_or_default()),
        status => Other(format!("{status} {}", answer.body)),
    }
}

/// The call over gRPC.
async fn grpc_call(address: &str, token: &str, call: Call) -> Outcome {
    let mut client = grpc::client(address).await;
    let subscribe = |mode| pb::Subscribe {
        topic: "orders".to_owned(),
        mode: Some(mode),
        isolation: pb::Isolation::ReadCommitted as i32,
        credit: Some(pb::Credit {
            records: 10,
            bytes: 0,
        }),
    };
    let answer = match call {
        Call::Produce => {
            let request = pb::ProduceRequest {
                topic: "orders".to_owned(),
                records: vec![pb::Record {
                    partition: Some(0),
                    ..grpc::record("k", "grpc")
                }],
            };
            match client.produce(grpc::authorized(request, token)).await {
                Ok(response) => match response.into_inner().results.first() {
                    Some(result) if result.code == 0 => return Done,
                    other => return Other(format!("{other:?}")),
                },
                Err(status) => status,
            }
        }
        Call::Read | Call::Consume(_) => {
            let mode = match call {
                Call::Consume(group) => pb::subscribe::Mode::Group(pb::GroupSubscription {
                    group_id: group.to_owned(),
                    start: pb::StartFrom::Earliest as i32,
                }),
                _ => pb::subscribe::Mode::Partitions(pb::PartitionsSubscription {
                    partitions: vec![pb::PartitionStart {
                        partition: 0,
                        position: Some(pb::partition_start::Position::Offset(0)),
                    }],
                    ..Default::default()
                }),
            };
            match grpc::consume(&mut client, token, subscribe(mode)).await {
                Err(status) => status,
                Ok(mut stream) => loop {
                    match tokio::time::timeout(Duration::from_secs(20), stream.responses.message())
                        .await
                    {
                        Ok(Ok(Some(pb::ConsumeResponse {
                            kind: Some(pb::consume_response::Kind::Records(_)),
                        }))) => return Done,
                        Ok(Ok(Some(_))) => {}
                        Ok(Ok(None)) => return Other("the stream ended".to_owned()),
                        Ok(Err(status)) => break status,
                        Err(_) => return Other("no records within 20 s".to_owned()),
                    }
                },
            }
        }
        Call::ListTopics => {
            match client
                .list_topics(grpc::authorized(pb::ListTopicsRequest {}, token))
                .await
            {
                Ok(listed) => {
                    return Topics(
                        listed
                            .into_inner()
                            .topics
                            .into_iter()
                            .map(|t| t.name)
                            .collect(),
                    )
                }
                Err(status) => status,
            }
        }
    };
    match answer.code() {
        tonic::Code::PermissionDenied => refused(answer.message()),
        _ => Other(format!("{answer:?}")),
    }
}

#[test]
fn the_same_bindings_give_the_same_answers_over_kafka_rest_and_grpc() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("acl_transports").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    let jwks = serve_jwks();
    let data = tempfile::tempdir().unwrap();
    let broker = Process::start(
        acme_broker_command(
            &controller,
            data.path(),
            &[
                "--listeners",
                "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "--sasl-oauthbearer-jwks-endpoint-url",
                &jwks,
            ],
        )
        .env("SKEIN_BROKER_AUTO_CREATE_TOPICS", "false"),
    );
    let plaintext = field(&broker.first_line, " on ");
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    let (gateway, rest_address, grpc_address) = gateway(&controller, &["--jwks-url", &jwks]);
    for topic in ["orders", "secret"] {
        admin(
            &admin_addr,
            "POST",
            "/v1/tenants/acme/topics",
            &format!(r#"{{"topic_name":"{topic}","partitions_count":1}}"#),
        );
    }
    // The principals and their bindings: the table's first half.
    let principals: &[(&str, &[Binding])] = &[
        ("writer", &[("TOPIC", "orders", "WRITE")]),
        (
            "reader",
            &[("TOPIC", "orders", "READ"), ("GROUP", "readers", "READ")],
        ),
        ("grouper", &[("GROUP", "readers", "READ")]),
        ("nobody", &[]),
    ];
    for (name, allowed) in principals {
        new_principal(&admin_addr, "acme", name, allowed);
    }
    let tokens: std::collections::HashMap<&str, String> =
        principals.iter().map(|(n, _)| (*n, token(n))).collect();

    // The bindings reach the broker and the gateway with the metadata stream; a first record
    // gives the readers something to read.
    wait_for(|| (rest(&rest_address, &tokens["writer"], Call::Produce) == Done).then_some(()));
    wait_for(|| (kafka(&python, &sasl, &tokens["writer"], Call::Produce) == Done).then_some(()));
    let mut raw = RawKafka::connect(&plaintext);
    let before = raw.latest_offset("orders", 0);

    // The calls and what the bindings say: the table's second half.
    let orders = || Topics(vec!["orders".to_owned()]);
    let matrix: Vec<(&str, Call, Outcome)> = vec![
        ("writer", Call::Produce, Done),
        ("reader", Call::Produce, TopicDenied),
        ("nobody", Call::Produce, TopicDenied),
        ("reader", Call::Read, Done),
        ("writer", Call::Read, TopicDenied),
        ("nobody", Call::Read, TopicDenied),
        ("reader", Call::Consume("readers"), Done),
        ("reader", Call::Consume("others"), GroupDenied),
        ("grouper", Call::Consume("readers"), TopicDenied),
        ("writer", Call::ListTopics, orders()),
        ("reader", Call::ListTopics, orders()),
        ("nobody", Call::ListTopics, Topics(Vec::new())),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut wrong = Vec::new();
    for (who, call, expected) in &matrix {
        let token = &tokens[who];
        let answers = [
            ("kafka", kafka(&python, &sasl, token, *call)),
            ("rest", rest(&rest_address, token, *call)),
            (
                "grpc",
                runtime.block_on(grpc_call(&grpc_address, token, *call)),
            ),
        ];
        for (transport, answer) in answers {
            println!("{who} {call:?} over {transport}: {answer:?}");
            if answer != *expected {
                wrong.push(format!(
                    "{who} {call:?} over {transport}: expected {expected:?}, got {answer:?}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The allowed writes went in, one per transport; the denied ones left nothing.
    assert_eq!(raw.latest_offset("orders", 0), before + 3);
    assert_eq!(raw.latest_offset("secret", 0), 0);

    gateway.stop();
    broker.stop();
    cp.stop();
}
