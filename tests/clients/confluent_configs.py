"""confluent-kafka topic configs against a Skein broker: create with overrides, describe,
alter incrementally, refuse unknown names and bad values; min.insync.replicas above the
replica count refuses acks=all; offsets_for_times finds records by timestamp.

Usage: confluent_configs.py BOOTSTRAP
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

BOOTSTRAP = sys.argv[1]
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})


def describe(topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(10)


def alter(topic, entries):
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    return admin.incremental_alter_configs([resource])[resource].result(10)


admin.create_topics(
    [NewTopic("configured", 1, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})]
)["configured"].result(10)
configs = describe("configured")
assert configs["retention.ms"].value == "3600000", configs["retention.ms"]
assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
assert configs["cleanup.policy"].value == "compact"
assert configs["segment.bytes"].value == "1073741824"
assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

alter("configured", [ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
assert describe("configured")["retention.ms"].value == "1000"
alter("configured", [ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
assert describe("configured")["retention.ms"].value == "604800000"

for bad in [{"no.such.config": "1"}, {"retention.ms": "soon"}]:
    try:
        admin.create_topics([NewTopic("bad-config", 1, 1, config=bad)])["bad-config"].result(10)
        raise AssertionError(f"{bad} was accepted")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.INVALID_CONFIG, e
try:
    alter("configured", [ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)])
    raise AssertionError("retention.ms=-7 was accepted")
except KafkaException as e:
    assert e.args[0].code() == KafkaError.INVALID_CONFIG, e

# The broker's own settings, read-only, under Kafka's names.
broker = ConfigResource(ResourceType.BROKER, "0")
settings = admin.describe_configs([broker])[broker].result(10)
assert settings["broker.id"].value == "0", settings["broker.id"]
assert settings["log.retention.ms"].value == "604800000"
assert settings["log.retention.ms"].is_default and settings["log.retention.ms"].is_read_only
assert settings["default.replication.factor"].value == "1"
assert "segment.bytes" not in settings, "topic names are the topic's, not the broker's"

# min.insync.replicas=2 on a single broker: acks=all is refused, acks=1 works.
admin.create_topics([NewTopic("isr2", 1, 1, config={"min.insync.replicas": "2"})])["isr2"].result(10)
errors = []
strict = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "retries": 0, "message.timeout.ms": 5000})
strict.produce("isr2", value=b"x", on_delivery=lambda err, msg: errors.append(err))
strict.flush(10)
assert errors and errors[0] is not None and errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors
ok = []
relaxed = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "1"})
relaxed.produce("isr2", value=b"x", on_delivery=lambda err, msg: ok.append(err))
relaxed.flush(10)
assert ok == [None], ok

# offsets_for_times: records stamped 1000 ms apart.
base = int(time.time() * 1000) - 100_000
p = Producer({"bootstrap.servers": BOOTSTRAP})
for i in range(10):
    p.produce("timed", value=f"{i}".encode(), timestamp=base + i * 1000, partition=0)
p.flush(10)
c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "unused"})
found = c.offsets_for_times([TopicPartition("timed", 0, base + 3500)], timeout=10)
assert found[0].offset == 4, found
found = c.offsets_for_times([TopicPartition("timed", 0, base + 99_000)], timeout=10)
assert found[0].offset == -1, found
c.close()
print("ok")
