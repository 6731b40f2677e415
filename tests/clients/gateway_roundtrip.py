"""confluent-kafka on the other side of the gateway.

Usage: gateway_roundtrip.py BOOTSTRAP PHASE ...
  produce TOPIC: one record with a binary value, two headers and a set timestamp;
                 prints its partition and offset;
  read TOPIC PARTITION OFFSET: the record at that offset, bytes in base64.
Prints one line of JSON; exits non-zero on any failure.
"""
import base64
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

BOOTSTRAP, PHASE = sys.argv[1], sys.argv[2]


def b64(data):
    return None if data is None else base64.b64encode(data).decode()


if PHASE == "produce":
    topic = sys.argv[3]
    delivered = []
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    producer.produce(
        topic,
        key=b"native-key",
        value=b"\x00\x01binary\xff",
        headers=[("trace", b"n-1"), ("raw", b"\x00\xfe")],
        timestamp=1700000000123,
        on_delivery=lambda err, msg: delivered.append((err, msg)),
    )
    producer.flush(30)
    err, msg = delivered[0]
    if err is not None:
        raise RuntimeError(err)
    print(json.dumps({"partition": msg.partition(), "offset": msg.offset()}))
elif PHASE == "read":
    topic, partition, offset = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "gateway-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, offset)])
    deadline = time.time() + 30
    while time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise RuntimeError(msg.error())
        print(json.dumps({
            "key": b64(msg.key()),
            "value": b64(msg.value()),
            "headers": [[k, b64(v)] for k, v in (msg.headers() or [])],
            "timestamp": msg.timestamp()[1],
            "offset": msg.offset(),
        }))
        break
    else:
        raise RuntimeError("no record arrived")
    consumer.close()
else:
    raise SystemExit(f"unknown phase {PHASE}")
