"""A confluent-kafka consumer group consuming and committing while brokers die.

Usage: group_failover.py BOOTSTRAP PHASE ARGS...
  coordinator GROUP: prints the node id of GROUP's coordinator, or -1 while none answers.
  consume TOPIC PARTITIONS GROUP STOP OUT: one member of GROUP reads TOPIC and commits
          synchronously every 100 records, until the file STOP exists and it has read to the
          high watermarks of that moment; then writes one line of JSON to OUT: every (partition, offset) it
          read, how many commits were acknowledged and how many failed, and per partition
          the largest acknowledged commit beside the offset the group holds at the end (as a
          new consumer reads it back), how often partitions were assigned, and every
          "rewind": a partition assigned again that resumed before an acknowledged commit
          (a commit the group lost).
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

BOOTSTRAP, PHASE, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]

if PHASE == "coordinator":
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    try:
        described = admin.describe_consumer_groups([ARGS[0]], request_timeout=10)[ARGS[0]]
        print(described.result(timeout=15).coordinator.id)
    except Exception:  # noqa: BLE001 - no answer is an answer here
        print(-1)
elif PHASE == "consume":
    topic, partitions, group, stop_path, out_path = (
        ARGS[0], int(ARGS[1]), ARGS[2], ARGS[3], ARGS[4])
    # What a failure is read from: the errors polled and committed, by name, and the last
    # offset read of every partition with the time it came.
    errors = {}
    last_read = {}

    def count_error(name):
        errors[name] = errors.get(name, 0) + 1

    config = {
        "bootstrap.servers": BOOTSTRAP,
        "error_cb": lambda e: count_error("client " + e.name()),
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    # The member's own account of its group and fetches goes to its log (stderr), where a
    # failed run is read from.
    consumer = Consumer({**config, "debug": "cgrp,topic,fetch"})
    read = set()
    acked = {}
    counts = {"commits_acked": 0, "commits_failed": 0, "assignments": 0}
    # Partitions (re)assigned whose first record is still to come: it is where the group's
    # committed offset put the consumer, and must not lie before an acknowledged commit.
    resuming = set()
    rewinds = []

    def assigned(_consumer, partitions_assigned):
        counts["assignments"] += 1
        resuming.update(tp.partition for tp in partitions_assigned)

    consumer.subscribe([topic], on_assign=assigned)
    since_commit = 0

    def commit():
        try:
            answered = consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() == KafkaError._NO_OFFSET:
                return True  # every offset read is committed already
            counts["commits_failed"] += 1
            count_error("commit " + e.args[0].name())
            return False
        counts["commits_acked"] += 1
        for tp in answered or []:
            if tp.error is None and tp.offset >= 0:
                acked[tp.partition] = max(acked.get(tp.partition, -1), tp.offset)
        return True

    ends = None  # the high watermarks once the producer stopped
    deadline = None
    while True:
        if ends is None and os.path.exists(stop_path):
            ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    for p in range(partitions)}
            deadline = time.time() + 180
        if ends is not None and (time.time() > deadline or all(
                any((p, o) in read for o in [ends[p] - 1]) or ends[p] == 0
                for p in range(partitions))):
            break
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            count_error("poll " + msg.error().name())
            continue
        read.add((msg.partition(), msg.offset()))
        last_read[str(msg.partition())] = [msg.offset(), round(time.time(), 1)]
        if msg.partition() in resuming:
            resuming.discard(msg.partition())
            if msg.offset() < acked.get(msg.partition(), -1):
                rewinds.append({"partition": msg.partition(), "resumed_at": msg.offset(),
                                "acknowledged_commit": acked[msg.partition()]})
        since_commit += 1
        if since_commit >= 100:
            since_commit = 0
            commit()
    deadline = time.time() + 60
    while not commit() and time.time() < deadline:
        time.sleep(0.1)
    consumer.close()
    # What the group holds now, read by a consumer that never joined it.
    checker = Consumer(config)
    committed = {}
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            answer = checker.committed(
                [TopicPartition(topic, p) for p in range(partitions)], timeout=10)
            committed = {tp.partition: tp.offset for tp in answer}
            break
        except KafkaException:
            time.sleep(0.5)
    checker.close()
    with open(out_path, "w") as out:
        out.write(json.dumps({
            "read": sorted(read),
            "acked": {str(p): o for p, o in acked.items()},
            "committed": {str(p): o for p, o in committed.items()},
            "rewinds": rewinds,
            "errors": errors,
            "last_read": last_read,
            "finished": round(time.time(), 1),
            **counts,
        }) + "\n")
else:
    raise SystemExit(f"unknown phase {PHASE}")
