"""confluent-kafka consumer groups against a Skein broker: two members split 6 partitions;
when one leaves the other takes over; committed offsets let a restarted consumer resume
without duplicates; the admin API lists and describes the group.

Usage: confluent_groups.py BOOTSTRAP phase   (phase: "first" or "after-restart")
"""

import sys
import time

from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, PHASE = sys.argv[1], sys.argv[2]
TOPIC, GROUP = "grouped", "g1"


def consumer(name):
    c = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": GROUP,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )
    c.subscribe([TOPIC])
    return c


def produce(start, count):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    for i in range(start, start + count):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0


# Every value any consumer received. Records may arrive twice around a rebalance (a partition
# moves before its position was committed: Kafka's at-least-once), never not at all.
received = set()


def poll_into(c, timeout):
    m = c.poll(timeout)
    if m is not None and m.error() is None:
        received.add(m.value().decode())


def drain(consumers, values, timeout=30):
    """Polls every consumer until all of `values` were received."""
    deadline = time.time() + timeout
    while not set(values) <= received:
        missing = len(set(values) - received)
        assert time.time() < deadline, f"{missing} of {len(values)} never arrived"
        for c in consumers:
            poll_into(c, 0.1)


def settled(parts, total):
    """Every consumer has partitions, none overlap, and together they cover `total`."""
    seen = set()
    for p in parts:
        if not p or seen & p:
            return False
        seen |= p
    return len(seen) == total


def wait_assigned(consumers, total, timeout=30):
    deadline = time.time() + timeout
    while True:
        for c in consumers:
            poll_into(c, 0.05)
        parts = [set(tp.partition for tp in c.assignment()) for c in consumers]
        if settled(parts, total):
            return parts
        assert time.time() < deadline, f"assignments never settled: {parts}"


def values(start, end):
    return [f"v{i}" for i in range(start, end)]


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
if PHASE == "first":
    admin.create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=1)])[TOPIC].result(10)
    produce(0, 600)
    a = consumer("member-a")
    b = consumer("member-b")
    parts = wait_assigned([a, b], 6)
    assert sorted(len(p) for p in parts) == [3, 3], parts
    drain([a, b], values(0, 600))
    a.commit(asynchronous=False)
    b.commit(asynchronous=False)

    described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
    assert described.state == ConsumerGroupState.STABLE, described.state
    assert sorted(m.client_id for m in described.members) == ["member-a", "member-b"]
    listed = admin.list_consumer_groups().result(10)
    assert GROUP in [g.group_id for g in listed.valid]

    # b leaves: a takes over every partition.
    b.close()
    parts = wait_assigned([a], 6)
    assert parts == [set(range(6))], parts
    produce(600, 60)
    drain([a], values(600, 660))
    a.commit(asynchronous=False)
    a.close()
    # A fresh consumer of the group resumes after the committed offsets: nothing old again.
    received.clear()
    c = consumer("member-c")
    wait_assigned([c], 6)
    produce(660, 6)
    drain([c], values(660, 666))
    assert received == set(values(660, 666)), sorted(received)[:5]
    c.commit(asynchronous=False)
    c.close()
else:
    # After a broker restart the committed offsets are still there.
    produce(666, 12)
    c = consumer("member-d")
    wait_assigned([c], 6)
    drain([c], values(666, 678))
    assert received == set(values(666, 678)), sorted(received)[:5]
    c.commit(asynchronous=False)
    # A group with a member cannot be deleted; once empty it can, offsets and all.
    try:
        admin.delete_consumer_groups([GROUP])[GROUP].result(10)
        raise AssertionError("deleted a group with a member")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.NON_EMPTY_GROUP, e
    c.close()
    admin.delete_consumer_groups([GROUP])[GROUP].result(10)
    assert GROUP not in [g.group_id for g in admin.list_consumer_groups().result(10).valid]
    try:
        admin.delete_consumer_groups([GROUP])[GROUP].result(10)
        raise AssertionError("deleted a group twice")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND, e
    # With the offsets gone, a new member starts from the earliest offset again.
    received.clear()
    d = consumer("member-e")
    wait_assigned([d], 6)
    drain([d], values(0, 678))
    d.close()
print("ok")
