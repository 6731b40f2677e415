//! One listener for every tenant: a broker process started without `--tenant` on a
//! control-plane process and a real PostgreSQL serves two tenants on one SASL_PLAINTEXT
//! listener, each client's tenant the one its credential belongs to. Both tenants create
//! `orders`; confluent-kafka (and kafka-python for DescribeAcls) show that each reads and
//! writes only its own, and that neither sees the other in Metadata, ListGroups,
//! DescribeConfigs, DescribeAcls or OffsetFetch. A SCRAM user names its tenant as
//! `USER@TENANT`. On disk the two topics are `acme.orders` and `globex.orders`.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::admin::{issue_api_key, new_principal, TOPICS_AND_GROUPS};
use common::processes::*;
use common::sasl_acls;

#[test]
fn two_tenants_on_one_listener_each_see_only_their_own() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("multi_tenant").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    let mut keys = Vec::new();
    for tenant in ["acme", "globex"] {
        common::admin::admin(
            &admin_addr,
            "POST",
            "/v1/tenants",
            &format!(r#"{{"name":"{tenant}"}}"#),
        );
        new_principal(&admin_addr, tenant, "app", TOPICS_AND_GROUPS);
        keys.push(issue_api_key(&admin_addr, tenant, "app"));
    }
    // globex's app may also describe the cluster's ACLs: one binding more than acme's.
    new_principal(
        &admin_addr,
        "globex",
        "auditor",
        &[("CLUSTER", "kafka-cluster", "DESCRIBE")],
    );
    common::admin::admin(
        &admin_addr,
        "POST",
        "/v1/tenants/globex/acls",
        r#"{"principal":"User:app","resource_type":"CLUSTER","resource_name":"kafka-cluster",
            "pattern_type":"LITERAL","operation":"DESCRIBE","permission":"ALLOW"}"#,
    );
    common::admin::admin(
        &admin_addr,
        "POST",
        "/v1/tenants/acme/acls",
        r#"{"principal":"User:app","resource_type":"CLUSTER","resource_name":"kafka-cluster",
            "pattern_type":"LITERAL","operation":"DESCRIBE","permission":"ALLOW"}"#,
    );
    let (acme, globex) = (&keys[0], &keys[1]);

    let data = tempfile::tempdir().unwrap();
    let broker = Process::start(&mut every_tenant_broker(
        &controller,
        data.path(),
        1,
        EVERY_TENANT_LISTENERS,
    ));
    assert!(
        broker.first_line.contains("serving every tenant"),
        "{}",
        broker.first_line
    );
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    let call = |who: &(String, String), args: &[&str]| sasl_acls(&python, &sasl, who, args);
    let ok = |who: &(String, String), args: &[&str]| {
        let answer = call(who, args);
        assert_eq!(answer["result"], "ok", "{args:?}: {answer}");
        answer
    };

    // Both create `orders`: two topics.
    ok(acme, &["create", "orders"]);
    ok(globex, &["create", "orders"]);
    // acme writes one record, globex two: each topic has its own.
    ok(acme, &["produce", "orders"]);
    ok(globex, &["produce", "orders"]);
    ok(globex, &["produce", "orders"]);
    assert_eq!(ok(acme, &["watermark", "orders"])["high"], 1);
    assert_eq!(ok(globex, &["watermark", "orders"])["high"], 2);

    // Metadata: each lists its own `orders`, nothing of the other, no internal topic.
    for who in [acme, globex] {
        assert_eq!(
            ok(who, &["metadata"])["topics"],
            serde_json::json!(["orders"])
        );
    }

    // Groups of the same id in both tenants, and one more in globex.
    ok(acme, &["consume", "orders", "billing"]);
    ok(globex, &["consume", "orders", "billing"]);
    ok(globex, &["consume", "orders", "audit"]);
    assert_eq!(
        ok(acme, &["list-groups"])["groups"],
        serde_json::json!(["billing"])
    );
    assert_eq!(
        ok(globex, &["list-groups"])["groups"],
        serde_json::json!(["audit", "billing"])
    );
    // OffsetFetch: each `billing` holds its own commit (after the first record read).
    assert_eq!(ok(acme, &["committed", "orders", "billing"])["offset"], 1);
    assert_eq!(ok(globex, &["committed", "orders", "billing"])["offset"], 1);
    assert_eq!(ok(acme, &["committed", "orders", "audit"])["offset"], -1001);

    // DescribeConfigs: acme's change is acme's alone.
    ok(acme, &["alter-configs", "orders"]);
    assert_eq!(
        ok(acme, &["describe-configs", "orders"])["retention.ms"],
        "3600000"
    );
    assert_eq!(
        ok(globex, &["describe-configs", "orders"])["retention.ms"],
        "604800000"
    );

    // DescribeAcls: each tenant's own bindings (acme 3, globex 4).
    assert_eq!(ok(acme, &["describe-acls"])["bindings"], 3);
    assert_eq!(ok(globex, &["describe-acls"])["bindings"], 4);

    // SCRAM: the user names its tenant, USER@TENANT; without one it names no tenant here.
    common::admin::admin(
        &admin_addr,
        "PUT",
        "/v1/tenants/globex/principals/app/scram-credentials/SCRAM-SHA-512",
        r#"{"password":"globex-app-password","iterations":4096}"#,
    );
    let scram = |user: &str| {
        (
            format!("SCRAM-SHA-512:{user}"),
            "globex-app-password".to_owned(),
        )
    };
    assert_eq!(
        ok(&scram("app@globex"), &["watermark", "orders"])["high"],
        2
    );
    // Nothing is written by a user of no tenant or of the wrong one.
    for unknown in ["app", "app@acme"] {
        let refused = call(&scram(unknown), &["produce", "orders"]);
        assert_ne!(refused["result"], "ok", "{unknown}: {refused}");
    }
    assert_eq!(ok(acme, &["watermark", "orders"])["high"], 1);
    assert_eq!(ok(globex, &["watermark", "orders"])["high"], 2);

    // The gateway in front of the same broker: it logs in for each tenant with its own
    // controller credential, and each tenant's API key reaches its own `orders` over REST.
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "g".repeat(48)).unwrap();
    let (gateway, rest, _grpc) = gateway(
        &controller,
        &[
            "--jwt-hs256-secret-file",
            &secret.path().display().to_string(),
        ],
    );
    let basic = |who: &(String, String)| {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", who.0, who.1))
        )
    };
    let rest_call = |who: &(String, String), method: &str, path: &str, body: &str| {
        common::request(&rest, method, path, &[("Authorization", &basic(who))], body)
    };
    let written = wait_for(|| {
        let answer = rest_call(
            acme,
            "POST",
            "/v1/topics/orders/records",
            r#"{"records":[{"value":"from acme over REST"}]}"#,
        );
        (answer.status == 200).then_some(answer)
    });
    assert_eq!(
        written.json()["results"][0]["offset"],
        1,
        "{}",
        written.body
    );
    assert_eq!(ok(acme, &["watermark", "orders"])["high"], 2);
    assert_eq!(ok(globex, &["watermark", "orders"])["high"], 2);
    for (who, expected) in [(acme, 2), (globex, 2)] {
        let read = rest_call(
            who,
            "GET",
            "/v1/topics/orders/partitions/0/records?offset=0&max_records=10",
            "",
        );
        assert_eq!(read.status, 200, "{}", read.body);
        let records = read.json()["records"].as_array().unwrap().len();
        assert_eq!(records, expected, "{}", read.body);
    }
    let acme_read = rest_call(
        acme,
        "GET",
        "/v1/topics/orders/partitions/0/records?offset=1&max_records=1",
        "",
    );
    assert_eq!(
        acme_read.json()["records"][0]["value"],
        "from acme over REST",
        "{}",
        acme_read.body
    );
    gateway.stop();

    // A name that looks like the other tenant's is a topic of one's own, and unknown.
    assert_eq!(
        call(acme, &["describe-configs", "globex.orders"])["result"],
        "UNKNOWN_TOPIC_OR_PART"
    );

    // Deleting acme's `orders` leaves globex's.
    ok(acme, &["delete", "orders"]);
    wait_for(|| (ok(acme, &["metadata"])["topics"] == serde_json::json!([])).then_some(()));
    assert_eq!(ok(globex, &["watermark", "orders"])["high"], 2);

    // On disk, each tenant's partitions live under its own name.
    let logs: Vec<String> = std::fs::read_dir(data.path().join("logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        logs.iter().any(|d| d.starts_with("globex.orders-0")),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|d| d.starts_with("globex.__consumer_offsets-0")),
        "{logs:?}"
    );
    assert!(!logs.iter().any(|d| d.starts_with("orders-")), "{logs:?}");
    broker.stop();
    cp.stop();
}

