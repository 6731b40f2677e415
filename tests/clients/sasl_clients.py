"""Kafka clients authenticating with SASL/PLAIN (an API key id and secret).

Usage: sasl_clients.py BOOTSTRAP PHASE ARGS...
  roundtrip TOPIC KEY SECRET: confluent-kafka produces 5 records and reads them back, then
          kafka-python does the same; prints {"confluent": n, "kafka_python": n}.
  refused KEY SECRET: confluent-kafka asks for metadata with these credentials; prints
          {"error": NAME} with the error librdkafka reports (or "none").
  plaintext: a client without SASL asks the SASL listener for metadata; prints
          {"error": NAME}.
  oauth TOPIC TOKEN: confluent-kafka with SASL/OAUTHBEARER and TOKEN (a JWT) produces 3
          records and reads them back; prints {"confluent": n}.
  oauth-refused TOKEN: asks for metadata with OAUTHBEARER and TOKEN; prints {"error": NAME}.
  revoked TOPIC KEY SECRET: produces one record, prints "ready", waits for a line on stdin
          (the key is revoked meanwhile), then produces once a second until the broker
          refuses; prints {"refused_after_ms": n, "error": NAME}.
Prints JSON; exits non-zero on any unexpected failure.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

BOOTSTRAP, PHASE, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]


# SKEIN_TEST_CA names the CA of a SASL_SSL listener; without it the listener is
# SASL_PLAINTEXT.
CA = os.environ.get("SKEIN_TEST_CA")
PROTOCOL = "SASL_SSL" if CA else "SASL_PLAINTEXT"


def sasl(key, secret):
    config = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": PROTOCOL,
        "sasl.mechanism": "PLAIN",
        "sasl.username": key,
        "sasl.password": secret,
    }
    if CA:
        config["ssl.ca.location"] = CA
    return config


def confluent_roundtrip(topic, key, secret):
    producer = Producer({**sasl(key, secret), "acks": "all"})
    for i in range(5):
        producer.produce(topic, value=f"confluent-{i}".encode(), partition=0)
    assert producer.flush(30) == 0, "confluent-kafka could not deliver"
    consumer = Consumer({**sasl(key, secret), "group.id": "sasl-confluent",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    deadline = time.time() + 30
    while len(seen) < 5 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        if msg.value().startswith(b"confluent-"):
            seen.append(msg.value())
    consumer.close()
    return len(seen)


def kafka_python_roundtrip(topic, key, secret):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    options = dict(bootstrap_servers=BOOTSTRAP, security_protocol=PROTOCOL,
                   sasl_mechanism="PLAIN", sasl_plain_username=key,
                   sasl_plain_password=secret)
    if CA:
        options["ssl_cafile"] = CA
    producer = KafkaProducer(acks="all", **options)
    for i in range(5):
        producer.send(topic, value=f"kafka-python-{i}".encode(), partition=0).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=10000, **options)
    partition = KTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    seen = [m.value for m in consumer if m.value.startswith(b"kafka-python-")]
    consumer.close()
    return len(seen)


def metadata_error(config):
    errors = []
    config = {**config, "error_cb": lambda e: errors.append(e)}
    admin = AdminClient(config)
    try:
        admin.list_topics(timeout=10)
    except KafkaException as e:
        errors.append(e.args[0])
    # Errors reach error_cb as the client is polled.
    admin.poll(1)
    for e in errors:
        if e.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            return "authentication"
    print(json.dumps([str(e) for e in errors]), file=sys.stderr)
    return KafkaError(errors[0].code()).name() if errors else "none"


def oauth(token):
    config = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": PROTOCOL,
        "sasl.mechanism": "OAUTHBEARER",
        # The token, and when it expires (the client asks again before then).
        "oauth_cb": lambda _config: (token, time.time() + 3600),
    }
    if CA:
        config["ssl.ca.location"] = CA
    return config


if PHASE == "oauth":
    topic, token = ARGS
    producer = Producer({**oauth(token), "acks": "all"})
    for i in range(3):
        producer.produce(topic, value=f"oauth-{i}".encode(), partition=0)
    assert producer.flush(30) == 0, "could not deliver over OAUTHBEARER"
    consumer = Consumer({**oauth(token), "group.id": "sasl-oauth",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    deadline = time.time() + 30
    while seen < 3 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        seen += msg.value().startswith(b"oauth-")
    consumer.close()
    print(json.dumps({"confluent": seen}))
elif PHASE == "oauth-refused":
    print(json.dumps({"error": metadata_error(oauth(ARGS[0]))}))
elif PHASE == "roundtrip":
    topic, key, secret = ARGS
    print(json.dumps({"confluent": confluent_roundtrip(topic, key, secret),
                      "kafka_python": kafka_python_roundtrip(topic, key, secret)}))
elif PHASE == "refused":
    key, secret = ARGS
    print(json.dumps({"error": metadata_error(sasl(key, secret))}))
elif PHASE == "plaintext":
    print(json.dumps({"error": metadata_error({"bootstrap.servers": BOOTSTRAP})}))
elif PHASE == "revoked":
    topic, key, secret = ARGS
    errors = []
    producer = Producer({**sasl(key, secret), "error_cb": lambda e: errors.append(e),
                         "message.timeout.ms": 5000, "reconnect.backoff.ms": 200})
    # The principal's ACLs reach the broker with the metadata stream: a first write may be
    # refused until they do.
    delivered = [False]
    deadline = time.time() + 30
    while delivered[-1] is not None and time.time() < deadline:
        producer.produce(topic, value=b"before", partition=0,
                         on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        if delivered[-1] is not None:
            time.sleep(0.5)
    assert delivered[-1] is None, f"the first record was not delivered: {delivered}"
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.time()
    outcome = None
    while outcome is None and time.time() - started < 60:
        failed = []
        producer.produce(topic, value=b"after", partition=0,
                         on_delivery=lambda err, msg: failed.append(err))
        producer.flush(10)
        if any(e.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
               for e in errors):
            outcome = "authentication"
        elif failed and failed[0] is not None:
            outcome = failed[0].name()
        else:
            time.sleep(1)
    print(json.dumps({"refused_after_ms": int((time.time() - started) * 1000),
                      "error": outcome or "none"}))
else:
    raise SystemExit(f"unknown phase {PHASE}")
