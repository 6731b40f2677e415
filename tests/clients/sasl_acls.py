"""One Kafka API call as an authenticated principal (SASL/PLAIN), for the ACL matrix.

Usage: sasl_acls.py BOOTSTRAP KEY SECRET OPERATION ARGS...
KEY and SECRET are an API key (SASL/PLAIN); with KEY "OAUTHBEARER", SECRET is a JWT; with
KEY "SCRAM-SHA-512:USER" (or -256), SECRET is USER's password.
  produce TOPIC         one record with confluent-kafka (acks=all)
  produce-to TOPIC P    one record to partition P
  brokers TOPIC         the brokers Metadata names ({id: "host:port"}) and each partition's
                        leader and in-sync replicas
  read TOPIC            reads partition 0 from the start without a group (assign)
  consume TOPIC GROUP   reads partition 0 from the start through the group and commits
  metadata              the topics Metadata lists
  create TOPIC [RF]     CreateTopics (one partition; RF replicas, else the broker's default)
  delete TOPIC          DeleteTopics
  describe-configs TOPIC its retention.ms too
  watermark TOPIC       partition 0's high watermark
  committed TOPIC GROUP the offset GROUP committed for partition 0 (-1001: none)
  alter-configs TOPIC   IncrementalAlterConfigs (retention.ms)
  list-groups
  hammer SECONDS        Metadata requests back to back for SECONDS; counts them and the
                        throttle times the broker reported (throttle_cb)
  describe-acls
  init-producer-id      an idempotent producer's first write (InitProducerId, then Produce)
Prints {"result": "ok" | error name, ...}; the error names are librdkafka's.
"""
import json
import sys
import time

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewTopic)

BOOTSTRAP, KEY, SECRET, OPERATION, ARGS = (sys.argv[1], sys.argv[2], sys.argv[3],
                                           sys.argv[4], sys.argv[5:])
if KEY.startswith("SCRAM-SHA-"):
    MECHANISM, USER = KEY.split(":", 1)
    CONFIG = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": MECHANISM,
        "sasl.username": USER,
        "sasl.password": SECRET,
    }
elif KEY == "OAUTHBEARER":
    CONFIG = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (SECRET, time.time() + 3600),
    }
else:
    CONFIG = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": KEY,
        "sasl.password": SECRET,
    }


def name(error):
    return KafkaError(error.code()).name() if hasattr(error, "code") else str(error)


def produce(topic, idempotent=False, partition=0):
    delivered = []
    producer = Producer({**CONFIG, "acks": "all", "message.timeout.ms": 10000,
                         "enable.idempotence": idempotent})
    producer.produce(topic, value=b"matrix", partition=partition,
                     on_delivery=lambda err, msg: delivered.append(err))
    try:
        producer.flush(15)
    except Exception as e:  # noqa: BLE001: the fatal error comes wrapped in the callback's
        # An idempotent producer refused its producer id fails fatally.
        cause = e if isinstance(e, KafkaException) else e.__cause__
        if isinstance(cause, KafkaException):
            return name(cause.args[0])
        raise
    if not delivered:
        return "undelivered"
    return "ok" if delivered[0] is None else name(delivered[0])


