"""An idempotent confluent-kafka producer writes 20k records while the broker restarts under
it (the test restarts it); reading back finds every record exactly once, in order per key.

Usage: confluent_idempotent.py BOOTSTRAP
"""

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
TOPIC, TOTAL, KEYS = "idem", 20_000, 10

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(10)

producer = Producer(
    {
        "bootstrap.servers": BOOTSTRAP,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "message.timeout.ms": 60000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
    }
)
failures = []


def on_delivery(err, msg):
    if err is not None:
        failures.append(err)


start = time.time()
for i in range(TOTAL):
    producer.produce(TOPIC, key=f"key-{i % KEYS}".encode(), value=f"{i}".encode(), on_delivery=on_delivery)
    if i % 500 == 0:
        producer.poll(0)
        time.sleep(0.1)  # spread the writes over the broker restart
assert producer.flush(60) == 0, "messages left undelivered"
assert not failures, failures[:3]

consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "unused", "enable.auto.commit": False})
consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
per_key = {}
count = 0
deadline = time.time() + 60
while count < TOTAL and time.time() < deadline:
    msg = consumer.poll(1)
    if msg is None or msg.error():
        continue
    per_key.setdefault(msg.key().decode(), []).append(int(msg.value()))
    count += 1
extra = consumer.poll(2)
consumer.close()
assert count == TOTAL and extra is None, f"read {count} records (+{'1 more' if extra else 'none'}), wanted {TOTAL}"
for k in range(KEYS):
    got = per_key[f"key-{k}"]
    want = list(range(k, TOTAL, KEYS))
    assert got == want, f"key-{k}: duplicates or gaps (first difference near {next((a, b) for a, b in zip(got, want) if a != b) if got != want[:len(got)] else len(got)})"
print("ok")
