"""A producer authenticated with SASL/PLAIN writing as fast as the broker lets it.

Usage: sasl_quota.py BOOTSTRAP KEY SECRET TOPIC SECONDS
Writes 1 KiB records to partition 0 for SECONDS, then reads them back; prints
{"acked": n, "read": n, "bytes_per_sec": rate of acknowledged record bytes}.
"""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BOOTSTRAP, KEY, SECRET, TOPIC, SECONDS = sys.argv[1:6]
SECONDS = float(SECONDS)
CONFIG = {
    "bootstrap.servers": BOOTSTRAP,
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": KEY,
    "sasl.password": SECRET,
}
run = uuid.uuid4().hex
value = (run + ":").encode() + b"x" * (1024 - len(run) - 1)
acked, failed = [0], [0]


def report(err, msg):
    if err is None:
        acked[0] += 1
    else:
        failed[0] += 1


# A quota is enforced per request: a request is admitted while the principal is within its
# quota and its bytes are charged once written, so a window of acknowledgements can exceed
# the rate by one request. librdkafka's default batch.size (1 MB) is five seconds of this
# quota; the Java client's 16 KiB default keeps that error below a tenth of a second.
producer = Producer({**CONFIG, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                     "batch.size": 16384, "queue.buffering.max.kbytes": 1024})
started = time.time()
while time.time() - started < SECONDS:
    try:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=report)
    except BufferError:
        producer.poll(0.05)
    producer.poll(0)
# What is still queued is not counted in the rate: only acknowledgements within the window.
in_window = acked[0]
elapsed = time.time() - started
assert producer.flush(120) == 0, "records left undelivered"
consumer = Consumer({**CONFIG, "group.id": "quota-check", "enable.auto.commit": False})
low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
consumer.assign([TopicPartition(TOPIC, 0, low)])
read = 0
deadline = time.time() + 120
position = low
while position < high and time.time() < deadline:
    msg = consumer.poll(0.5)
    if msg is None:
        continue
    if msg.error():
        raise KafkaException(msg.error())
    position = msg.offset() + 1
    if msg.value().startswith(run.encode()):
        read += 1
consumer.close()
print(json.dumps({"acked": acked[0], "failed": failed[0], "read": read,
                  "in_window": in_window, "elapsed": elapsed,
                  "bytes_per_sec": in_window * len(value) / elapsed}))
