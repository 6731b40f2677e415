//! A control-plane process and a broker process on a real PostgreSQL, with confluent-kafka
//! as the client: a topic created (and configured) through Kafka is placed by the controller
//! and appears in the admin API; one created through the admin API reaches the broker through the metadata
//! stream; both, and their records, survive a restart of both processes.

#![allow(clippy::unwrap_used)]

mod common;

use common::cluster;
use common::processes::*;

/// One HTTP/1.1 request with the bootstrap token; returns the status and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    common::http(addr, method, path, Some(TOKEN), body)
}

#[test]
fn topics_live_in_the_controller_and_survive_a_restart_of_both_processes() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("cluster").unwrap();
    let data = tempfile::tempdir().unwrap();

    let (cp, admin, controller) = control_plane(&url);
    assert_eq!(
        http(&admin, "POST", "/v1/tenants", r#"{"name":"acme"}"#).0,
        201
    );
    let (b, bootstrap) = broker(&controller, data.path());

    // Created through Kafka: placed by the controller, visible in the admin API.
    let created = client(&python, &bootstrap, &["create"]);
    assert!(created.contains(r#""orders": 3"#), "{created}");
    let (status, body) = http(&admin, "GET", "/v1/tenants/acme/topics/orders", "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""partitions_count":3"#), "{body}");
    assert!(body.contains(r#""retention.ms":"86400000""#), "{body}");

    // Created through the admin API (the broker is live, so it can be placed): the broker
    // learns of it from the metadata stream.
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"from-admin","partitions_count":2}"#,
    );
    assert_eq!(status, 201, "{body}");
    let seen = client(&python, &bootstrap, &["wait-for", "from-admin"]);
    assert!(seen.contains(r#""from-admin": 2"#), "{seen}");

    // Restart both; the topics and the records are still there.
    b.stop();
    cp.stop();
    let (cp, admin, controller) = control_plane(&url);
    let (b, bootstrap) = broker(&controller, data.path());
    let checked = client(&python, &bootstrap, &["check"]);
    assert!(checked.contains(r#""from-admin": 2"#), "{checked}");

    // The Kafka listener does not authenticate its clients, so by default they may not
    // change ACLs: CreateAcls and DeleteAcls answer CLUSTER_AUTHORIZATION_FAILED, and the
    // catalog is untouched.
    let tried = client(&python, &bootstrap, &["try-acl-changes"]);
    assert!(
        tried.contains(r#""create": "CLUSTER_AUTHORIZATION_FAILED""#)
            && tried.contains(r#""delete": "CLUSTER_AUTHORIZATION_FAILED""#),
        "{tried}"
    );
    let (_, listed) = http(&admin, "GET", "/v1/tenants/acme/acls", "");
    assert!(!listed.contains("User:bob"), "{listed}");
    // Where an operator turns them on, they reach the catalog.
    b.stop();
    let (b, bootstrap) = tenant_broker_with(
        &controller,
        data.path(),
        "acme",
        0,
        &[("SKEIN_BROKER_UNAUTHENTICATED_ACL_CHANGES", "true")],
    );

    // ACLs: one made through the admin API is listed by Kafka's DescribeAcls; one made with
    // Kafka's CreateAcls is listed by the admin API; DeleteAcls removes it from the catalog.
    let alice = r#"{"principal":"User:alice","resource_type":"TOPIC","resource_name":"orders","pattern_type":"LITERAL","operation":"READ","permission":"ALLOW"}"#;
    assert_eq!(http(&admin, "POST", "/v1/tenants/acme/acls", alice).0, 201);
    let listed_by_kafka = |want: &str| {
        let want = want.to_owned();
        wait_for(|| {
            let out = client(&python, &bootstrap, &["list-acls"]);
            out.contains(&want).then_some(out)
        })
    };
    listed_by_kafka("User:alice READ TOPIC LITERAL orders");
    client(&python, &bootstrap, &["create-acl"]);
    listed_by_kafka("User:bob WRITE TOPIC PREFIXED pay");
    let (_, listed) = http(&admin, "GET", "/v1/tenants/acme/acls", "");
    assert!(listed.contains(r#""principal":"User:bob""#), "{listed}");
    let deleted = client(&python, &bootstrap, &["delete-acls"]);
    assert!(deleted.contains("User:bob pay"), "{deleted}");
    let (_, listed) = http(&admin, "GET", "/v1/tenants/acme/acls", "");
    assert!(!listed.contains("User:bob"), "{listed}");
    assert!(listed.contains("User:alice"), "{listed}");

    // Deleted through the admin API: gone from the broker too.
    assert_eq!(
        http(&admin, "DELETE", "/v1/tenants/acme/topics/from-admin", "").0,
        204
    );
    client(&python, &bootstrap, &["wait-gone", "from-admin"]);
    b.stop();
    cp.stop();
}

#[test]
fn each_tenant_sees_only_its_own_topic_of_the_same_name() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("tenants").unwrap();
    let (a_data, b_data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (cp, admin, controller) = control_plane(&url);
    for tenant in ["acme", "beta"] {
        let body = format!(r#"{{"name":"{tenant}"}}"#);
        assert_eq!(http(&admin, "POST", "/v1/tenants", &body).0, 201);
    }
    let (a, a_bootstrap) = tenant_broker(&controller, a_data.path(), "acme", 1);
    let (b, b_bootstrap) = tenant_broker(&controller, b_data.path(), "beta", 2);
    // Both tenants get an `orders` and a topic of their own.
    for (tenant, other) in [("acme", "acme-only"), ("beta", "beta-only")] {
        for (name, partitions) in [("orders", 3), (other, 1)] {
            let body = format!(r#"{{"topic_name":"{name}","partitions_count":{partitions}}}"#);
            let (status, answer) = http(
                &admin,
                "POST",
                &format!("/v1/tenants/{tenant}/topics"),
                &body,
            );
            assert_eq!(status, 201, "{answer}");
        }
    }
    let a_topics = wait_for(|| {
        let out = client(&python, &a_bootstrap, &["topics"]);
        out.contains("acme-only").then_some(out)
    });
    assert!(
        a_topics.contains(r#""orders": 3"#) && !a_topics.contains("beta-only"),
        "{a_topics}"
    );
    let b_topics = wait_for(|| {
        let out = client(&python, &b_bootstrap, &["topics"]);
        out.contains("beta-only").then_some(out)
    });
    assert!(
        b_topics.contains(r#""orders": 3"#) && !b_topics.contains("acme-only"),
        "{b_topics}"
    );
    // Records produced to acme's `orders` never appear in beta's.
    client(&python, &a_bootstrap, &["produce-only"]);
    assert!(client(&python, &a_bootstrap, &["count"]).contains(r#""orders": 30"#));
    assert!(client(&python, &b_bootstrap, &["count"]).contains(r#""orders": 0"#));
    // Each tenant's partitions are placed on the broker that serves it; a tenant no broker
    // serves cannot have topics placed.
    let (_, acme_orders) = http(&admin, "GET", "/v1/tenants/acme/topics/orders", "");
    assert!(
        acme_orders.contains(r#""leader":1"#) && !acme_orders.contains(r#""leader":2"#),
        "{acme_orders}"
    );
    let (_, beta_orders) = http(&admin, "GET", "/v1/tenants/beta/topics/orders", "");
    assert!(
        beta_orders.contains(r#""leader":2"#) && !beta_orders.contains(r#""leader":1"#),
        "{beta_orders}"
    );
    assert_eq!(
        http(&admin, "POST", "/v1/tenants", r#"{"name":"gamma"}"#).0,
        201
    );
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants/gamma/topics",
        r#"{"topic_name":"orders","partitions_count":1}"#,
    );
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("serving the tenant"), "{body}");
    // beta's partitions quota bounds its topics by every route: beta has 4 partitions.
    let (status, body) = http(
        &admin,
        "PUT",
        "/v1/tenants/beta/quota",
        r#"{"partitions":5}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants/beta/topics",
        r#"{"topic_name":"too-big","partitions_count":2}"#,
    );
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("quota-exceeded"), "{body}");
    // validate_only answers as the creation would, once the broker has the quota.
    wait_for(|| {
        client(&python, &b_bootstrap, &["validate-topic", "fits", "2"])
            .contains("POLICY_VIOLATION")
            .then_some(())
    });
    let ask = client(&python, &b_bootstrap, &["validate-topic", "fits", "1"]);
    assert!(ask.contains(r#""error": null"#), "{ask}");
    let fits = client(&python, &b_bootstrap, &["try-create-topic", "fits", "1"]);
    assert!(fits.contains(r#""error": null"#), "{fits}");
    let over = client(&python, &b_bootstrap, &["try-create-topic", "over", "1"]);
    assert!(over.contains("POLICY_VIOLATION"), "{over}");
    assert!(over.contains("quota is 5"), "{over}");
    let (status, body) = http(
        &admin,
        "PATCH",
        "/v1/tenants/beta/topics/orders",
        r#"{"partitions_count":4}"#,
    );
    assert_eq!(status, 409, "{body}");
    // acme has no quota and is not held to beta's.
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"wide","partitions_count":8}"#,
    );
    assert_eq!(status, 201, "{body}");
    // The admin API keeps them apart too.
    let (_, acme) = http(&admin, "GET", "/v1/tenants/acme/topics", "");
    assert!(
        acme.contains("acme-only") && !acme.contains("beta-only"),
        "{acme}"
    );
    a.stop();
    b.stop();
    cp.stop();
}

/// Which of two control-plane replicas is active: it accepts topic changes (a topic named
/// `probe-<index>` is created), the standby answers 503.
fn active_replica(replicas: &[(Process, String, String); 2]) -> usize {
    let probe = |admin: &str, name: &str| {
        let body = format!(r#"{{"topic_name":"{name}","partitions_count":1}}"#);
        http(admin, "POST", "/v1/tenants/acme/topics", &body).0
    };
    let answers = [
        probe(&replicas[0].1, "probe-0"),
        probe(&replicas[1].1, "probe-1"),
    ];
    let mut answers_sorted = answers;
    answers_sorted.sort_unstable();
    assert_eq!(answers_sorted, [201, 503], "{answers:?}");
    usize::from(answers[0] != 201)
}

#[test]
fn the_broker_rides_through_a_controller_failover() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("failover").unwrap();
    let data = tempfile::tempdir().unwrap();
    let replicas = [control_plane(&url), control_plane(&url)];
    let admin = replicas[0].1.clone();
    assert_eq!(
        http(&admin, "POST", "/v1/tenants", r#"{"name":"acme"}"#).0,
        201
    );
    let both = format!("{},{}", replicas[0].2, replicas[1].2);
    let (b, bootstrap) = broker(&both, data.path());
    client(&python, &bootstrap, &["create-topic", "before"]);

    let active = active_replica(&replicas);
    let [first, second] = replicas;
    let (dead, alive) = if active == 0 {
        (first, second)
    } else {
        (second, first)
    };
    dead.0.kill();

    // Within the lease (2 s) the standby takes over; the broker finds it on its own.
    let started = std::time::Instant::now();
    client(&python, &bootstrap, &["create-topic", "after"]);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    let (status, body) = http(&alive.1, "GET", "/v1/tenants/acme/topics/after", "");
    assert_eq!(status, 200, "{body}");
    b.stop();
    alive.0.stop();
}

/// The active control-plane replica dies with SIGKILL, then partition 0's leader does too:
/// the standby takes the lease and elects a new leader from the ISR, and `acks=all` writes
/// go on with every earlier record still there.
#[test]
fn elections_go_on_after_the_active_controller_dies() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("elections").unwrap();
    let replicas = [control_plane(&url), control_plane(&url)];
    assert_eq!(
        http(&replicas[0].1, "POST", "/v1/tenants", r#"{"name":"acme"}"#).0,
        201
    );
    let both = format!("{},{}", replicas[0].2, replicas[1].2);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut brokers: Vec<Option<(Process, String)>> = (1..=3)
        .map(|node| {
            Some(tenant_broker(
                &both,
                dirs[node - 1].path(),
                "acme",
                node as i32,
            ))
        })
        .collect();
    let all = cluster::addresses(&brokers);
    cluster::create_topic(&python, &all, "elect", 1, 3, &["min.insync.replicas=2"]);
    let round_trip = |bootstrap: &str, base: &str| -> serde_json::Value {
        let out = script(
            &python,
            "cluster_placement.py",
            bootstrap,
            &["round-trip", "elect", "1", "200", base],
        );
        serde_json::from_str(out.trim()).unwrap()
    };
    let before = round_trip(&all, "0");
    assert_eq!(
        (before["acked"].as_u64(), before["read"].as_u64()),
        (Some(200), Some(200)),
        "{before}"
    );
    let (old_leader, _) =
        wait_for(|| cluster::leader_of(&python, &all, "elect", 0).filter(|(_, isr)| *isr == 3));

    let active = active_replica(&replicas);
    let [first, second] = replicas;
    let (dead, alive) = if active == 0 {
        (first, second)
    } else {
        (second, first)
    };
    dead.0.kill();
    brokers[old_leader - 1].take().unwrap().0.kill();

    let left = cluster::addresses(&brokers);
    let started = std::time::Instant::now();
    let (new_leader, isr) = wait_for(|| {
        cluster::leader_of(&python, &left, "elect", 0)
            .filter(|(leader, _)| *leader != old_leader && *leader > 0)
    });
    println!(
        "partition 0 led by broker {new_leader} (ISR of {isr}) {:?} after both kills",
        started.elapsed()
    );
    let after = round_trip(&left, "200");
    assert_eq!(
        (after["acked"].as_u64(), after["read"].as_u64()),
        (Some(200), Some(200)),
        "{after}"
    );
    let read: Vec<u64> = cluster::values(&python, &left, "elect", 0)
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(
        read,
        (0..400).collect::<Vec<u64>>(),
        "every record once, in order"
    );
    for (process, _) in brokers.into_iter().flatten() {
        process.stop();
    }
    alive.0.stop();
}

/// Kafka clients are held to the tenant's byte quotas: the broker reports throttle times,
/// which confluent-kafka sees, and holds the tenant's connections back until the debt is
/// paid, so the rate over a few seconds stays near the quota. Without a quota nothing is
/// throttled.
#[test]
fn kafka_clients_are_held_to_the_tenants_byte_quotas() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("quotas").unwrap();
    let data = tempfile::tempdir().unwrap();
    let (cp, admin, controller) = control_plane(&url);
    assert_eq!(
        http(&admin, "POST", "/v1/tenants", r#"{"name":"acme"}"#).0,
        201
    );
    // 100 KB/s each way: 600 KB takes about 5 s past the first second's worth.
    let limits = r#"{"produce_bytes_per_sec":100000,"fetch_bytes_per_sec":100000}"#;
    let (status, body) = http(&admin, "PUT", "/v1/tenants/acme/quota", limits);
    assert_eq!(status, 200, "{body}");
    let (broker, bootstrap) = broker(&controller, data.path());
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/tenants/acme/topics",
        r#"{"topic_name":"metered","partitions_count":1}"#,
    );
    assert_eq!(status, 201, "{body}");
    wait_for(|| {
        client(&python, &bootstrap, &["topics"])
            .contains("metered")
            .then_some(())
    });
    let metered: serde_json::Value =
        serde_json::from_str(&client(&python, &bootstrap, &["metered", "metered", "60"])).unwrap();
    eprintln!("with the quota: {metered}");
    for (phase, throttle) in [
        ("produce_secs", "producer_throttle"),
        ("fetch_secs", "consumer_throttle"),
    ] {
        // 600 KB at 100 KB/s with one second's burst: at least 5 s; 3 s leaves room for
        // the clock, never for a missing limit.
        assert!(metered[phase].as_f64().unwrap() >= 3.0, "{metered}");
        assert!(metered[throttle].as_f64().unwrap() > 0.0, "{metered}");
    }
    // The quota removed, the same traffic is not throttled.
    let (status, _) = http(&admin, "DELETE", "/v1/tenants/acme/quota", "");
    assert_eq!(status, 204);
    wait_for(|| {
        let free: serde_json::Value =
            serde_json::from_str(&client(&python, &bootstrap, &["metered", "metered", "60"]))
                .unwrap();
        (free["producer_throttle"] == 0.0 && free["consumer_throttle"] == 0.0).then_some(())
    });
    broker.stop();
    cp.stop();
}

/// The controller of a real control-plane process refuses callers without a credential, or
/// with one of another role or tenant, before anything reaches the catalog.
#[test]
fn the_controller_process_refuses_callers_outside_their_credential() {
    use skein_proto::controller as pb;
    use skein_proto::replicas::{ControllerReplicas, Credential};
    use tonic::Code;

    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("controller_auth").unwrap();
    let (_cp, admin, controller) = control_plane(&url);
    for tenant in ["acme", "globex"] {
        let body = format!(r#"{{"name":"{tenant}"}}"#);
        assert_eq!(http(&admin, "POST", "/v1/tenants", &body).0, 201);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _inside = runtime.enter();
    let as_caller = |credential: Credential| {
        ControllerReplicas::connect_lazy(std::slice::from_ref(&controller), credential).unwrap()
    };
    let token = |role: &str, tenants: &[&str]| {
        let file = controller_token_file(role, tenants);
        Credential::bearer(&std::fs::read_to_string(file).unwrap()).unwrap()
    };
    let create = |tenant: &str| pb::CreateTopicRequest {
        tenant: tenant.to_owned(),
        name: "stolen".to_owned(),
        partitions: 1,
        replication_factor: 1,
        configs: Default::default(),
        assignments: Vec::new(),
    };
    let code = |replicas: &ControllerReplicas, tenant: &str| {
        let request = create(tenant);
        runtime
            .block_on(replicas.call(request, |mut c, r| async move { c.create_topic(r).await }))
            .unwrap_err()
            .code()
    };
    let forged = {
        // Signed with a secret that is not the controller's.
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), "x".repeat(48)).unwrap();
        let out = std::process::Command::new(SKEIN)
            .args([
                "controller-token",
                "--role",
                "broker",
                "--tenant",
                "*",
                "--any-node",
                "--secret-file",
            ])
            .arg(secret.path())
            .output()
            .unwrap();
        Credential::bearer(&String::from_utf8(out.stdout).unwrap()).unwrap()
    };
    assert_eq!(
        code(&as_caller(Credential::none()), "acme"),
        Code::Unauthenticated
    );
    assert_eq!(code(&as_caller(forged), "acme"), Code::Unauthenticated);
    assert_eq!(
        code(&as_caller(token("gateway", &[])), "acme"),
        Code::PermissionDenied
    );
    assert_eq!(
        code(&as_caller(token("broker", &["acme"])), "globex"),
        Code::PermissionDenied
    );
    // A stranger cannot watch the cluster's metadata either.
    let watched = runtime.block_on(as_caller(Credential::none()).watch());
    assert_eq!(watched.unwrap_err().code(), Code::Unauthenticated);
    // Nothing was created.
    let (_, topics) = http(&admin, "GET", "/v1/tenants/globex/topics", "");
    assert!(!topics.contains("stolen"), "{topics}");
    let (_, topics) = http(&admin, "GET", "/v1/tenants/acme/topics", "");
    assert!(!topics.contains("stolen"), "{topics}");
}
