"""kafka-python against a Skein broker: produce and consume back, then a consumer group
that commits and a second consumer of the group that resumes after the commit.

Usage: kafka_python_roundtrip.py BOOTSTRAP
"""

import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

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
print("ok")
