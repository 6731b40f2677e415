"""Kafka clients authenticating with SASL: PLAIN (an API key id and secret), SCRAM-SHA-256 or
SCRAM-SHA-512 (a principal's name and password), or OAUTHBEARER; or with a client
certificate on an SSL listener.

Usage: sasl_clients.py BOOTSTRAP PHASE ARGS...
KEY and SECRET are the user name and password of the mechanism SKEIN_TEST_MECHANISM names
(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; PLAIN without it). SKEIN_TEST_CA names the CA of a
SASL_SSL listener; without it the listener is SASL_PLAINTEXT.
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
          (its credential is revoked meanwhile), then produces once a second until the broker
          refuses; prints {"refused_after_ms": n, "error": NAME}.
  scram-admin KEY SECRET USER PASSWORD: confluent-kafka's AdminClient, authenticated as KEY,
          gives USER a SCRAM-SHA-512 credential with PASSWORD (8192 iterations) through
          AlterUserScramCredentials, then describes USER's credentials; prints
          {"described": [[MECHANISM, iterations], ...], "error": null} (MECHANISM as
          confluent-kafka names it: SCRAM_SHA_256, SCRAM_SHA_512), or {"error": NAME} if
          either is refused.
  reauth TOPIC SECRET_FILE SECONDS LIFETIME: confluent-kafka with SASL/OAUTHBEARER, its
          tokens minted here (HS256 with the secret in SECRET_FILE, sub "alice", tenant
          "acme") to expire LIFETIME seconds after they are made, produces a record every
          half second for SECONDS; prints {"sent": n, "delivered": n, "tokens": n,
          "errors": [...]}, the errors librdkafka reported (none when it re-authenticated
          in place before each token expired, KIP-368; a connection the broker closed for
          want of it shows as the broker being down).
  mtls TOPIC CERT KEY: confluent-kafka over SSL (SKEIN_TEST_CA the server's authority)
          with the client certificate CERT and its key KEY (or none, when CERT is "-")
          produces 3 records and reads them back; prints {"confluent": n}, or
          {"error": NAME} with the error that stopped it.
Prints JSON; exits non-zero on any unexpected failure.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

BOOTSTRAP, PHASE, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]


# SKEIN_TEST_CA names the CA of a SASL_SSL listener; without it the listener is
# SASL_PLAINTEXT.
CA = os.environ.get("SKEIN_TEST_CA")
PROTOCOL = "SASL_SSL" if CA else "SASL_PLAINTEXT"
# The SASL mechanism KEY and SECRET are given to: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
MECHANISM = os.environ.get("SKEIN_TEST_MECHANISM", "PLAIN")


def sasl(key, secret):
    config = {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": PROTOCOL,
        "sasl.mechanism": MECHANISM,
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
                   sasl_mechanism=MECHANISM, sasl_plain_username=key,
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


def refusal(error):
    """The name the phases print for a KafkaError: "authentication" for a failed login."""
    if error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        return "authentication"
    return KafkaError(error.code()).name()


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
        if refusal(e) == "authentication":
            return "authentication"
    print(json.dumps([str(e) for e in errors]), file=sys.stderr)
    return refusal(errors[0]) if errors else "none"


def scram_admin(key, secret, user, password):
    errors = []
    admin = AdminClient({**sasl(key, secret), "error_cb": lambda e: errors.append(e)})
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode())
    try:
        admin.alter_user_scram_credentials([upsertion], request_timeout=15)[user].result()
        described = admin.describe_user_scram_credentials([user], request_timeout=15)[user]
        infos = described.result().scram_credential_infos
    except KafkaException as e:
        # A refused login reaches error_cb, while the request itself may just time out.
        admin.poll(1)
        print(json.dumps([str(e)] + [str(reported) for reported in errors]), file=sys.stderr)
        if any(refusal(reported) == "authentication" for reported in errors):
            return {"error": "authentication"}
        return {"error": refusal(e.args[0])}
    return {"described": sorted([ScramMechanism(i.mechanism).name, i.iterations]
                                for i in infos),
            "error": None}


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


def hs256_token(secret, lifetime):
    import base64
    import hashlib
    import hmac

    def part(value):
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=")
    now = time.time()
    claims = {"sub": "alice", "tenant": "acme", "exp": int(now + lifetime), "iat": int(now)}
    signing_input = part({"alg": "HS256", "typ": "JWT"}) + b"." + part(claims)
    signature = hmac.new(secret, signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()


def reauth(topic, secret_file, seconds, lifetime):
    with open(secret_file, "rb") as f:
        secret = f.read().strip()
    minted = []

    def oauth_cb(_config):
        token = hs256_token(secret, lifetime)
        minted.append(token)
        return token, time.time() + lifetime

    errors = []
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "security.protocol": PROTOCOL,
                         "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb,
                         "acks": "all", "error_cb": lambda e: errors.append(e)})
    outcomes = []
    sent = 0
    ends = time.time() + seconds
    while time.time() < ends:
        producer.produce(topic, value=f"reauth-{sent}".encode(), partition=0,
                         on_delivery=lambda err, msg: outcomes.append(err))
        sent += 1
        producer.poll(0)
        time.sleep(0.5)
    assert producer.flush(30) == 0, "records left undelivered"
    producer.poll(1)
    failed = [str(e) for e in outcomes if e is not None]
    if failed:
        print(json.dumps(failed[:5]), file=sys.stderr)
    return {"sent": sent, "delivered": outcomes.count(None), "tokens": len(minted),
            "errors": [str(e) for e in errors]}


def mtls(topic, cert, key):
    config = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SSL",
              "ssl.ca.location": CA, "socket.timeout.ms": 10000}
    if cert != "-":
        config.update({"ssl.certificate.location": cert, "ssl.key.location": key})
    errors = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 15000,
                         "error_cb": lambda e: errors.append(e)})
    delivered = []
    for i in range(3):
        producer.produce(topic, value=f"mtls-{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    failed = [e for e in delivered if e is not None]
    if failed or len(delivered) < 3:
        print(json.dumps([str(e) for e in failed + errors]), file=sys.stderr)
        reported = failed + errors
        return {"error": refusal(reported[0]) if reported else "none"}
    consumer = Consumer({**config, "group.id": "mtls", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    deadline = time.time() + 30
    while seen < 3 and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        seen += msg.value().startswith(b"mtls-")
    consumer.close()
    return {"confluent": seen}


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
elif PHASE == "reauth":
    topic, secret_file, seconds, lifetime = ARGS
    print(json.dumps(reauth(topic, secret_file, float(seconds), float(lifetime))))
elif PHASE == "mtls":
    print(json.dumps(mtls(*ARGS)))
elif PHASE == "scram-admin":
    key, secret, user, password = ARGS
    print(json.dumps(scram_admin(key, secret, user, password)))
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
