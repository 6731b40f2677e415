//! The catalog's behaviour, run once on SQLite and once on a real PostgreSQL (`DATABASE_URL`,
//! or a throwaway cluster started for this test).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use skein_auth::{
    authorize, AclBinding, AclBindingFilter, Operation, PatternType, PatternTypeFilter, Permission,
    Principal, Resource, ResourceType,
};
use skein_catalog::{
    Backend, Catalog, CatalogError, KeyRefusal, NewBroker, NewTopic, PartitionUpdate,
    PrincipalKind, Quota,
};
use skein_testkit::Postgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("catalog.db").display());
    let catalog = Catalog::open(&url).await.unwrap();
    assert_eq!(catalog.backend(), Backend::Sqlite);
    suite(&catalog).await;
    // Migrations are recorded: opening again applies nothing and keeps the rows.
    catalog.close().await;
    let reopened = Catalog::open(&url).await.unwrap();
    assert!(reopened.tenant_by_name("acme").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    let server = Postgres::start().unwrap();
    let url = server.database("catalog").unwrap();
    let catalog = Catalog::open(&url).await.unwrap();
    assert_eq!(catalog.backend(), Backend::Postgres);
    suite(&catalog).await;
    catalog.close().await;
    let reopened = Catalog::open(&url).await.unwrap();
    assert!(reopened.tenant_by_name("acme").await.is_ok());
}

async fn suite(catalog: &Catalog) {
    tenants(catalog).await;
    principals(catalog).await;
    topics(catalog).await;
    partition_compare_and_set(catalog).await;
    concurrent_writers_one_wins(catalog).await;
    acls(catalog).await;
    acl_evaluation_table(catalog).await;
    api_keys(catalog).await;
    scram_credentials(catalog).await;
    quotas(catalog).await;
    partitions_quota(catalog).await;
    brokers_and_producer_ids(catalog).await;
    leases(catalog).await;
    idempotency_keys(catalog).await;
}

async fn idempotency_keys(catalog: &Catalog) {
    let first = catalog
        .claim_idempotency_key("acme", "alice", "req-1", "hash-a", 500)
        .await
        .unwrap();
    assert_eq!((first.producer_id, first.outcome.as_deref()), (500, None));
    // A later claim keeps the first producer id and hash.
    let again = catalog
        .claim_idempotency_key("acme", "alice", "req-1", "hash-b", 501)
        .await
        .unwrap();
    assert_eq!(again.producer_id, 500);
    assert_eq!(again.request_hash, "hash-a");
    catalog
        .complete_idempotency_key("acme", "alice", "req-1", "done")
        .await
        .unwrap();
    catalog
        .complete_idempotency_key("acme", "alice", "req-1", "later")
        .await
        .unwrap();
    let done = catalog
        .claim_idempotency_key("acme", "alice", "req-1", "hash-a", 502)
        .await
        .unwrap();
    assert_eq!(
        done.outcome.as_deref(),
        Some("done"),
        "the first outcome stays"
    );
    // Keys are per principal.
    let bob = catalog
        .claim_idempotency_key("acme", "bob", "req-1", "hash-a", 503)
        .await
        .unwrap();
    assert_eq!(bob.producer_id, 503);
}

