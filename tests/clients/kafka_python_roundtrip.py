"""kafka-python against a Skein broker: produce and consume back, then a consumer group
that commits and a second consumer of the group that resumes after the commit; then topic
configs replaced as a whole with the legacy AlterConfigs API, which kafka-python's
alter_configs sends.

Usage: kafka_python_roundtrip.py BOOTSTRAP
"""

import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

BOOTSTRAP = sys.argv[1]
TOPIC, GROUP = "kp-topic", "kp-group"

producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
for i in range(200):
    producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
producer.flush(30)

# A plain consumer (no group) reads everything back in order.
plain = KafkaConsumer(bootstrap_servers=BOOTSTRAP, consumer_timeout_ms=5000, auto_offset_reset="earliest")
plain.assign([TopicPartition(TOPIC, 0)])
plain.seek_to_beginning()
values = [m.value.decode() for m in plain][:200]
assert values == [f"v{i}" for i in range(200)], values[:5]
plain.close()

# A group member reads half and commits.
first = KafkaConsumer(
    TOPIC,
    bootstrap_servers=BOOTSTRAP,
    group_id=GROUP,
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    consumer_timeout_ms=10000,
)
seen = []
for message in first:
    seen.append(message.value.decode())
    if len(seen) == 100:
        break
first.commit()
first.close()
assert seen == [f"v{i}" for i in range(100)], seen[:5]

# The next member of the group starts after the commit.
second = KafkaConsumer(
    TOPIC,
    bootstrap_servers=BOOTSTRAP,
    group_id=GROUP,
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    consumer_timeout_ms=5000,
)
rest = [m.value.decode() for m in second]
second.close()
assert rest == [f"v{i}" for i in range(100, 200)], rest[:5]

# Legacy AlterConfigs replaces a topic's overrides: what it leaves out returns to default.
admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic("kp-configs", 1, 1, topic_configs={"retention.ms": "1000", "cleanup.policy": "compact"})])


def described(topic):
    response = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])[0]
    (error, _, _, _, entries) = response.resources[0]
    assert error == 0, response
    return {entry[0]: entry[1] for entry in entries}


assert described("kp-configs")["cleanup.policy"] == "compact"
response = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-configs", configs={"retention.ms": "5000"})])
assert [r[0] for r in response.resources] == [0], response
configs = described("kp-configs")
assert configs["retention.ms"] == "5000", configs["retention.ms"]
assert configs["cleanup.policy"] == "delete", configs["cleanup.policy"]
# A bad value is refused with INVALID_CONFIG (40) and changes nothing.
response = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-configs", configs={"retention.ms": "soon"})])
assert [r[0] for r in response.resources] == [40], response
assert described("kp-configs")["retention.ms"] == "5000"
# The cluster's topics are not the client's: INVALID_TOPIC_EXCEPTION (17).
response = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "__consumer_offsets", configs={"retention.ms": "1"})])
assert [r[0] for r in response.resources] == [17], response
admin.close()
print("ok")