/// A tenant's `storage_bytes` quota bounds what its logs take on a shared broker's volume:
/// once acme's records take it, acme's produce is refused with POLICY_VIOLATION while
/// globex, on the same broker, writes on; a larger quota lets acme write again.
#[test]
fn a_tenant_at_its_storage_quota_writes_no_more_and_others_write_on() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("storage_quota").unwrap();
    let (_cp, admin_addr, controller) = control_plane(&url);
    let mut keys = Vec::new();
    for tenant in ["acme", "globex"] {
        common::admin::admin(
            &admin_addr,
            "POST",
            "/v1/tenants",
            &format!(r#"{{"name":"{tenant}"}}"#),
        );
        new_principal(&admin_addr, tenant, "app", TOPICS_AND_GROUPS);
        keys.push(issue_api_key(&admin_addr, tenant, "app"));
    }
    let (acme, globex) = (&keys[0], &keys[1]);
    // A principal may not hold a storage quota: it limits the tenant's logs.
    let (code, problem) = common::http(
        &admin_addr,
        "PUT",
        "/v1/tenants/acme/principals/app/quota",
        Some(TOKEN),
        r#"{"storage_bytes":100000}"#,
    );
    assert_eq!(code, 422, "{problem}");
    common::admin::admin(
        &admin_addr,
        "PUT",
        "/v1/tenants/acme/quota",
        r#"{"storage_bytes":100000}"#,
    );
    let data = tempfile::tempdir().unwrap();
    let broker = Process::start(&mut every_tenant_broker(
        &controller,
        data.path(),
        1,
        EVERY_TENANT_LISTENERS,
    ));
    let sasl = field(&broker.first_line, "(SASL_PLAINTEXT) on ");
    for tenant in ["acme", "globex"] {
        common::admin::admin(
            &admin_addr,
            "POST",
            &format!("/v1/tenants/{tenant}/topics"),
            r#"{"topic_name":"bulk","partitions_count":1}"#,
        );
    }
    let call = |who: &(String, String), args: &[&str]| sasl_acls(&python, &sasl, who, args);
    // Its ACLs and quota reach the broker with the metadata stream.
    wait_for(|| (call(acme, &["produce", "bulk"])["result"] == "ok").then_some(()));

    // 200 KB against a 100 KB quota: what the broker took before it next summed acme's
    // logs is kept, and from then on acme is refused.
    let filled = call(acme, &["fill", "bulk", "200", "1000"]);
    println!("acme filling past its quota: {filled}");
    let refused = wait_for(|| {
        let answer = call(acme, &["produce", "bulk"]);
        (answer["result"] != "ok").then_some(answer)
    });
    assert_eq!(refused["result"], "POLICY_VIOLATION", "{refused}");
    // globex is not touched.
    let theirs = call(globex, &["fill", "bulk", "200", "1000"]);
    assert_eq!(theirs["result"], "ok", "{theirs}");
    assert_eq!(theirs["delivered"], 200, "{theirs}");
    // A larger quota lets acme write again.
    common::admin::admin(
        &admin_addr,
        "PUT",
        "/v1/tenants/acme/quota",
        r#"{"storage_bytes":10000000}"#,
    );
    wait_for(|| (call(acme, &["produce", "bulk"])["result"] == "ok").then_some(()));
}

