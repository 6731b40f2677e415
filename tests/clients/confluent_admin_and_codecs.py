"""confluent-kafka (librdkafka) against a Skein broker: topic admin, then 10k messages per
compression codec with acks=all, read back identical and in order per partition, the same
key always in the same partition.

Usage: confluent_admin_and_codecs.py BOOTSTRAP
"""

import sys

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

BOOTSTRAP = sys.argv[1]
TOPIC = "codecs"
PER_CODEC = 10_000


def expect_error(future, code):
    try:
        future.result(10)
    except KafkaException as e:
        assert e.args[0].code() == code, f"expected {code}, got {e.args[0]}"
        return
    raise AssertionError(f"expected error {code}, got success")


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(10)
assert len(admin.list_topics(timeout=10).topics[TOPIC].partitions) == 3
expect_error(admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC], KafkaError.TOPIC_ALREADY_EXISTS)
expect_error(admin.create_topics([NewTopic("zero", 0, 1)])["zero"], KafkaError.INVALID_PARTITIONS)
expect_error(admin.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"], KafkaError.TOPIC_EXCEPTION)
expect_error(admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"], KafkaError.INVALID_REPLICATION_FACTOR)
admin.create_partitions([NewPartitions(TOPIC, 4)])[TOPIC].result(10)
assert len(admin.list_topics(timeout=10).topics[TOPIC].partitions) == 4
expect_error(admin.create_partitions([NewPartitions(TOPIC, 2)])[TOPIC], KafkaError.INVALID_PARTITIONS)
# A broker on its own keeps no ACLs and says so, as Kafka does without an authorizer
# (librdkafka drops DescribeAcls' top-level error, so that one reads as an empty list).
every_acl = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)
assert admin.describe_acls(every_acl).result(10) == []
carol = AclBinding(
    ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:carol", "*", AclOperation.READ, AclPermissionType.ALLOW
)
expect_error(admin.create_acls([carol])[carol], KafkaError.SECURITY_DISABLED)
# Manual assignments are accepted when they name this (only) broker.
admin.create_topics([NewTopic("assigned", 1, 1)])["assigned"].result(10)
admin.create_partitions([NewPartitions("assigned", 3, replica_assignment=[[0], [0]])])["assigned"].result(10)
assert len(admin.list_topics(timeout=10).topics["assigned"].partitions) == 3
expect_error(
    admin.create_partitions([NewPartitions("assigned", 4, replica_assignment=[[7]])])["assigned"],
    KafkaError.INVALID_REPLICA_ASSIGNMENT,
)

sent = {}  # partition -> [(key, value)] in offset order
for codec in ["gzip", "snappy", "lz4", "zstd", "none"]:
    producer = Producer(
        {"bootstrap.servers": BOOTSTRAP, "acks": "all", "compression.type": codec, "linger.ms": 5}
    )
    delivered = []

    def on_delivery(err, msg):
        assert err is None, err
        delivered.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    for i in range(PER_CODEC):
        key = f"key-{i % 97}".encode()
        producer.produce(TOPIC, key=key, value=f"{codec}-{i}".encode(), on_delivery=on_delivery)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert len(delivered) == PER_CODEC
    for partition, offset, key, value in sorted(delivered, key=lambda d: (d[0], d[1])):
        sent.setdefault(partition, []).append((offset, key, value))

# The same key always landed in the same partition.
partition_of = {}
for partition, records in sent.items():
    for _, key, _ in records:
        assert partition_of.setdefault(key, partition) == partition

consumer = Consumer(
    {"bootstrap.servers": BOOTSTRAP, "group.id": "unused", "enable.auto.commit": False}
)
consumer.assign([TopicPartition(TOPIC, p, 0) for p in sent])
received = {}
total = sum(len(r) for r in sent.values())
count = 0
while count < total:
    msg = consumer.poll(10)
    assert msg is not None, f"timed out after {count} of {total} messages"
    assert msg.error() is None, msg.error()
    received.setdefault(msg.partition(), []).append((msg.offset(), msg.key(), msg.value()))
    count += 1
consumer.close()
assert received == sent, "records read back differ from records sent"

admin.delete_topics([TOPIC])[TOPIC].result(10)
assert TOPIC not in admin.list_topics(timeout=10).topics
expect_error(admin.delete_topics([TOPIC])[TOPIC], KafkaError.UNKNOWN_TOPIC_OR_PART)
print("ok")