def consume(topic, group):
    consumer = Consumer({**CONFIG, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.time() + 20
    while time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            consumer.close()
            return name(msg.error())
        try:
            consumer.commit(msg, asynchronous=False)
        except KafkaException as e:
            consumer.close()
            return name(e.args[0])
        consumer.close()
        return "ok"
    consumer.close()
    return "nothing"


def read(topic):
    # assign() needs no group, but librdkafka looks its group.id up all the same, and a
    # principal without DESCRIBE on that group is refused the lookup: that refusal is about
    # the unused group, not the read, so it is passed over.
    consumer = Consumer({**CONFIG, "group.id": "assign-only", "enable.auto.commit": False})
    deadline = time.time() + 20
    try:
        # The topic's metadata first, as a reader learns its leader: a topic the principal
        # may not describe is refused there (librdkafka only logs it for assign()).
        described = consumer.list_topics(topic, timeout=20).topics[topic]
        if described.error is not None:
            return name(described.error)
        consumer.assign([TopicPartition(topic, 0, 0)])
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue
                return name(msg.error())
            return "ok"
        return "nothing"
    finally:
        consumer.close()


def admin_result(futures):
    try:
        for future in futures.values():
            future.result(timeout=20)
        return "ok"
    except KafkaException as e:
        return name(e.args[0])


admin = AdminClient(CONFIG)
out = {}
if OPERATION == "produce":
    out["result"] = produce(ARGS[0])
elif OPERATION == "init-producer-id":
    out["result"] = produce(ARGS[0], idempotent=True)
elif OPERATION == "fill":
    # COUNT records of SIZE bytes each, with acks=all; the first refusal, if any.
    count, size = int(ARGS[1]), int(ARGS[2])
    outcomes = []
    filler = Producer({**CONFIG, "acks": "all", "message.timeout.ms": 10000,
                       "linger.ms": 5})
    for _ in range(count):
        filler.produce(ARGS[0], value=b"x" * size, partition=0,
                       on_delivery=lambda err, msg: outcomes.append(err))
        filler.poll(0)
    filler.flush(30)
    refused = [name(e) for e in outcomes if e is not None]
    out.update(result=refused[0] if refused else "ok",
               delivered=sum(1 for e in outcomes if e is None))
elif OPERATION == "produce-to":
    out["result"] = produce(ARGS[0], partition=int(ARGS[1]))
elif OPERATION == "brokers":
    described = admin.list_topics(ARGS[0], timeout=20)
    out["result"] = "ok"
    out["brokers"] = {str(b.id): f"{b.host}:{b.port}" for b in described.brokers.values()}
    out["leaders"] = {str(p.id): p.leader
                      for p in described.topics[ARGS[0]].partitions.values()}
    out["isr"] = {str(p.id): sorted(p.isrs)
                  for p in described.topics[ARGS[0]].partitions.values()}
elif OPERATION == "read":
    out["result"] = read(ARGS[0])
elif OPERATION == "consume":
    out["result"] = consume(ARGS[0], ARGS[1])
elif OPERATION == "metadata":
    out["result"] = "ok"
    out["topics"] = sorted(admin.list_topics(timeout=20).topics)
elif OPERATION == "create":
    replication = int(ARGS[1]) if len(ARGS) > 1 else -1
    out["result"] = admin_result(
        admin.create_topics([NewTopic(ARGS[0], 1, replication_factor=replication)]))
elif OPERATION == "delete":
    out["result"] = admin_result(admin.delete_topics([ARGS[0]], operation_timeout=20))
elif OPERATION == "describe-configs":
    futures = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, ARGS[0])])
    out["result"] = admin_result(futures)
    if out["result"] == "ok":
        configs = next(iter(futures.values())).result(timeout=20)
        out["retention.ms"] = configs["retention.ms"].value
elif OPERATION == "watermark":
    consumer = Consumer({**CONFIG, "group.id": "watermark", "enable.auto.commit": False})
    out["high"] = consumer.get_watermark_offsets(TopicPartition(ARGS[0], 0), timeout=20)[1]
    out["result"] = "ok"
    consumer.close()
elif OPERATION == "committed":
    consumer = Consumer({**CONFIG, "group.id": ARGS[1], "enable.auto.commit": False})
    out["offset"] = consumer.committed([TopicPartition(ARGS[0], 0)], timeout=20)[0].offset
    out["result"] = "ok"
    consumer.close()
elif OPERATION == "alter-configs":
    entry = ConfigEntry("retention.ms", "3600000",
                        incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, ARGS[0], incremental_configs=[entry])
    out["result"] = admin_result(admin.incremental_alter_configs([resource]))
elif OPERATION == "hammer":
    throttles = []
    hammering = AdminClient({**CONFIG, "throttle_cb": lambda event: throttles.append(
        event.throttle_time)})
    calls = 0
    started = time.time()
    while time.time() - started < float(ARGS[0]):
        hammering.list_topics(timeout=20)
        hammering.poll(0)
        calls += 1
    out.update(result="ok", calls=calls, throttle_events=len(throttles),
               longest_throttle_s=max(throttles, default=0.0))
elif OPERATION == "list-groups":
    listed = admin.list_consumer_groups(request_timeout=20).result()
    out["result"] = "ok"
    out["groups"] = sorted(g.group_id for g in listed.valid)
elif OPERATION == "describe-acls":
    # kafka-python: librdkafka reports a refused DescribeAcls as an empty list.
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType, ResourceType as KResourceType
    from kafka.errors import KafkaError as KError
    client = KafkaAdminClient(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username=KEY,
                              sasl_plain_password=SECRET)
    selector = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                         permission_type=ACLPermissionType.ANY,
                         resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                                ACLResourcePatternType.ANY))
    try:
        bindings, _ = client.describe_acls(selector)
        out["bindings"] = len(bindings)
        out["result"] = "ok"
    except KError as e:
        out["result"] = KafkaError(e.errno).name() if e.errno else type(e).__name__
        out["detail"] = str(e)
    client.close()
else:
    raise SystemExit(f"unknown operation {OPERATION}")
print(json.dumps(out))
