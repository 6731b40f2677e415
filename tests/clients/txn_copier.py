"""Exactly-once copying with confluent-kafka transactions (consume-transform-produce), for a
test that kills the copier and the brokers under it.

Usage:
  txn_copier.py BOOTSTRAP fill SOURCE PARTITIONS COUNT
      writes COUNT numbered records over the partitions (idempotent, acks=all);
  txn_copier.py BOOTSTRAP copy SOURCE COPY PARTITIONS
      copies SOURCE to COPY partition for partition, ten records per transaction, the
      consumer's offsets sent in each; restarts where the last committed transaction ended
      and exits 0 once every record is copied (a fatal error exits non-zero: the test
      starts it again);
  txn_copier.py BOOTSTRAP verify SOURCE COPY PARTITIONS
      prints, as JSON, how COPY (read_committed) compares with SOURCE.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

BOOTSTRAP, MODE = sys.argv[1], sys.argv[2]
PER_TRANSACTION = 10


def values(topic, partitions, isolation="read_committed"):
    """Every record value of each partition, in offset order, up to its stable end."""
    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": "verifier",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out = {}
    for p in range(partitions):
        consumer.assign([TopicPartition(topic, p, 0)])
        seen = []
        deadline = time.time() + 60
        while time.time() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                # The end of what this isolation level may read: everything is decided by now.
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise KafkaException(msg.error())
            seen.append(msg.value().decode())
        out[p] = seen
    consumer.close()
    return out


if MODE == "fill":
    source, partitions, count = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    producer = Producer(
        {"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    for i in range(count):
        producer.produce(source, value=f"r{i}".encode(), partition=i % partitions)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "records left undelivered"
    print("ok")

elif MODE == "copy":
    source, copy, partitions = sys.argv[3], sys.argv[4], int(sys.argv[5])
    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": f"copier-{source}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    assignment = [TopicPartition(source, p) for p in range(partitions)]
    ends = {p: consumer.get_watermark_offsets(TopicPartition(source, p), 30)[1] for p in range(partitions)}
    producer = Producer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "transactional.id": f"copier-{source}",
            "transaction.timeout.ms": 20000,
            "linger.ms": 2,
        }
    )
    producer.init_transactions(60)

    def rewind():
        committed = consumer.committed(assignment, 30)
        consumer.assign(
            [TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else 0) for tp in committed]
        )
        return {tp.partition: tp.offset for tp in committed}

    position = rewind()
    idle = 0
    while any(position.get(p, -1) < ends[p] for p in range(partitions)):
        polled = consumer.consume(PER_TRANSACTION, 1)
        for m in polled:
            if m.error():
                print(f"consumer error: {m.error()}", file=sys.stderr, flush=True)
        msgs = [m for m in polled if not m.error()]
        if not msgs:
            # Nothing for a while: read back what the group committed (another copier may
            # have gone further, or an abort left this one behind). Not after every empty
            # poll: a fetch after a leader change can take longer than one poll.
            idle += 1
            if idle % 5 == 0:
                position = rewind()
                print(f"idle; committed {position}", file=sys.stderr, flush=True)
            continue
        idle = 0
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(copy, value=m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
            )
            while True:
                try:
                    producer.commit_transaction(60)
                    break
                except KafkaException as e:
                    if e.args[0].retriable():
                        print(f"commit again: {e.args[0]}", file=sys.stderr, flush=True)
                        continue
                    raise
        except KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort():
                print(f"aborting: {error}", file=sys.stderr, flush=True)
                producer.abort_transaction(60)
                position = rewind()
                continue
            raise
        for m in msgs:
            position[m.partition()] = max(position.get(m.partition(), -1), m.offset() + 1)
        time.sleep(0.2)
    print("ok")

elif MODE == "verify":
    source, copy, partitions = sys.argv[3], sys.argv[4], int(sys.argv[5])
    original = values(source, partitions)
    copied = values(copy, partitions)
    report = {"source": 0, "copied": 0, "missing": 0, "duplicated": 0, "out_of_order": 0}
    for p in range(partitions):
        src, dst = original.get(p, []), copied.get(p, [])
        report["source"] += len(src)
        report["copied"] += len(dst)
        report["missing"] += len(set(src) - set(dst))
        report["duplicated"] += len(dst) - len(set(dst))
        if dst != src and sorted(dst) == sorted(src):
            report["out_of_order"] += 1
    print(json.dumps(report))
