"""confluent-kafka against a broker that joined the controller.

Usage: controlled_cluster.py BOOTSTRAP PHASE
  create: create `orders` (3 partitions) through Kafka's CreateTopics, produce 30 keyed
          records and read them back, set its retention.ms with IncrementalAlterConfigs;
  wait-for TOPIC / wait-gone TOPIC: until the topic is (or is no longer) listed;
  check:  `orders` still has 3 partitions and its 30 records;
  list-acls: the ACLs DescribeAcls lists; create-acl: one for User:bob through CreateAcls;
  delete-acls: delete User:bob's ACLs (DeleteAcls);
  try-acl-changes: try both once; print each Kafka error's name (or "ok");
  create-topic NAME: create a topic, retrying while the controller fails over;
  produce-only: 30 keyed records to `orders`; topics: the topics listed;
  count: how many records `orders` holds.
  try-create-topic NAME PARTITIONS: create a topic once; print the Kafka error's name;
  validate-topic NAME PARTITIONS: the same with validate_only;
  metered TOPIC COUNT: produce COUNT records of 10 KB to partition 0 of TOPIC and read them
          back from the start; print how long each took and the largest throttle time the
          broker reported to each client.
Prints one line of JSON; exits non-zero on any failure.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

BOOTSTRAP, PHASE = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})


def topics():
    return {name: len(t.partitions) for name, t in admin.list_topics(timeout=10).topics.items()}


def read_all(topic, partitions, expected):
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = []
    deadline = time.time() + 30
    while len(seen) < expected and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise RuntimeError(msg.error())
        seen.append((msg.key().decode(), msg.value().decode()))
    consumer.close()
    return sorted(seen)


EXPECTED = sorted((f"k{i}", f"v{i}") for i in range(30))

if PHASE == "create":
    admin.create_topics([NewTopic("orders", num_partitions=3, replication_factor=1)])["orders"].result(15)
    # Idempotent: its producer id comes from a block the controller handed this broker.
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True})
    for key, value in EXPECTED:
        producer.produce("orders", key=key, value=value)
    assert producer.flush(15) == 0
    assert read_all("orders", 3, 30) == EXPECTED
    retention = ConfigResource(
        "topic",
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([retention])[retention].result(15)
    print(json.dumps({"topics": topics()}))
elif PHASE in ("wait-for", "wait-gone"):
    name = sys.argv[3]
    deadline = time.time() + 20
    while (name in topics()) != (PHASE == "wait-for"):
        if time.time() > deadline:
            raise SystemExit(f"{name}: still {'absent' if PHASE == 'wait-for' else 'listed'}")
        time.sleep(0.2)
    print(json.dumps({"topics": topics()}))
elif PHASE == "check":
    listed = topics()
    assert listed.get("orders") == 3, listed
    assert read_all("orders", 3, 30) == EXPECTED
    print(json.dumps({"topics": listed}))
elif PHASE == "list-acls":
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    print(json.dumps(sorted(
        f"{b.principal} {b.operation.name} {b.restype.name} {b.resource_pattern_type.name} {b.name}"
        for b in admin.describe_acls(everything).result(15)
    )))
elif PHASE == "create-acl":
    bob = AclBinding(
        ResourceType.TOPIC, "pay", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW
    )
    admin.create_acls([bob])[bob].result(15)
    print(json.dumps({"created": "User:bob"}))
elif PHASE == "try-acl-changes":
    bob = AclBinding(
        ResourceType.TOPIC, "pay", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW
    )
    bobs = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY
    )

    def outcome(future):
        try:
            future.result(15)
            return "ok"
        except KafkaException as e:
            return e.args[0].name()

    print(json.dumps({
        "create": outcome(admin.create_acls([bob])[bob]),
        "delete": outcome(admin.delete_acls([bobs])[bobs]),
    }))
elif PHASE == "delete-acls":
    bobs = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY
    )
    deleted = admin.delete_acls([bobs])[bobs].result(15)
    print(json.dumps({"deleted": [f"{b.principal} {b.name}" for b in deleted]}))
elif PHASE == "produce-only":
    # Idempotent: its producer id comes from a block the controller handed this broker.
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True})
    for key, value in EXPECTED:
        producer.produce("orders", key=key, value=value)
    assert producer.flush(15) == 0
    print(json.dumps({"produced": len(EXPECTED)}))
elif PHASE == "create-topic":
    # Retried: during a controller failover the broker answers NOT_CONTROLLER for a moment.
    name, tries, deadline = sys.argv[3], 0, time.time() + 30
    while True:
        tries += 1
        try:
            admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
            break
        except KafkaException:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    print(json.dumps({"created": name, "tries": tries}))
elif PHASE in ("try-create-topic", "validate-topic"):
    # Creates NAME with PARTITIONS partitions once (or only asks whether it could, with
    # validate_only); prints the Kafka error's name, or null.
    name, partitions = sys.argv[3], int(sys.argv[4])
    try:
        admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)],
            validate_only=PHASE == "validate-topic",
        )[name].result(15)
        print(json.dumps({"error": None}))
    except KafkaException as e:
        print(json.dumps({"error": e.args[0].name(), "message": e.args[0].str()}))
elif PHASE == "metered":
    topic, count = sys.argv[3], int(sys.argv[4])
    throttles = {"producer": 0.0, "consumer": 0.0}

    def throttled(who):
        def record(event):
            throttles[who] = max(throttles[who], event.throttle_time)
        return record

    value = b"x" * 10_000
    producer = Producer({
        "bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 5,
        "throttle_cb": throttled("producer"),
    })
    started = time.time()
    # One record per request, as a client producing steadily sends them.
    for _ in range(count):
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(120) == 0
    produce_secs = time.time() - started
    consumer = Consumer({
        "bootstrap.servers": BOOTSTRAP, "group.id": "metered", "enable.auto.commit": False,
        "throttle_cb": throttled("consumer"),
        # About two records per fetch, as a consumer keeping up with a steady flow reads.
        "fetch.max.bytes": 20_000, "max.partition.fetch.bytes": 20_000, "message.max.bytes": 20_000,
    })
    end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    start = end - count
    started = time.time()
    consumer.assign([TopicPartition(topic, 0, start)])
    read = 0
    while read < count:
        msg = consumer.poll(1.0)
        if time.time() - started > 120:
            raise SystemExit(f"read {read} of {count}")
        if msg is not None and not msg.error():
            read += 1
    fetch_secs = time.time() - started
    consumer.close()
    print(json.dumps({
        "produce_secs": produce_secs, "fetch_secs": fetch_secs,
        "producer_throttle": throttles["producer"], "consumer_throttle": throttles["consumer"],
    }))
elif PHASE == "topics":
    print(json.dumps(topics()))
elif PHASE == "count":
    # How many records `orders` holds (all partitions, from the start).
    partitions = topics()["orders"]
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "count", "enable.auto.commit": False})
    consumer.assign([TopicPartition("orders", p, 0) for p in range(partitions)])
    count, quiet_since = 0, time.time()
    while time.time() - quiet_since < 2:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            count, quiet_since = count + 1, time.time()
    consumer.close()
    print(json.dumps({"orders": count}))
else:
    raise SystemExit(f"unknown phase {PHASE}")
