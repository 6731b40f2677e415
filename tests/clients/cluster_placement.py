"""confluent-kafka against several brokers of one tenant joined to the controller.

Usage: cluster_placement.py BOOTSTRAP PHASE ARGS...
  create NAME PARTITIONS RF [KEY=VALUE ...]: create a topic (with those configs) through
          CreateTopics; print the Kafka error's name, or "ok";
  describe NAME: the topic's partitions (leader, replicas, ISR) from Metadata, and the
          cluster's brokers with their racks from DescribeCluster;
  round-trip NAME PARTITIONS COUNT [BASE]: produce COUNT records numbered from BASE
          (default 0; record i to partition i % PARTITIONS, acks=all), then read every
          partition from the start; print how many were acknowledged and how many of them
          read back, and any missing.
  values NAME PARTITION: every record value of the partition, read from its start to its
          high watermark through the partition's leader.
  elect TYPE NAME PARTITION: ElectLeaders (TYPE preferred or unclean) for one partition;
          print the partition's Kafka error name, or "ok".
  create-assigned NAME JSON [KEY=VALUE ...]: create a topic through CreateTopics with the
          replicas of each partition given (JSON: a list of broker-id lists) and those
          configs; print the error's name, or "ok".
  grow-assigned NAME COUNT JSON: CreatePartitions to COUNT partitions, the new ones on the
          replicas given (JSON as above); print the error's name, or "ok".
Prints one line of JSON; exits non-zero on any failure.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, PHASE, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})

if PHASE == "create":
    name, partitions, rf = ARGS[0], int(ARGS[1]), int(ARGS[2])
    configs = dict(kv.split("=", 1) for kv in ARGS[3:])
    try:
        admin.create_topics([NewTopic(name, partitions, rf, config=configs)])[name].result(30)
        print(json.dumps({"error": "ok"}))
    except KafkaException as e:
        print(json.dumps({"error": e.args[0].name(), "message": e.args[0].str()}))
elif PHASE == "describe":
    name = ARGS[0]
    deadline = time.time() + 30
    while True:
        topic = admin.list_topics(name, timeout=10).topics[name]
        if topic.error is None or time.time() > deadline:
            break
        time.sleep(0.2)
    if topic.error is not None:
        raise RuntimeError(topic.error)
    cluster = admin.describe_cluster().result(30)
    print(json.dumps({
        "partitions": {
            str(p.id): {"leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}
            for p in topic.partitions.values()
        },
        "brokers": {str(n.id): n.rack for n in cluster.nodes},
    }, sort_keys=True))
elif PHASE == "round-trip":
    name, partitions, count = ARGS[0], int(ARGS[1]), int(ARGS[2])
    base = int(ARGS[3]) if len(ARGS) > 3 else 0
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "linger.ms": 5})
    acked, failed = set(), []

    def report(err, msg):
        if err is None:
            acked.add(int(msg.value()))
        else:
            failed.append(str(err))

    for i in range(base, base + count):
        producer.produce(name, value=str(i).encode(), partition=i % partitions, on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "placement-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    read, misplaced = set(), 0
    deadline = time.time() + 60
    while not acked <= read and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise RuntimeError(msg.error())
        value = int(msg.value())
        if base <= value < base + count:
            read.add(value)
        misplaced += value % partitions != msg.partition()
    consumer.close()
    print(json.dumps({"acked": len(acked), "failed": failed[:5], "read": len(read),
                      "missing": sorted(acked - read)[:10], "misplaced": misplaced}))
elif PHASE == "elect":
    from confluent_kafka import ElectionType
    kind = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}[ARGS[0]]
    partition = TopicPartition(ARGS[1], int(ARGS[2]))
    try:
        answered = admin.elect_leaders(kind, [partition]).result(30)
        errors = [e for tp, e in answered.items()
                  if (tp.topic, tp.partition) == (partition.topic, partition.partition)]
        if not errors:
            raise SystemExit(f"no answer for {partition}: {answered}")
        print(json.dumps({"error": "ok" if errors[0] is None else errors[0].name()}))
    except KafkaException as e:
        print(json.dumps({"error": e.args[0].name(), "message": e.args[0].str()}))
elif PHASE in ("create-assigned", "grow-assigned"):
    from confluent_kafka.admin import NewPartitions
    name = ARGS[0]
    try:
        if PHASE == "create-assigned":
            assigned = json.loads(ARGS[1])
            configs = dict(kv.split("=", 1) for kv in ARGS[2:])
            topic = NewTopic(name, len(assigned), replication_factor=-1,
                             replica_assignment=assigned, config=configs)
            admin.create_topics([topic])[name].result(30)
        else:
            count, assigned = int(ARGS[1]), json.loads(ARGS[2])
            grow = NewPartitions(name, count, replica_assignment=assigned)
            admin.create_partitions([grow])[name].result(30)
        print(json.dumps({"error": "ok"}))
    except KafkaException as e:
        print(json.dumps({"error": e.args[0].name(), "message": e.args[0].str()}))
elif PHASE == "values":
    name, partition = ARGS[0], int(ARGS[1])
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "values-check",
                         "enable.auto.commit": False})
    deadline = time.time() + 30
    while True:
        try:
            end = consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=30)[1]
            break
        except KafkaException as e:
            # Leadership may be moving: the client follows once its metadata does.
            if not e.args[0].retriable() and e.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION \
                    or time.time() > deadline:
                raise
            time.sleep(0.2)
    consumer.assign([TopicPartition(name, partition, 0)])
    values = []
    deadline = time.time() + 30
    while len(values) < end and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise RuntimeError(msg.error())
        values.append(msg.value().decode())
    consumer.close()
    print(json.dumps({"high_watermark": end, "values": values}))
else:
    raise SystemExit(f"unknown phase {PHASE}")