async fn tenants(catalog: &Catalog) {
    let acme = catalog.create_tenant("acme").await.unwrap();
    assert_eq!(catalog.tenant_by_name("acme").await.unwrap(), acme);
    assert!(matches!(
        catalog.create_tenant("acme").await,
        Err(CatalogError::AlreadyExists { what: "tenant", .. })
    ));
    assert!(matches!(
        catalog.create_tenant("Not Valid").await,
        Err(CatalogError::Invalid { .. })
    ));
    for name in ["beta", "gamma", "delta"] {
        catalog.create_tenant(name).await.unwrap();
    }
    // Pages in name order.
    let first: Vec<String> = catalog
        .tenants(None, 2)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(first, ["acme", "beta"]);
    let second: Vec<String> = catalog
        .tenants(Some("beta"), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(second, ["delta", "gamma"]);
    catalog.delete_tenant("gamma").await.unwrap();
    assert!(matches!(
        catalog.delete_tenant("gamma").await,
        Err(CatalogError::NotFound { .. })
    ));
    assert!(matches!(
        catalog.tenant_by_name("gamma").await,
        Err(CatalogError::NotFound { .. })
    ));
}

async fn principals(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let beta = catalog.tenant_by_name("beta").await.unwrap();
    let alice = catalog
        .create_principal(&acme.id, PrincipalKind::User, "alice")
        .await
        .unwrap();
    catalog
        .create_principal(&acme.id, PrincipalKind::ServiceAccount, "billing")
        .await
        .unwrap();
    // The same name in another tenant is another principal.
    catalog
        .create_principal(&beta.id, PrincipalKind::User, "alice")
        .await
        .unwrap();
    assert!(matches!(
        catalog
            .create_principal(&acme.id, PrincipalKind::User, "alice")
            .await,
        Err(CatalogError::AlreadyExists { .. })
    ));
    assert!(matches!(
        catalog
            .create_principal(&acme.id, PrincipalKind::User, "User:evil")
            .await,
        Err(CatalogError::Invalid { .. })
    ));
    let listed = catalog.principals(&acme.id).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0], alice);
    assert_eq!(listed[1].kind, PrincipalKind::ServiceAccount);
    catalog.delete_principal(&acme.id, "billing").await.unwrap();
    assert_eq!(catalog.principals(&acme.id).await.unwrap().len(), 1);
    // Deleting a tenant takes its principals with it.
    let temp = catalog.create_tenant("temp").await.unwrap();
    catalog
        .create_principal(&temp.id, PrincipalKind::User, "x")
        .await
        .unwrap();
    catalog.delete_tenant("temp").await.unwrap();
    assert!(catalog.principals(&temp.id).await.unwrap().is_empty());
}

fn orders(partitions: usize) -> NewTopic {
    NewTopic {
        name: "orders".to_owned(),
        placement: (0..partitions)
            .map(|p| vec![p as i32 % 3, (p as i32 + 1) % 3])
            .collect(),
        configs: BTreeMap::from([("retention.ms".to_owned(), "60000".to_owned())]),
    }
}

async fn topics(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let beta = catalog.tenant_by_name("beta").await.unwrap();
    let created = catalog.create_topic(&acme.id, &orders(3)).await.unwrap();
    assert_eq!(created.partitions, 3);
    assert_eq!(created.replication_factor, 2);
    // Both tenants may have an `orders`; each sees only its own.
    let theirs = catalog.create_topic(&beta.id, &orders(1)).await.unwrap();
    assert_ne!(theirs.id, created.id);
    assert_eq!(catalog.topic(&acme.id, "orders").await.unwrap(), created);
    assert_eq!(catalog.topics(&beta.id).await.unwrap(), vec![theirs]);
    assert!(matches!(
        catalog.create_topic(&acme.id, &orders(1)).await,
        Err(CatalogError::AlreadyExists { what: "topic", .. })
    ));
    for bad in [
        NewTopic {
            name: "bad name".to_owned(),
            ..orders(1)
        },
        orders(0),
        NewTopic {
            placement: vec![vec![1, 1]],
            ..orders(1)
        },
        NewTopic {
            placement: vec![vec![1, 2], vec![1]],
            ..orders(1)
        },
    ] {
        assert!(
            matches!(
                catalog.create_topic(&acme.id, &bad).await,
                Err(CatalogError::Invalid { .. })
            ),
            "{bad:?}"
        );
    }
    let partitions = catalog.partitions(&created.id).await.unwrap();
    assert_eq!(partitions.len(), 3);
    assert_eq!(partitions[1].replicas, [1, 2]);
    assert_eq!(partitions[1].isr, [1, 2]);
    assert_eq!(partitions[1].leader, 1);
    assert_eq!(
        (partitions[1].leader_epoch, partitions[1].partition_epoch),
        (0, 0)
    );

    catalog
        .add_partitions(&created.id, 3, &[vec![0, 1], vec![1, 2]])
        .await
        .unwrap();
    assert_eq!(
        catalog.topic(&acme.id, "orders").await.unwrap().partitions,
        5
    );
    assert_eq!(
        catalog.partitions(&created.id).await.unwrap()[4].partition,
        4
    );
    // A stale count changes nothing.
    assert!(matches!(
        catalog.add_partitions(&created.id, 3, &[vec![0, 1]]).await,
        Err(CatalogError::Conflict { .. })
    ));
    assert_eq!(catalog.partitions(&created.id).await.unwrap().len(), 5);

    let scratch = NewTopic {
        name: "scratch".to_owned(),
        ..orders(2)
    };
    let scratch = catalog.create_topic(&acme.id, &scratch).await.unwrap();
    catalog.delete_topic(&acme.id, "scratch").await.unwrap();
    assert!(catalog.partitions(&scratch.id).await.unwrap().is_empty());
    assert!(matches!(
        catalog.topic(&acme.id, "scratch").await,
        Err(CatalogError::NotFound { .. })
    ));
}