#[test]
fn a_broker_serving_every_tenant_refuses_listeners_without_authentication() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("multi_tenant_refusal").unwrap();
    let (cp, _admin, controller) = control_plane(&url);
    let data = tempfile::tempdir().unwrap();
    for (listeners, refusal) in [
        (
            "INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "needs SASL on every listener",
        ),
        (
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "needs SASL_PLAINTEXT or SASL_SSL there",
        ),
    ] {
        let out = every_tenant_broker(&controller, data.path(), 1, listeners)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(refusal), "{listeners}: {stderr}");
    }
    cp.stop();
}

/// Two brokers serving every tenant replicate a tenant's partition over their
/// SASL_PLAINTEXT inter-broker listener, each presenting its controller credential; a
/// client there is still only its tenant, a credential of another secret or of one tenant
/// is refused, and nothing reaches every tenant's names without a broker's credential.
#[test]
fn brokers_serving_every_tenant_authenticate_each_other() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("multi_tenant_replication").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    common::admin::admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "app", TOPICS_AND_GROUPS);
    let acme = issue_api_key(&admin_addr, "acme", "app");
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let brokers: Vec<Process> = (1..=2)
        .map(|node| {
            Process::start(&mut every_tenant_broker(
                &controller,
                dirs[node - 1].path(),
                node as i32,
                EVERY_TENANT_LISTENERS,
            ))
        })
        .collect();
    let sasl = field(&brokers[0].first_line, "(SASL_PLAINTEXT) on ");
    let internal = field(&brokers[0].first_line, " on ");
    let call = |at: &str, who: &(String, String), args: &[&str]| sasl_acls(&python, at, who, args);
    // Both brokers registered before the topic is placed on both.
    wait_for(|| {
        let created = call(&sasl, &acme, &["create", "orders", "2"]);
        (created["result"] == "ok" || created["result"] == "TOPIC_ALREADY_EXISTS").then_some(())
    });
    // The follower copies the partition over SASL: both replicas come into the ISR.
    wait_for(|| {
        let described = call(&sasl, &acme, &["brokers", "orders"]);
        (described["isr"]["0"] == serde_json::json!([1, 2])).then_some(())
    });
    assert_eq!(call(&sasl, &acme, &["produce", "orders"])["result"], "ok");
    for dir in &dirs {
        let logs: Vec<String> = std::fs::read_dir(dir.path().join("logs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            logs.iter().any(|d| d.starts_with("acme.orders-0")),
            "{logs:?}"
        );
    }
    // A tenant's client on the inter-broker listener is its tenant, nothing more.
    assert_eq!(
        call(&internal, &acme, &["metadata"])["topics"],
        serde_json::json!(["orders"])
    );
    // A broker's credential sees every tenant's names; one of another secret, or of a
    // broker of one tenant, is refused and writes nothing.
    let token = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap().trim().to_owned();
    let cluster = (
        "skein-broker".to_owned(),
        token(controller_token_file("broker", &["*"])),
    );
    assert_eq!(
        call(&internal, &cluster, &["metadata"])["topics"],
        serde_json::json!(["acme.orders"])
    );
    let one_tenant = (
        "skein-broker".to_owned(),
        token(controller_token_file("broker", &["acme"])),
    );
    assert_ne!(
        call(&internal, &one_tenant, &["produce", "acme.orders"])["result"],
        "ok"
    );
    let forged_secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(forged_secret.path(), "f".repeat(48)).unwrap();
    let forged = Command::new(SKEIN)
        .args([
            "controller-token",
            "--role",
            "broker",
            "--tenant",
            "*",
            "--any-node",
            "--secret-file",
        ])
        .arg(forged_secret.path())
        .output()
        .unwrap();
    let forged = (
        "skein-broker".to_owned(),
        String::from_utf8_lossy(&forged.stdout).trim().to_owned(),
    );
    assert_ne!(
        call(&internal, &forged, &["produce", "acme.orders"])["result"],
        "ok"
    );
    assert_eq!(
        call(&sasl, &acme, &["watermark", "orders"])["high"],
        1,
        "refused writers wrote nothing"
    );
    for broker in brokers {
        broker.stop();
    }
    cp.stop();
}

