//! The controller over gRPC against running replicas on a real PostgreSQL: registration,
//! placement on live brokers, topic changes, the metadata stream, and failover of the
//! controller lease between two replicas.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use skein_catalog::Catalog;
use skein_control_plane::{
    controller_server, credentials, ControllerConfig, ControllerService, CredentialVerifier,
    Leadership, LeaseKeeper, NewCredential, Role,
};
use skein_proto::controller as pb;
use skein_proto::controller::controller_client::ControllerClient;
use skein_proto::replicas::{Client, Credential};
use tokio_stream::StreamExt;
use tonic::Code;

const SECRET: &[u8] = b"the controller secret of these tests";

/// A credential for `role` covering `tenants`, signed with `secret`, for any node.
fn credential(secret: &[u8], role: Role, tenants: &[&str], acl_changes: bool) -> Credential {
    node_credential(secret, role, tenants, acl_changes, None)
}

/// A credential for `role` covering `tenants`, signed with `secret`, naming `node`.
fn node_credential(
    secret: &[u8],
    role: Role,
    tenants: &[&str],
    acl_changes: bool,
    node: Option<i32>,
) -> Credential {
    let token = credentials::mint(
        secret,
        &NewCredential {
            name: "test".to_owned(),
            role,
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
            acl_changes,
            node,
            valid_for: Duration::from_secs(600),
        },
    )
    .unwrap();
    Credential::bearer(&token).unwrap()
}

struct Replica {
    addr: String,
    server: tokio::task::JoinHandle<()>,
    keeper: tokio::task::JoinHandle<()>,
}

impl Replica {
    async fn start(url: &str, name: &str, lease_ttl: Duration) -> Self {
        let catalog = Catalog::open(url).await.unwrap();
        let mut config = ControllerConfig::new(name);
        config.lease_ttl = lease_ttl;
        config.watch_interval = Duration::from_millis(50);
        let leadership = Arc::new(Leadership::default());
        let keeper = LeaseKeeper::spawn(catalog.clone(), config.clone(), Arc::clone(&leadership));
        let service = ControllerService::new(catalog, config, leadership);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(controller_server(service, CredentialVerifier::new(SECRET)))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        Self {
            addr,
            server,
            keeper,
        }
    }

    /// A client with a broker credential for every tenant.
    async fn client(&self) -> Client {
        self.client_as(credential(SECRET, Role::Broker, &["*"], true))
            .await
    }

