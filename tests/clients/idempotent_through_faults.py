"""An idempotent confluent-kafka producer behind a proxy that cuts connections after
forwarding Produce requests, so librdkafka retries batches the broker already wrote.

Usage: idempotent_through_faults.py BOOTSTRAP TOPIC COUNT
Produces COUNT records with distinct values to one partition (acks=all, idempotence on),
then reads the partition back and prints acknowledged / read / duplicated / missing as JSON.
"""
import json
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, TOPIC, COUNT = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)

producer = Producer({
    "bootstrap.servers": BOOTSTRAP,
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "batch.num.messages": 200,
    "message.timeout.ms": 120000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 100,
    "retry.backoff.ms": 20,
})
acked, failed = [], []


def report(err, msg):
    (failed if err else acked).append(msg.value().decode())


for i in range(COUNT):
    while True:
        try:
            producer.produce(TOPIC, value=str(i).encode(), partition=0, on_delivery=report)
            break
        except BufferError:
            producer.poll(0.05)
    if i % 500 == 0:
        producer.poll(0)
        time.sleep(0.02)
producer.flush(120)

consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "faults-check",
                     "enable.auto.commit": False})
end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1]
consumer.assign([TopicPartition(TOPIC, 0, 0)])
read = []
deadline = time.time() + 60
while len(read) < end and time.time() < deadline:
    msg = consumer.poll(0.5)
    if msg is None:
        continue
    if msg.error():
        raise RuntimeError(msg.error())
    read.append(msg.value().decode())
consumer.close()
counts = Counter(read)
print(json.dumps({
    "acked": len(acked),
    "failed": len(failed),
    "read": len(read),
    "duplicated": sum(n - 1 for n in counts.values() if n > 1),
    "missing": len(set(acked) - set(counts)),
}))
