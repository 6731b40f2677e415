"""Kafka transactions through confluent-kafka (librdkafka) against a real broker:

1. commits and aborts interleaved over three partitions: a read_committed consumer sees
   exactly the committed records, in order per partition; a read_uncommitted one sees all;
2. a second producer with the same transactional id fences the first;
3. consume-transform-produce with send_offsets_to_transaction copies a topic exactly once,
   and the group's committed offsets move only with committed transactions;
4. a transaction left open past its timeout is aborted by the coordinator;
5. a timeout above transaction.max.timeout.ms is refused.

Usage: confluent_transactions.py BOOTSTRAP
"""

import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
RUN = uuid.uuid4().hex[:8]
SOURCE, COPY = f"txn-source-{RUN}", f"txn-copy-{RUN}"
PARTITIONS = 3

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for future in admin.create_topics(
    [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in (SOURCE, COPY)]
).values():
    future.result(15)


def producer(txn_id, **extra):
    config = {
        "bootstrap.servers": BOOTSTRAP,
        "transactional.id": txn_id,
        "linger.ms": 5,
    }
    config.update(extra)
    return Producer(config)


def read_all(topic, isolation, expect_at_least, group=None, timeout=30):
    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": group or f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = []
    deadline = time.time() + timeout
    quiet_since = None
    while time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            if len(seen) >= expect_at_least:
                quiet_since = quiet_since or time.time()
                if time.time() - quiet_since > 2:
                    break
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(msg.error())
        quiet_since = None
        seen.append((msg.partition(), msg.offset(), msg.value().decode()))
    consumer.close()
    return seen


# 1. Interleaved commits and aborts.
p1 = producer(f"writer-{RUN}")
p1.init_transactions(30)
committed, aborted = [], []
for round_ in range(6):
    commit = round_ % 2 == 0
    p1.begin_transaction()
    for i in range(30):
        value = f"{'c' if commit else 'a'}-{round_}-{i}"
        p1.produce(SOURCE, value=value.encode(), partition=i % PARTITIONS)
        (committed if commit else aborted).append((i % PARTITIONS, value))
    if commit:
        p1.commit_transaction(30)
    else:
        # Sent first, so the log holds the records the abort hides (an abort purges what
        # is still queued).
        p1.flush(30)
        p1.abort_transaction(30)

read_committed = read_all(SOURCE, "read_committed", len(committed))
values = [v for _, _, v in read_committed]
assert sorted(values) == sorted(v for _, v in committed), (
    f"read_committed saw {len(values)} records, {sum(v.startswith('a-') for v in values)} aborted; "
    f"wanted the {len(committed)} committed"
)
for partition in range(PARTITIONS):
    in_order = [v for p, _, v in read_committed if p == partition]
    assert in_order == [v for p, v in committed if p == partition], f"partition {partition} out of order"
uncommitted = read_all(SOURCE, "read_uncommitted", len(committed) + len(aborted))
assert sorted(v for _, _, v in uncommitted) == sorted(v for _, v in committed + aborted), (
    f"read_uncommitted saw {len(uncommitted)}, wanted {len(committed) + len(aborted)}"
)
print("commit/abort interleaved: read_committed sees", len(values), "of", len(uncommitted))

# 2. A second producer with the same transactional id fences the first.
p2 = producer(f"writer-{RUN}")
p2.init_transactions(30)
fenced = False
try:
    p1.begin_transaction()
    p1.produce(SOURCE, value=b"zombie", partition=0)
    p1.commit_transaction(30)
except KafkaException as e:
    error = e.args[0]
    fenced = error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH) or error.fatal()
assert fenced, "the first producer was not fenced"
p2.begin_transaction()
p2.produce(SOURCE, value=b"c-after-fence", partition=0)
p2.commit_transaction(30)
committed.append((0, "c-after-fence"))
after = [v for _, _, v in read_all(SOURCE, "read_committed", len(committed))]
assert "zombie" not in after and "c-after-fence" in after, "fencing let a zombie write or lost the new producer's record"
print("fencing: the zombie's record is not visible")

# 3. Consume-transform-produce, exactly once, with the offsets in the transaction.
GROUP = f"copier-{RUN}"
consumer = Consumer(
    {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([SOURCE])
copier = producer(f"copier-{RUN}")
copier.init_transactions(30)
copied = 0
deadline = time.time() + 60
abort_once = True
while copied < len(committed) and time.time() < deadline:
    msgs = consumer.consume(50, 1)
    msgs = [m for m in msgs if not m.error()]
    if not msgs:
        continue
    copier.begin_transaction()
    for m in msgs:
        copier.produce(COPY, value=m.value(), partition=m.partition())
    copier.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
    )
    if abort_once:
        copier.flush(30)
        # The first batch is aborted: its copies vanish and its offsets do not move, so
        # the consumer rewinds and copies it again.
        abort_once = False
        copier.abort_transaction(30)
        committed_offsets = consumer.committed(consumer.assignment(), 10)
        for tp in committed_offsets:
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        continue
    copier.commit_transaction(30)
    copied += len(msgs)
consumer.close()
copies = [v for _, _, v in read_all(COPY, "read_committed", len(committed))]
assert sorted(copies) == sorted(v for _, v in committed), (
    f"the copy holds {len(copies)} records ({len(set(copies))} distinct), wanted {len(committed)}"
)
check = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP})
positions = check.committed([TopicPartition(SOURCE, p) for p in range(PARTITIONS)], 10)
for tp in positions:
    low, high = check.get_watermark_offsets(TopicPartition(SOURCE, tp.partition), 10)
    assert tp.offset >= 0, f"no offset committed for partition {tp.partition}"
    # The committed offset is past every committed record of the partition (markers may
    # follow it).
    assert tp.offset <= high, (tp.partition, tp.offset, high)
check.close()
print("consume-transform-produce: copied", len(copies), "records exactly once")

# 4. A transaction open past its timeout is aborted by the coordinator.
slow = producer(f"slow-{RUN}", **{"transaction.timeout.ms": 2000})
slow.init_transactions(30)
slow.begin_transaction()
slow.produce(SOURCE, value=b"a-timed-out", partition=1)
slow.flush(10)
time.sleep(6)
late = [v for _, _, v in read_all(SOURCE, "read_committed", len(committed), timeout=15)]
assert "a-timed-out" not in late, "a timed-out transaction's record became visible"
assert sorted(late) == sorted(v for _, v in committed), "the timed-out transaction held back the stable offset"
try:
    slow.commit_transaction(10)
    raise AssertionError("a transaction aborted by its timeout was committed")
except KafkaException:
    pass
print("timeout: the coordinator aborted the open transaction")

# 5. A timeout above transaction.max.timeout.ms is refused.
greedy = producer(f"greedy-{RUN}", **{"transaction.timeout.ms": 1_000_000})
try:
    greedy.init_transactions(15)
    raise AssertionError("a timeout above transaction.max.timeout.ms was accepted")
except KafkaException as e:
    assert e.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, e
print("ok")