async fn partition_compare_and_set(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let topic = catalog.topic(&acme.id, "orders").await.unwrap();
    // Shrinking the ISR keeps the leader and its epoch; the partition epoch moves.
    let shrunk = catalog
        .update_partition(
            &topic.id,
            0,
            &PartitionUpdate {
                expected_partition_epoch: 0,
                leader: 0,
                isr: vec![0],
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (shrunk.leader, shrunk.leader_epoch, shrunk.partition_epoch),
        (0, 0, 1)
    );
    assert_eq!(shrunk.isr, [0]);
    // A new leader bumps the leader epoch too.
    let moved = catalog
        .update_partition(
            &topic.id,
            0,
            &PartitionUpdate {
                expected_partition_epoch: 1,
                leader: 1,
                isr: vec![1, 0],
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (moved.leader, moved.leader_epoch, moved.partition_epoch),
        (1, 1, 2)
    );
    // A writer holding the old epoch is fenced.
    assert!(matches!(
        catalog
            .update_partition(
                &topic.id,
                0,
                &PartitionUpdate {
                    expected_partition_epoch: 1,
                    leader: 0,
                    isr: vec![0],
                },
            )
            .await,
        Err(CatalogError::Conflict { expected: 1, .. })
    ));
    assert!(matches!(
        catalog
            .update_partition(
                &topic.id,
                0,
                &PartitionUpdate {
                    expected_partition_epoch: 2,
                    leader: 7,
                    isr: vec![0],
                },
            )
            .await,
        Err(CatalogError::Invalid { .. })
    ));
    // AlterPartition: the leader of epoch 1 at partition epoch 2 shrinks its ISR.
    let altered = catalog
        .alter_isr(&topic.id, 0, 1, 1, 2, &[1])
        .await
        .unwrap();
    assert_eq!((altered.isr.clone(), altered.partition_epoch), (vec![1], 3));
    assert_eq!(catalog.partitions(&topic.id).await.unwrap()[0], altered);
    // A leader of an older epoch, a stale partition epoch, another broker: fenced.
    for (leader, leader_epoch, partition_epoch) in [(1, 0, 3), (1, 1, 2), (0, 1, 3)] {
        assert!(matches!(
            catalog
                .alter_isr(
                    &topic.id,
                    0,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    &[leader]
                )
                .await,
            Err(CatalogError::Conflict { .. })
        ));
    }
    // An ISR of brokers that are not replicas, or without the leader, is refused.
    for isr in [&[1, 9][..], &[0][..], &[1, 1][..]] {
        assert!(matches!(
            catalog.alter_isr(&topic.id, 0, 1, 1, 3, isr).await,
            Err(CatalogError::Invalid { .. })
        ));
    }
    // No live replica in the ISR: the partition is left without a leader, its ISR kept.
    let offline = catalog
        .update_partition(
            &topic.id,
            0,
            &PartitionUpdate {
                expected_partition_epoch: 3,
                leader: -1,
                isr: vec![1],
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (offline.leader, offline.leader_epoch, offline.isr),
        (-1, 2, vec![1])
    );
}

async fn concurrent_writers_one_wins(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let topic = catalog.topic(&acme.id, "orders").await.unwrap();
    for round in 0..10 {
        let current = catalog.partitions(&topic.id).await.unwrap()[2].clone();
        let write = |leader: i32| {
            let catalog = catalog.clone();
            let topic_id = topic.id.clone();
            let update = PartitionUpdate {
                expected_partition_epoch: current.partition_epoch,
                leader,
                isr: vec![leader],
            };
            tokio::spawn(async move { catalog.update_partition(&topic_id, 2, &update).await })
        };
        let (a, b) = (write(2), write(0));
        let results = [a.await.unwrap(), b.await.unwrap()];
        let won = results.iter().filter(|r| r.is_ok()).count();
        let fenced = results
            .iter()
            .filter(|r| matches!(r, Err(CatalogError::Conflict { .. })))
            .count();
        assert_eq!((won, fenced), (1, 1), "round {round}: {results:?}");
        let after = catalog.partitions(&topic.id).await.unwrap()[2].clone();
        assert_eq!(after.partition_epoch, current.partition_epoch + 1);
    }
}

fn binding(
    principal: &str,
    name: &str,
    pattern: PatternType,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        principal: principal.parse().unwrap(),
        host: "*".to_owned(),
        resource_type: ResourceType::Topic,
        resource_name: name.to_owned(),
        pattern_type: pattern,
        operation,
        permission,
    }
}

async fn acls(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let beta = catalog.tenant_by_name("beta").await.unwrap();
    let read_orders = binding(
        "User:alice",
        "orders",
        PatternType::Literal,
        Operation::Read,
        Permission::Allow,
    );
    let write_prefixed = binding(
        "User:alice",
        "ord",
        PatternType::Prefixed,
        Operation::Write,
        Permission::Allow,
    );
    let deny_bob = binding(
        "User:bob",
        "*",
        PatternType::Literal,
        Operation::All,
        Permission::Deny,
    );
    let first = catalog.create_acl(&acme.id, &read_orders).await.unwrap();
    assert_eq!(first.binding, read_orders);
    // Creating the same binding again is a no-op that answers the stored record.
    assert_eq!(
        catalog.create_acl(&acme.id, &read_orders).await.unwrap(),
        first
    );
    catalog.create_acl(&acme.id, &write_prefixed).await.unwrap();
    catalog.create_acl(&acme.id, &deny_bob).await.unwrap();
    catalog.create_acl(&beta.id, &read_orders).await.unwrap();
    // Invalid bindings are refused with a reason.
    let mut invalid = read_orders.clone();
    invalid.pattern_type = PatternType::Prefixed;
    invalid.resource_name = "*".to_owned();
    assert!(matches!(
        catalog.create_acl(&acme.id, &invalid).await,
        Err(CatalogError::Invalid { .. })
    ));

    let all = catalog
        .acls(&acme.id, &AclBindingFilter::ANY)
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(
        catalog
            .acls(&beta.id, &AclBindingFilter::ANY)
            .await
            .unwrap()
            .len(),
        1
    );
    // What was stored decides like what was written.
    let bindings: Vec<AclBinding> = all.iter().map(|r| r.binding.clone()).collect();
    let orders = Resource::new(ResourceType::Topic, "orders");
    let alice = Principal::user("alice");
    assert!(authorize(&bindings, &alice, "10.0.0.1", Operation::Write, &orders).is_allowed());
    assert!(authorize(&bindings, &alice, "10.0.0.1", Operation::Describe, &orders).is_allowed());
    assert!(!authorize(&bindings, &alice, "10.0.0.1", Operation::Delete, &orders).is_allowed());
    // A MATCH filter selects what applies to one topic name.
    let applying = AclBindingFilter {
        resource_type: Some(ResourceType::Topic),
        resource_name: Some("orders".to_owned()),
        pattern_type: PatternTypeFilter::Match,
        ..AclBindingFilter::ANY
    };
    assert_eq!(catalog.acls(&acme.id, &applying).await.unwrap().len(), 3);
    // Deleting by filter removes exactly the selected bindings of that tenant.
    let alice_only = AclBindingFilter {
        principal: Some(alice.clone()),
        ..AclBindingFilter::ANY
    };
    let deleted = catalog.delete_acls(&acme.id, &alice_only).await.unwrap();
    assert_eq!(deleted.len(), 2);
    let left = catalog
        .acls(&acme.id, &AclBindingFilter::ANY)
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].binding, deny_bob);
    assert_eq!(
        catalog
            .acls(&beta.id, &AclBindingFilter::ANY)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn api_keys(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let alice = catalog
        .principals(&acme.id)
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.name == "alice")
        .unwrap();
    let key = catalog.create_api_key(&alice.id).await.unwrap();
    assert_eq!(key.secret.len(), 64);
    let listed = catalog.api_keys(&alice.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].last_used_at, None);
    assert_eq!(
        catalog.verify_api_key(&key.id, &key.secret).await.unwrap(),
        Ok(alice.id.clone())
    );
    assert!(catalog.api_keys(&alice.id).await.unwrap()[0]
        .last_used_at
        .is_some());
    assert_eq!(
        catalog
            .authenticate_api_key(&key.id, &key.secret)
            .await
            .unwrap(),
        Ok(("acme".to_owned(), "alice".to_owned()))
    );
    assert_eq!(
        catalog
            .authenticate_api_key(&key.id, "f".repeat(64).as_str())
            .await
            .unwrap(),
        Err(KeyRefusal::WrongSecret)
    );
    assert_eq!(
        catalog
            .verify_api_key(&key.id, "0".repeat(64).as_str())
            .await
            .unwrap(),
        Err(KeyRefusal::WrongSecret)
    );
    assert_eq!(
        catalog
            .verify_api_key("no-such-key", &key.secret)
            .await
            .unwrap(),
        Err(KeyRefusal::Unknown)
    );
    // The secret is stored only as a hash: another key's secret never matches.
    let other = catalog.create_api_key(&alice.id).await.unwrap();
    assert_ne!(other.secret, key.secret);
    assert_eq!(
        catalog
            .verify_api_key(&key.id, &other.secret)
            .await
            .unwrap(),
        Err(KeyRefusal::WrongSecret)
    );
    let in_force = catalog.active_api_keys_with_tenants().await.unwrap();
    let acme = |id: &str| (id.to_owned(), "acme".to_owned());
    assert!(in_force.contains(&acme(&key.id)) && in_force.contains(&acme(&other.id)));
    catalog.revoke_api_key(&key.id).await.unwrap();
    assert_eq!(
        catalog.verify_api_key(&key.id, &key.secret).await.unwrap(),
        Err(KeyRefusal::Revoked)
    );
    let in_force = catalog.active_api_keys_with_tenants().await.unwrap();
    assert!(!in_force.contains(&acme(&key.id)) && in_force.contains(&acme(&other.id)));
    assert!(catalog.api_keys(&alice.id).await.unwrap()[0]
        .revoked_at
        .is_some());
    assert!(matches!(
        catalog.create_api_key("no-such-principal").await,
        Err(CatalogError::NotFound { .. })
    ));
}