    async fn client_as(&self, credential: Credential) -> Client {
        let channel = tonic::transport::Endpoint::from_shared(self.addr.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        ControllerClient::with_interceptor(channel, credential)
    }

    /// As if the process were killed: it stops serving and stops renewing its lease.
    fn kill(&self) {
        self.keeper.abort();
        self.server.abort();
    }
}

async fn register(client: &mut Client, node_id: i32) {
    client
        .register_broker(pb::RegisterBrokerRequest {
            broker: Some(pb::BrokerEndpoint {
                node_id,
                host: format!("10.0.0.{node_id}"),
                port: 9092,
                rack: None,
                tenant: None,
                advertised_listeners: String::new(),
            }),
            incarnation: format!("start-{node_id}"),
        })
        .await
        .unwrap();
}

fn create(
    tenant: &str,
    name: &str,
    partitions: i32,
    replication_factor: i32,
) -> pb::CreateTopicRequest {
    pb::CreateTopicRequest {
        tenant: tenant.to_owned(),
        name: name.to_owned(),
        partitions,
        replication_factor,
        configs: [("retention.ms".to_owned(), "60000".to_owned())].into(),
        assignments: Vec::new(),
    }
}

/// Calls `create_topic` until the replica is active (its lease keeper's first round).
async fn create_when_active(
    client: &mut Client,
    request: pb::CreateTopicRequest,
    within: Duration,
) -> Result<pb::Topic, tonic::Status> {
    let deadline = Instant::now() + within;
    loop {
        match client.create_topic(request.clone()).await {
            Err(e) if e.code() == Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other.map(|r| r.into_inner().topic.unwrap()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_topics_on_live_brokers_and_streams_every_change() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("controller").unwrap();
    Catalog::open(&url)
        .await
        .unwrap()
        .create_tenant("acme")
        .await
        .unwrap();
    let replica = Replica::start(&url, "cp-1", Duration::from_secs(5)).await;
    let mut client = replica.client().await;
    for node in [1, 2, 3] {
        register(&mut client, node).await;
    }
    let heartbeat = |node_id: i32, incarnation: &str| pb::HeartbeatRequest {
        node_id,
        incarnation: incarnation.to_owned(),
    };
    assert!(
        client
            .heartbeat(heartbeat(1, "start-1"))
            .await
            .unwrap()
            .into_inner()
            .registered
    );
    assert!(
        !client
            .heartbeat(heartbeat(1, "stale"))
            .await
            .unwrap()
            .into_inner()
            .registered
    );

    let mut watch = client
        .watch_metadata(pb::WatchMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = watch.next().await.unwrap().unwrap();
    assert_eq!(first.brokers.len(), 3);
    assert!(first.topics.is_empty());

    let topic = create_when_active(
        &mut client,
        create("acme", "orders", 6, 2),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(topic.partitions.len(), 6);
    for p in &topic.partitions {
        assert_eq!(p.replicas.len(), 2);
        assert_ne!(p.replicas[0], p.replicas[1]);
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!(p.isr, p.replicas);
    }
    let mut leaders: Vec<i32> = topic.partitions.iter().map(|p| p.leader).collect();
    leaders.sort_unstable();
    assert_eq!(
        leaders,
        [1, 1, 2, 2, 3, 3],
        "leaders spread over the brokers"
    );
    assert_eq!(topic.configs["retention.ms"], "60000");

    // The stream delivers the change.
    let next = watch.next().await.unwrap().unwrap();
    assert!(next.version > first.version);
    assert_eq!(next.topics.len(), 1);
    assert_eq!(next.topics[0].tenant, "acme");
    assert_eq!(next.topics[0].partitions.len(), 6);
    assert_eq!(next.topics[0].configs["retention.ms"], "60000");

    // Refusals, each with its code and nothing written.
    let refused = |r: Result<pb::Topic, tonic::Status>| r.unwrap_err().code();
    assert_eq!(
        refused(
            create_when_active(&mut client, create("acme", "orders", 1, 1), Duration::ZERO).await
        ),
        Code::AlreadyExists
    );
    assert_eq!(
        refused(create_when_active(&mut client, create("acme", "big", 1, 4), Duration::ZERO).await),
        Code::FailedPrecondition
    );
    assert_eq!(
        refused(create_when_active(&mut client, create("nobody", "t", 1, 1), Duration::ZERO).await),
        Code::NotFound
    );
    assert_eq!(
        refused(
            create_when_active(
                &mut client,
                create("acme", "bad name", 1, 1),
                Duration::ZERO
            )
            .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        refused(
            create_when_active(&mut client, create("acme", "none", 0, 1), Duration::ZERO).await
        ),
        Code::InvalidArgument
    );

    let grown = client
        .create_partitions(pb::CreatePartitionsRequest {
            tenant: "acme".to_owned(),
            name: "orders".to_owned(),
            count: 8,
            assignments: Vec::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .topic
        .unwrap();
    assert_eq!(grown.partitions.len(), 8);
    assert_eq!(grown.partitions[7].index, 7);
    let shrink = client
        .create_partitions(pb::CreatePartitionsRequest {
            tenant: "acme".to_owned(),
            name: "orders".to_owned(),
            count: 3,
            assignments: Vec::new(),
        })
        .await;
    assert_eq!(shrink.unwrap_err().code(), Code::InvalidArgument);
    let after_grow = watch.next().await.unwrap().unwrap();
    assert_eq!(after_grow.topics[0].partitions.len(), 8);

    // Quotas reach watchers too.
    let catalog = Catalog::open(&url).await.unwrap();
    let acme = catalog.tenant_by_name("acme").await.unwrap();
    let limit = skein_catalog::Quota {
        produce_bytes_per_sec: Some(1 << 20),
        ..Default::default()
    };
    catalog.set_quota(&acme.id, None, &limit).await.unwrap();
    let with_quota = watch.next().await.unwrap().unwrap();
    assert_eq!(with_quota.quotas.len(), 1);
    assert_eq!(with_quota.quotas[0].tenant, "acme");
    assert_eq!(with_quota.quotas[0].principal, None);
    assert_eq!(with_quota.quotas[0].produce_bytes_per_sec, Some(1 << 20));

    client
        .delete_topic(pb::DeleteTopicRequest {
            tenant: "acme".to_owned(),
            name: "orders".to_owned(),
        })
        .await
        .unwrap();
    let after_delete = watch.next().await.unwrap().unwrap();
    assert!(after_delete.topics.is_empty());

    // Producer-id blocks never overlap.
    let a = client
        .allocate_producer_ids(pb::AllocateProducerIdsRequest { node_id: 1 })
        .await
        .unwrap()
        .into_inner();
    let b = client
        .allocate_producer_ids(pb::AllocateProducerIdsRequest { node_id: 2 })
        .await
        .unwrap()
        .into_inner();
    assert!(b.first_id >= a.first_id + i64::from(a.size));
    replica.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_active_controller_dies() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("failover").unwrap();
    Catalog::open(&url)
        .await
        .unwrap()
        .create_tenant("acme")
        .await
        .unwrap();
    let ttl = Duration::from_secs(1);
    let replicas = [
        Replica::start(&url, "cp-a", ttl).await,
        Replica::start(&url, "cp-b", ttl).await,
    ];
    let mut clients = [replicas[0].client().await, replicas[1].client().await];
    register(&mut clients[0], 1).await;
    // Exactly one replica accepts changes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut accepted = Vec::new();
    for (i, client) in clients.iter_mut().enumerate() {
        match client
            .create_topic(create("acme", &format!("t{i}"), 1, 1))
            .await
        {
            Ok(_) => accepted.push(i),
            Err(e) => assert_eq!(e.code(), Code::Unavailable, "{e}"),
        }
    }
    assert_eq!(accepted.len(), 1, "{accepted:?}");
    let active = accepted[0];
    let standby = 1 - active;

    replicas[active].kill();
    let killed = Instant::now();
    // Keep the broker alive meanwhile, through the standby.
    client_heartbeat(&mut clients[standby]).await;
    let topic = create_when_active(
        &mut clients[standby],
        create("acme", "after", 1, 1),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let took = killed.elapsed();
    assert_eq!(topic.name, "after");
    assert!(took < ttl * 3, "took {took:?} with a {ttl:?} lease");
    replicas[standby].kill();
}

async fn client_heartbeat(client: &mut Client) {
    client
        .heartbeat(pb::HeartbeatRequest {
            node_id: 1,
            incarnation: "start-1".to_owned(),
        })
        .await
        .unwrap();
}

/// Every call needs a credential for its role: none, a forged one or one of another role is
/// refused, and a broker's credential reaches only its own tenants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_authenticated_and_held_to_their_role_and_tenants() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("controller_auth").unwrap();
    let catalog = Catalog::open(&url).await.unwrap();
    for tenant in ["acme", "globex"] {
        catalog.create_tenant(tenant).await.unwrap();
    }
    let replica = Replica::start(&url, "cp-1", Duration::from_secs(5)).await;
    let endpoint = |node_id: i32, tenant: &str| pb::RegisterBrokerRequest {
        broker: Some(pb::BrokerEndpoint {
            node_id,
            host: "127.0.0.1".to_owned(),
            port: 9092,
            rack: None,
            tenant: Some(tenant.to_owned()),
            advertised_listeners: String::new(),
        }),
        incarnation: format!("i-{node_id}"),
    };
    let acl = |tenant: &str| pb::CreateAclRequest {
        acl: Some(pb::Acl {
            tenant: tenant.to_owned(),
            principal: "User:mallory".to_owned(),
            host: "*".to_owned(),
            resource_type: "TOPIC".to_owned(),
            resource_name: "*".to_owned(),
            pattern_type: "LITERAL".to_owned(),
            operation: "ALL".to_owned(),
            permission: "ALLOW".to_owned(),
        }),
    };

    // No credential, or one signed with another secret: UNAUTHENTICATED, nothing done.
    for mut stranger in [
        replica.client_as(Credential::none()).await,
        replica
            .client_as(credential(
                b"not the controller's secret!!!!!",
                Role::Broker,
                &["*"],
                true,
            ))
            .await,
    ] {
        for status in [
            stranger.register_broker(endpoint(7, "acme")).await.err(),
            stranger.create_acl(acl("acme")).await.err(),
            stranger
                .watch_metadata(pb::WatchMetadataRequest {})
                .await
                .err(),
            stranger
                .authenticate_api_key(pb::AuthenticateApiKeyRequest {
                    key_id: "k".to_owned(),
                    secret: "s".to_owned(),
                })
                .await
                .err(),
        ] {
            assert_eq!(status.map(|s| s.code()), Some(Code::Unauthenticated));
        }
    }

    // A gateway watches and checks keys, and changes nothing.
    let mut gateway = replica
        .client_as(credential(SECRET, Role::Gateway, &[], false))
        .await;
    let refused = gateway
        .register_broker(endpoint(8, "acme"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let refused = create_when_active(
        &mut gateway,
        create("acme", "t", 1, 1),
        Duration::from_secs(10),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert_eq!(
        gateway.create_acl(acl("acme")).await.unwrap_err().code(),
        Code::PermissionDenied
    );

    // A broker of acme: registers, and changes topics, only for acme; no ACL changes unless
    // its credential allows them.
    let mut acme = replica
        .client_as(credential(SECRET, Role::Broker, &["acme"], false))
        .await;
    acme.register_broker(endpoint(1, "acme")).await.unwrap();
    assert_eq!(
        acme.register_broker(endpoint(2, "globex"))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    create_when_active(
        &mut acme,
        create("acme", "orders", 1, 1),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(
        acme.create_topic(create("globex", "stolen", 1, 1))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    assert_eq!(
        acme.create_acl(acl("acme")).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let mut allowed = replica
        .client_as(credential(SECRET, Role::Broker, &["acme"], true))
        .await;
    allowed.create_acl(acl("acme")).await.unwrap();
    assert_eq!(
        allowed.create_acl(acl("globex")).await.unwrap_err().code(),
        Code::PermissionDenied
    );

    // globex has a topic; acme's broker never sees it, nor any API key id.
    let mut everyone = replica.client().await;
    everyone
        .register_broker(endpoint(3, "globex"))
        .await
        .unwrap();
    // A broker serving every tenant keeps topics under other names than brokers serving one
    // tenant each: it cannot join them.
    let mut every_tenant = endpoint(4, "acme");
    if let Some(broker) = every_tenant.broker.as_mut() {
        broker.tenant = None;
    }
    let refused = everyone.register_broker(every_tenant).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    everyone
        .create_topic(create("globex", "secret", 1, 1))
        .await
        .unwrap();
    let globex = catalog.tenant_by_name("globex").await.unwrap();
    let svc = catalog
        .create_principal(
            &globex.id,
            skein_catalog::PrincipalKind::ServiceAccount,
            "svc",
        )
        .await
        .unwrap();
    let key = catalog.create_api_key(&svc.id).await.unwrap();
    let mut watched = acme
        .watch_metadata(pb::WatchMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    let snapshot = watched.next().await.unwrap().unwrap();
    assert!(
        snapshot.topics.iter().all(|t| t.tenant == "acme"),
        "{snapshot:?}"
    );
    assert!(snapshot.topics.iter().any(|t| t.name == "orders"));
    assert!(snapshot.acls.iter().all(|a| a.tenant == "acme"));
    assert!(snapshot.api_keys.is_empty());
    let mut all = gateway
        .watch_metadata(pb::WatchMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    let snapshot = all.next().await.unwrap().unwrap();
    assert!(snapshot.topics.iter().any(|t| t.tenant == "globex"));
    assert!(snapshot.api_keys.contains(&key.id));
    replica.kill();
}

/// A cluster's metadata may outgrow any one gRPC message: thousands of ACL bindings with
/// names at their length limit make a snapshot of several times tonic's 4 MiB, which used to
/// break every watcher. The controller sends it in chunks and a watcher assembles it whole,
/// and later snapshots keep coming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_larger_than_a_grpc_message_reaches_watchers_whole() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("controller_large").unwrap();
    Catalog::open(&url)
        .await
        .unwrap()
        .create_tenant("acme")
        .await
        .unwrap();
    let replica = Replica::start(&url, "cp-1", Duration::from_secs(5)).await;
    let admin = replica.client().await;
    let acl = |i: usize| pb::CreateAclRequest {
        acl: Some(pb::Acl {
            tenant: "acme".to_owned(),
            principal: format!("User:{i:0>200}"),
            host: "*".to_owned(),
            resource_type: "TOPIC".to_owned(),
            resource_name: format!("{i:0>width$}", width = skein_auth::MAX_RESOURCE_NAME_BYTES),
            pattern_type: "LITERAL".to_owned(),
            operation: "READ".to_owned(),
            permission: "ALLOW".to_owned(),
        }),
    };
    const BINDINGS: usize = 7_000;
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin.clone().create_acl(acl(0)).await.is_err() {
        assert!(Instant::now() < deadline, "the replica never became active");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..16 {
        let mut admin = admin.clone();
        writers.spawn(async move {
            for i in (1..BINDINGS).filter(|i| i % 16 == writer) {
                admin.create_acl(acl(i)).await.unwrap();
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }

    let watcher = skein_proto::replicas::ControllerReplicas::connect_lazy(
        std::slice::from_ref(&replica.addr),
        credential(SECRET, Role::Gateway, &[], false),
    )
    .unwrap();
    let mut snapshots = watcher.watch().await.unwrap();
    let snapshot = tokio::time::timeout(Duration::from_secs(30), snapshots.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.acls.len(), BINDINGS);
    let size = prost::Message::encoded_len(&snapshot);
    assert!(
        size > 2 * skein_proto::replicas::MAX_CONTROLLER_MESSAGE_BYTES,
        "the snapshot is only {size} bytes"
    );

    admin.clone().create_acl(acl(BINDINGS)).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(30), snapshots.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next.acls.len(), BINDINGS + 1);
    assert!(next.version > snapshot.version);
}

/// A broker credential speaks for its own node alone: registering, heartbeating, asking for
/// producer ids, shutting down or changing an ISR as another node is refused; a credential
/// for any node is held to the tenants of the node's registration; and one credential holds
/// a bounded number of metadata streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_credential_is_held_to_its_node_and_its_streams_are_bounded() {
    let postgres = skein_testkit::Postgres::start().unwrap();
    let url = postgres.database("controller_nodes").unwrap();
    let catalog = Catalog::open(&url).await.unwrap();
    for tenant in ["acme", "globex"] {
        catalog.create_tenant(tenant).await.unwrap();
    }
    let replica = Replica::start(&url, "cp-1", Duration::from_secs(5)).await;
    let endpoint = |node_id: i32, tenant: &str| pb::RegisterBrokerRequest {
        broker: Some(pb::BrokerEndpoint {
            node_id,
            host: "127.0.0.1".to_owned(),
            port: 9092,
            rack: None,
            tenant: Some(tenant.to_owned()),
            advertised_listeners: String::new(),
        }),
        incarnation: format!("i-{node_id}"),
    };
    let mut node_1 = replica
        .client_as(node_credential(
            SECRET,
            Role::Broker,
            &["acme"],
            false,
            Some(1),
        ))
        .await;
    let mut globex_2 = replica
        .client_as(node_credential(
            SECRET,
            Role::Broker,
            &["globex"],
            false,
            Some(2),
        ))
        .await;
    node_1.register_broker(endpoint(1, "acme")).await.unwrap();
    globex_2
        .register_broker(endpoint(2, "globex"))
        .await
        .unwrap();

    // Node 1's credential, as node 2: refused, whatever the call.
    let denied = |status: Option<tonic::Status>| {
        assert_eq!(status.map(|s| s.code()), Some(Code::PermissionDenied));
    };
    denied(node_1.register_broker(endpoint(2, "acme")).await.err());
    denied(
        node_1
            .heartbeat(pb::HeartbeatRequest {
                node_id: 2,
                incarnation: "i-2".to_owned(),
            })
            .await
            .err(),
    );
    denied(
        node_1
            .allocate_producer_ids(pb::AllocateProducerIdsRequest { node_id: 2 })
            .await
            .err(),
    );
    denied(
        node_1
            .controlled_shutdown(pb::ControlledShutdownRequest {
                node_id: 2,
                incarnation: "i-2".to_owned(),
            })
            .await
            .err(),
    );
    denied(
        node_1
            .alter_partition(pb::AlterPartitionRequest {
                tenant: "acme".to_owned(),
                topic: "orders".to_owned(),
                partition: 0,
                leader: 2,
                leader_epoch: 0,
                partition_epoch: 0,
                isr: vec![2],
            })
            .await
            .err(),
    );
    // As itself, it is served.
    let own = node_1
        .heartbeat(pb::HeartbeatRequest {
            node_id: 1,
            incarnation: "i-1".to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(own.registered);

    // A credential for any node of acme cannot heartbeat globex's node 2.
    let mut any_acme = replica
        .client_as(credential(SECRET, Role::Broker, &["acme"], false))
        .await;
    denied(
        any_acme
            .heartbeat(pb::HeartbeatRequest {
                node_id: 2,
                incarnation: "i-2".to_owned(),
            })
            .await
            .err(),
    );
    denied(
        any_acme
            .allocate_producer_ids(pb::AllocateProducerIdsRequest { node_id: 2 })
            .await
            .err(),
    );

    // Metadata streams: a bounded number per credential, the next refused.
    let mut streams = Vec::new();
    for _ in 0..skein_control_plane::watchers::MAX_STREAMS_PER_CREDENTIAL {
        streams.push(
            node_1
                .watch_metadata(pb::WatchMetadataRequest {})
                .await
                .unwrap(),
        );
    }
    let refused = node_1
        .watch_metadata(pb::WatchMetadataRequest {})
        .await
        .err();
    assert_eq!(refused.map(|s| s.code()), Some(Code::ResourceExhausted));
    // Another credential is not held back, and a closed stream gives its place back.
    assert!(globex_2
        .watch_metadata(pb::WatchMetadataRequest {})
        .await
        .is_ok());
    drop(streams.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match node_1.watch_metadata(pb::WatchMetadataRequest {}).await {
            Ok(_) => break,
            Err(e) if e.code() == Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}