/// The bytes of partition `dir`'s log segments under a broker's data directory.
fn log_bytes(data: &std::path::Path, dir: &str) -> u64 {
    std::fs::read_dir(data.join("logs").join(dir))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Brokers serving every tenant replicate over a SASL_SSL inter-broker listener: each
/// follower checks its leader's certificate against `--ssl-truststore-location`, then logs
/// in with its controller credential, and copies the partition. A follower that trusts
/// another authority copies nothing.
#[test]
fn brokers_serving_every_tenant_replicate_over_sasl_ssl() {
    let python = python();
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("multi_tenant_tls").unwrap();
    let (cp, admin_addr, controller) = control_plane(&url);
    common::admin::admin(&admin_addr, "POST", "/v1/tenants", r#"{"name":"acme"}"#);
    new_principal(&admin_addr, "acme", "app", TOPICS_AND_GROUPS);
    let acme = issue_api_key(&admin_addr, "acme", "app");
    let certs = tempfile::tempdir().unwrap();
    common::tls::certificates(certs.path(), "cluster");
    common::tls::certificates(certs.path(), "stranger");
    let path = |name: &str| certs.path().join(name).to_str().unwrap().to_owned();
    let broker = |node: i32, data: &std::path::Path, trusted: &str| {
        let mut command = every_tenant_broker_with(
            &controller,
            data,
            node,
            EVERY_TENANT_LISTENERS,
            "INTERNAL:SASL_SSL",
        );
        // A follower that cannot fetch leaves the ISR within seconds.
        command.env("SKEIN_BROKER_REPLICA_LAG_TIME_MAX_MS", "3000");
        command.args([
            "--ssl-certificate-location",
            &path("cluster.pem"),
            "--ssl-key-location",
            &path("cluster.key"),
            "--ssl-truststore-location",
            &path(trusted),
        ]);
        Process::start(&mut command)
    };
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut brokers: Vec<Process> = (1..=2)
        .map(|node| broker(node, dirs[node as usize - 1].path(), "cluster-ca.pem"))
        .collect();
    assert!(
        brokers[0].first_line.contains("(INTERNAL, SASL_SSL)"),
        "{}",
        brokers[0].first_line
    );
    // Both brokers bootstrap the clients, since either may be the one restarted below.
    let sasl = brokers
        .iter()
        .map(|b| field(&b.first_line, "(SASL_PLAINTEXT) on "))
        .collect::<Vec<_>>()
        .join(",");
    let call = |who: &(String, String), args: &[&str]| sasl_acls(&python, &sasl, who, args);
    wait_for(|| {
        let created = call(&acme, &["create", "orders", "2"]);
        (created["result"] == "ok" || created["result"] == "TOPIC_ALREADY_EXISTS").then_some(())
    });
    // The follower copies the partition over TLS: both replicas come into the ISR.
    wait_for(|| {
        let described = call(&acme, &["brokers", "orders"]);
        (described["isr"]["0"] == serde_json::json!([1, 2])).then_some(())
    });
    assert_eq!(call(&acme, &["produce", "orders"])["result"], "ok");
    wait_for(|| {
        let sizes: Vec<u64> = dirs
            .iter()
            .map(|d| log_bytes(d.path(), "acme.orders-0"))
            .collect();
        (sizes[0] > 0 && sizes[0] == sizes[1]).then_some(())
    });

    // A gateway reaches the same brokers in TLS when it trusts their authority, and
    // writes a tenant's record over REST; one that speaks plaintext to them writes nothing.
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "g".repeat(48)).unwrap();
    let basic = {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", acme.0, acme.1))
        )
    };
    let write = |rest: &str| {
        common::request(
            rest,
            "POST",
            "/v1/topics/orders/records",
            &[("Authorization", &basic)],
            r#"{"records":[{"value":"through the gateway"}]}"#,
        )
    };
    let (plain_gateway, plain_rest, _) = gateway(
        &controller,
        &["--jwt-hs256-secret-file", secret.path().to_str().unwrap()],
    );
    // Long enough for its view of the cluster to name the brokers.
    for _ in 0..6 {
        let refused = write(&plain_rest);
        assert_ne!(refused.status, 200, "{}", refused.body);
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    plain_gateway.stop();
    let (tls_gateway, tls_rest, _) = gateway(
        &controller,
        &[
            "--jwt-hs256-secret-file",
            secret.path().to_str().unwrap(),
            "--kafka-ssl-ca-location",
            &path("cluster-ca.pem"),
        ],
    );
    let written = wait_for(|| {
        let answer = write(&tls_rest);
        (answer.status == 200).then_some(answer)
    });
    assert_eq!(
        written.json()["results"][0]["offset"],
        1,
        "{}",
        written.body
    );
    tls_gateway.stop();

    // The follower comes back trusting another authority: the leader's certificate no
    // longer passes, and what is written after that does not reach it.
    let leader = call(&acme, &["brokers", "orders"])["leaders"]["0"]
        .as_i64()
        .unwrap() as usize;
    let follower = 3 - leader;
    let stopped = brokers.remove(follower - 1);
    stopped.stop();
    let restarted = broker(
        follower as i32,
        dirs[follower - 1].path(),
        "stranger-ca.pem",
    );
    let before = log_bytes(dirs[follower - 1].path(), "acme.orders-0");
    wait_for(|| {
        let described = call(&acme, &["brokers", "orders"]);
        (described["isr"]["0"] == serde_json::json!([leader])).then_some(())
    });
    for _ in 0..3 {
        assert_eq!(call(&acme, &["produce-to", "orders", "0"])["result"], "ok");
    }
    std::thread::sleep(std::time::Duration::from_secs(5));
    let leader_bytes = log_bytes(dirs[leader - 1].path(), "acme.orders-0");
    assert!(leader_bytes > before, "{leader_bytes} vs {before}");
    assert_eq!(
        log_bytes(dirs[follower - 1].path(), "acme.orders-0"),
        before,
        "a follower that does not trust the leader's certificate copied from it"
    );
    restarted.stop();
    for broker in brokers {
        broker.stop();
    }
    cp.stop();
}