/// SCRAM credentials: one per principal and mechanism, replaced in place, found by tenant
/// and user name, gone with their principal.
async fn scram_credentials(catalog: &Catalog) {
    use skein_scram::{Credential, Mechanism};
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let scram = catalog
        .create_principal(&acme.id, PrincipalKind::User, "scram-user")
        .await
        .unwrap();
    let first = Credential::from_password(Mechanism::Sha512, "one", b"salt-1", 4096).unwrap();
    catalog
        .put_scram_credential(&scram.id, &first)
        .await
        .unwrap();
    let sha256 = Credential::from_password(Mechanism::Sha256, "two", b"salt-2", 8192).unwrap();
    catalog
        .put_scram_credential(&scram.id, &sha256)
        .await
        .unwrap();
    let found = |mechanism| async move {
        catalog
            .scram_credential("acme", "scram-user", mechanism)
            .await
            .map(|found| found.map(|(credential, _)| credential))
    };
    assert_eq!(found(Mechanism::Sha512).await.unwrap(), Some(first.clone()));
    assert_eq!(found(Mechanism::Sha256).await.unwrap(), Some(sha256));
    // Another tenant's user of the same name is another user.
    assert!(catalog
        .scram_credential("globex", "scram-user", Mechanism::Sha512)
        .await
        .unwrap()
        .is_none());
    let replaced = Credential::from_password(Mechanism::Sha512, "three", b"salt-3", 16384).unwrap();
    catalog
        .put_scram_credential(&scram.id, &replaced)
        .await
        .unwrap();
    assert_eq!(found(Mechanism::Sha512).await.unwrap(), Some(replaced));
    let listed: Vec<_> = catalog
        .scram_credentials(&scram.id)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.mechanism, c.iterations))
        .collect();
    assert_eq!(
        listed,
        [(Mechanism::Sha256, 8192), (Mechanism::Sha512, 16384)]
    );
    let all = catalog.all_scram_credentials().await.unwrap();
    assert_eq!(
        all.iter()
            .filter(|(tenant, user, _)| tenant == "acme" && user == "scram-user")
            .count(),
        2
    );
    catalog
        .delete_scram_credential(&scram.id, Mechanism::Sha256)
        .await
        .unwrap();
    assert_eq!(found(Mechanism::Sha256).await.unwrap(), None);
    assert!(matches!(
        catalog
            .delete_scram_credential(&scram.id, Mechanism::Sha256)
            .await,
        Err(CatalogError::NotFound { .. })
    ));
    assert!(matches!(
        catalog
            .put_scram_credential("no-such-principal", &first)
            .await,
        Err(CatalogError::NotFound { .. })
    ));
    catalog
        .delete_principal(&acme.id, "scram-user")
        .await
        .unwrap();
    assert_eq!(found(Mechanism::Sha512).await.unwrap(), None);
}

