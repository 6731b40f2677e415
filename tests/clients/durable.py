"""confluent-kafka producing numbered records while brokers die, and the check afterwards.

Usage: durable.py BOOTSTRAP PHASE ARGS...
  produce TOPIC PARTITIONS ACKED STOP: an idempotent producer (acks=all) writes records
          "partition:seq" to every partition in turn until the file STOP exists; each
          acknowledged record is appended to ACKED as "partition seq offset". Prints the
          counts of acknowledged records and of delivery failures (each retried by sending
          the record again under a new sequence number).
  verify TOPIC PARTITIONS ACKED: reads every partition from the start to its high
          watermark and prints acknowledged / lost / duplicated counts, and how many
          acknowledged records are not at the offset their acknowledgement named.
Prints one line of JSON; exits non-zero on any failure.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BOOTSTRAP, PHASE, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]

if PHASE == "produce":
    topic, partitions, acked_path, stop_path = ARGS[0], int(ARGS[1]), ARGS[2], ARGS[3]
    producer = Producer({
        "bootstrap.servers": BOOTSTRAP,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 120000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
        # Producer id, epoch and sequence events go to stderr, for a failure to be read.
        "debug": "eos",
    })
    acked = open(acked_path, "a", buffering=1)
    counts = {"acked": 0, "failed": 0, "errors": {}}
    retry = []

    def report(err, msg):
        if err is None:
            acked.write(f"{msg.partition()} {msg.value().decode().split(':')[1]} {msg.offset()}\n")
            counts["acked"] += 1
        else:
            counts["failed"] += 1
            counts["errors"][err.name()] = counts["errors"].get(err.name(), 0) + 1
            retry.append(msg.value().decode())

    def send_again(value):
        # Past librdkafka's queue bound, wait for deliveries to make room.
        while True:
            try:
                producer.produce(topic, value=value.encode(), partition=int(value.split(":")[0]),
                                 on_delivery=report)
                return
            except BufferError:
                producer.poll(0.1)

    seq = 0
    while not os.path.exists(stop_path):
        for p in range(partitions):
            while True:
                try:
                    producer.produce(topic, value=f"{p}:{seq}".encode(), partition=p,
                                     on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
        seq += 1
        producer.poll(0)
        # A failed record is sent again: the check counts it once it is acknowledged.
        while retry:
            send_again(retry.pop())
        if seq % 50 == 0:
            time.sleep(0.01)
    remaining = producer.flush(120)
    while retry and remaining == 0:
        send_again(retry.pop())
        remaining = producer.flush(120)
    counts["unflushed"] = remaining
    if remaining:
        # What the producer believes of the cluster, for the failure to be read.
        metadata = producer.list_topics(topic, timeout=10)
        counts["metadata"] = {
            str(p.id): {"leader": p.leader, "isr": list(p.isrs), "error": str(p.error)}
            for p in metadata.topics[topic].partitions.values()
        }
    print(json.dumps(counts))
elif PHASE == "verify":
    topic, partitions, acked_path = ARGS[0], int(ARGS[1]), ARGS[2]
    acked = {}
    for line in open(acked_path):
        p, seq, offset = line.split()
        # librdkafka may acknowledge a record without naming its offset (None).
        acked[(int(p), int(seq))] = int(offset) if offset.lstrip("-").isdigit() else None
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "durable-verify",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    ends = {}
    for p in range(partitions):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, duplicated, duplicates = {}, 0, []
    done = {p for p in range(partitions) if ends[p] == 0}
    deadline = time.time() + 120
    while len(done) < partitions and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        p = msg.partition()
        seq = int(msg.value().decode().split(":")[1])
        if (p, seq) in seen:
            duplicated += 1
            duplicates.append({"partition": p, "seq": seq, "first": seen[(p, seq)],
                               "again": msg.offset()})
        seen[(p, seq)] = msg.offset()
        if msg.offset() + 1 >= ends[p]:
            done.add(p)
    consumer.close()
    lost = [k for k in acked if k not in seen]
    moved = [k for k in acked if k in seen and acked[k] is not None and seen[k] != acked[k]]
    unnamed = sum(1 for k in acked if acked[k] is None)
    print(json.dumps({"acked": len(acked), "lost": len(lost), "duplicated": duplicated,
                      "moved": len(moved), "acked_without_offset": unnamed,
                      "read": len(seen),
                      "lost_sample": sorted(lost)[:10], "duplicates": duplicates[:10]}))
else:
    raise SystemExit(f"unknown phase {PHASE}")