/// The tenant-wide `partitions` quota bounds the partitions of all the tenant's topics, on
/// creation and on growth, and concurrent creations cannot overshoot it together.
async fn partitions_quota(catalog: &Catalog) {
    let tenant = catalog.create_tenant("quota-co").await.unwrap();
    let topic = |name: &str, partitions: usize| NewTopic {
        name: name.to_owned(),
        placement: vec![vec![1]; partitions],
        configs: BTreeMap::new(),
    };
    // Without a quota, nothing is refused.
    catalog
        .create_topic(&tenant.id, &topic("free", 8))
        .await
        .unwrap();
    let limit = |partitions: Option<i64>| Quota {
        partitions,
        ..Quota::default()
    };
    catalog
        .set_quota(&tenant.id, None, &limit(Some(12)))
        .await
        .unwrap();
    // A principal's quota does not count: topics belong to the tenant.
    let bob = catalog
        .create_principal(&tenant.id, PrincipalKind::User, "bob")
        .await
        .unwrap();
    catalog
        .set_quota(&tenant.id, Some(&bob.id), &limit(Some(1)))
        .await
        .unwrap();
    let small = catalog
        .create_topic(&tenant.id, &topic("small", 3))
        .await
        .unwrap();
    match catalog.create_topic(&tenant.id, &topic("big", 2)).await {
        Err(CatalogError::QuotaExceeded {
            what: "partitions",
            limit: 12,
            requested: 13,
        }) => {}
        other => panic!("expected the quota to refuse: {other:?}"),
    }
    assert!(matches!(
        catalog.topic(&tenant.id, "big").await,
        Err(CatalogError::NotFound { .. })
    ));
    catalog
        .create_topic(&tenant.id, &topic("last", 1))
        .await
        .unwrap();
    // At the quota, a name in use is still refused as in use.
    assert!(matches!(
        catalog.create_topic(&tenant.id, &topic("small", 1)).await,
        Err(CatalogError::AlreadyExists { .. })
    ));
    // Growing counts too, and a refused growth changes nothing.
    assert!(matches!(
        catalog.add_partitions(&small.id, 3, &[vec![1]]).await,
        Err(CatalogError::QuotaExceeded { .. })
    ));
    assert_eq!(catalog.partitions(&small.id).await.unwrap().len(), 3);
    catalog
        .set_quota(&tenant.id, None, &limit(Some(20)))
        .await
        .unwrap();
    catalog
        .add_partitions(&small.id, 3, &[vec![1]])
        .await
        .unwrap();
    // Racing creations: with room for 7 more, exactly two of four 3-partition topics fit.
    let racing: Vec<_> = (0..4)
        .map(|i| {
            let catalog = catalog.clone();
            let tenant = tenant.id.clone();
            let new = topic(&format!("race-{i}"), 3);
            tokio::spawn(async move { catalog.create_topic(&tenant, &new).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for race in racing {
        outcomes.push(race.await.unwrap());
    }
    let created = outcomes.iter().filter(|o| o.is_ok()).count();
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Err(CatalogError::QuotaExceeded { .. })))
        .count();
    assert_eq!((created, refused), (2, 2), "{outcomes:?}");
    // Removing the limit lifts it.
    catalog
        .set_quota(&tenant.id, None, &limit(None))
        .await
        .unwrap();
    catalog
        .create_topic(&tenant.id, &topic("after", 50))
        .await
        .unwrap();
}

async fn quotas(catalog: &Catalog) {
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let alice = catalog.principals(&acme.id).await.unwrap()[0].clone();
    let tenant_wide = Quota {
        produce_bytes_per_sec: Some(10 << 20),
        partitions: Some(100),
        ..Quota::default()
    };
    catalog
        .set_quota(&acme.id, None, &tenant_wide)
        .await
        .unwrap();
    let hers = Quota {
        fetch_bytes_per_sec: Some(1 << 20),
        request_percentage: Some(25),
        ..Quota::default()
    };
    catalog
        .set_quota(&acme.id, Some(&alice.id), &hers)
        .await
        .unwrap();
    // Setting again replaces.
    let tighter = Quota {
        produce_bytes_per_sec: Some(1 << 20),
        ..tenant_wide
    };
    catalog.set_quota(&acme.id, None, &tighter).await.unwrap();
    let listed = catalog.quotas(&acme.id).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(
        (listed[0].principal_id.as_deref(), listed[0].quota),
        (None, tighter)
    );
    assert_eq!(
        (listed[1].principal_id.as_deref(), listed[1].quota),
        (Some(alice.id.as_str()), hers)
    );
    assert!(matches!(
        catalog
            .set_quota(
                &acme.id,
                None,
                &Quota {
                    requests_per_sec: Some(0),
                    ..Quota::default()
                }
            )
            .await,
        Err(CatalogError::Invalid { .. })
    ));
    let everyone = catalog.all_quotas().await.unwrap();
    assert!(
        everyone.contains(&("acme".to_owned(), None, tighter)),
        "{everyone:?}"
    );
    assert!(
        everyone.contains(&("acme".to_owned(), Some("alice".to_owned()), hers)),
        "{everyone:?}"
    );
    catalog
        .delete_quota(&acme.id, Some(&alice.id))
        .await
        .unwrap();
    assert_eq!(catalog.quotas(&acme.id).await.unwrap().len(), 1);
    assert!(matches!(
        catalog.delete_quota(&acme.id, Some(&alice.id)).await,
        Err(CatalogError::NotFound { .. })
    ));
}

async fn brokers_and_producer_ids(catalog: &Catalog) {
    let broker = |node_id, host, port, rack, tenant| NewBroker {
        node_id,
        host,
        port,
        rack,
        tenant,
        advertised_listeners: None,
    };
    let before = catalog
        .register_broker(
            &broker(1, "10.0.0.1", 9092, Some("a"), Some("acme")),
            "inc-1",
        )
        .await
        .unwrap();
    catalog
        .register_broker(&broker(2, "10.0.0.2", 9092, None, None), "inc-1")
        .await
        .unwrap();
    assert!(catalog.broker_heartbeat(1, "inc-1").await.unwrap());
    // A restart re-registers under a new incarnation; the old one can no longer heartbeat.
    let listeners = "INTERNAL://10.0.0.9:9093,CLIENT://kafka-1.example.com:9094";
    catalog
        .register_broker(
            &NewBroker {
                advertised_listeners: Some(listeners),
                ..broker(1, "10.0.0.9", 9093, Some("a"), Some("acme"))
            },
            "inc-2",
        )
        .await
        .unwrap();
    assert!(!catalog.broker_heartbeat(1, "inc-1").await.unwrap());
    assert!(catalog.broker_heartbeat(1, "inc-2").await.unwrap());
    assert!(!catalog.broker_heartbeat(7, "inc-1").await.unwrap());
    let live = catalog.live_brokers(before.registered_at).await.unwrap();
    assert_eq!(live.iter().map(|b| b.node_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!((live[0].host.as_str(), live[0].port), ("10.0.0.9", 9093));
    assert_eq!(live[1].rack, None);
    assert_eq!(live[0].advertised_listeners.as_deref(), Some(listeners));
    assert_eq!(live[1].advertised_listeners, None);
    assert_eq!(
        (live[0].tenant.as_deref(), live[1].tenant.as_deref()),
        (Some("acme"), None)
    );
    assert!(catalog.live_brokers(i64::MAX).await.unwrap().is_empty());

    // Concurrent allocations never overlap.
    let mut tasks = Vec::new();
    for node in 0..8 {
        let catalog = catalog.clone();
        tasks.push(tokio::spawn(async move {
            catalog.allocate_producer_ids(node, 1000).await
        }));
    }
    let mut firsts = Vec::new();
    for task in tasks {
        firsts.push(task.await.unwrap().unwrap());
    }
    firsts.sort_unstable();
    assert_eq!(firsts, (0..8).map(|i| i * 1000).collect::<Vec<i64>>());
    assert!(catalog.allocate_producer_ids(0, 0).await.is_err());
}

async fn leases(catalog: &Catalog) {
    // Of two replicas racing for an absent lease, exactly one holds it.
    let race = |holder: &'static str| {
        let catalog = catalog.clone();
        tokio::spawn(async move { catalog.acquire_lease("controller", holder, 60_000).await })
    };
    let (a, b) = (race("a"), race("b"));
    let (a, b) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
    assert!(a.is_some() != b.is_some(), "{a:?} {b:?}");
    let (holder, other) = if a.is_some() { ("a", "b") } else { ("b", "a") };
    let held = a.or(b).unwrap();
    assert_eq!(held.epoch, 1);
    // The holder renews within the same epoch; the other is refused while it lasts.
    let renewed = catalog
        .acquire_lease("controller", holder, 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renewed.epoch, 1);
    assert!(catalog
        .acquire_lease("controller", other, 60_000)
        .await
        .unwrap()
        .is_none());
    // Once it lapses (here: released), the other takes it with the next epoch, and the old
    // holder cannot renew.
    catalog.release_lease("controller", holder).await.unwrap();
    let taken = catalog
        .acquire_lease("controller", other, 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.holder.as_str(), taken.epoch), (other, 2));
    assert!(catalog
        .acquire_lease("controller", holder, 60_000)
        .await
        .unwrap()
        .is_none());
    // A lease that expires on its own is taken the same way.
    let short = catalog
        .acquire_lease("short", "a", 1)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    let next = catalog
        .acquire_lease("short", "b", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.epoch, short.epoch + 1);
}

/// Kafka's evaluation rules over bindings read back from the catalog: the table a stored
/// ACL set must decide, on each backend.
async fn acl_evaluation_table(catalog: &Catalog) {
    let tenant = catalog.create_tenant("acl-table").await.unwrap();
    let stored = [
        binding(
            "User:alice",
            "orders",
            PatternType::Literal,
            Operation::Read,
            Permission::Allow,
        ),
        binding(
            "User:alice",
            "pay",
            PatternType::Prefixed,
            Operation::Write,
            Permission::Allow,
        ),
        binding(
            "User:*",
            "public",
            PatternType::Literal,
            Operation::Read,
            Permission::Allow,
        ),
        binding(
            "User:*",
            "*",
            PatternType::Literal,
            Operation::Describe,
            Permission::Allow,
        ),
        binding(
            "User:mallory",
            "public",
            PatternType::Literal,
            Operation::All,
            Permission::Deny,
        ),
        binding(
            "User:bob",
            "secrets",
            PatternType::Literal,
            Operation::Alter,
            Permission::Allow,
        ),
    ];
    for b in &stored {
        catalog.create_acl(&tenant.id, b).await.unwrap();
    }
    let bindings: Vec<AclBinding> = catalog
        .acls(&tenant.id, &AclBindingFilter::ANY)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.binding)
        .collect();
    assert_eq!(bindings.len(), stored.len());
    let table: &[(&str, Operation, &str, bool, &str)] = &[
        ("alice", Operation::Read, "orders", true, "LITERAL match"),
        (
            "alice",
            Operation::Read,
            "orders-eu",
            false,
            "LITERAL is not a prefix",
        ),
        (
            "alice",
            Operation::Write,
            "payments",
            true,
            "PREFIXED match",
        ),
        (
            "alice",
            Operation::Write,
            "orders",
            false,
            "no WRITE on orders",
        ),
        (
            "carol",
            Operation::Read,
            "public",
            true,
            "wildcard principal",
        ),
        (
            "mallory",
            Operation::Read,
            "public",
            false,
            "DENY beats the wildcard ALLOW",
        ),
        (
            "bob",
            Operation::Describe,
            "secrets",
            true,
            "ALTER implies DESCRIBE",
        ),
        (
            "carol",
            Operation::Describe,
            "anything",
            true,
            "wildcard resource",
        ),
        ("carol", Operation::Delete, "orders", false, "default deny"),
    ];
    for (who, operation, topic, allowed, why) in table {
        let decision = authorize(
            &bindings,
            &Principal::user(*who),
            "10.0.0.1",
            *operation,
            &Resource::new(ResourceType::Topic, topic),
        );
        assert_eq!(decision.is_allowed(), *allowed, "{why}: {decision:?}");
    }
}
