"""Transactions of one confluent-kafka transactional producer, step by step, on partition 0
of a topic: `txn_steps.py BOOTSTRAP TOPIC STEP...`, where a step is `commit:v1,v2`,
`abort:v1,v2` or `open:v1,v2` (sent and flushed, the transaction left open). Prints `ready`
once every step is done; when stdin closes, commits a transaction the last step left open.
"""

import sys
import uuid

from confluent_kafka import Producer

BOOTSTRAP, TOPIC, STEPS = sys.argv[1], sys.argv[2], sys.argv[3:]

producer = Producer(
    {
        "bootstrap.servers": BOOTSTRAP,
        "transactional.id": f"steps-{uuid.uuid4().hex[:8]}",
        "linger.ms": 0,
    }
)
producer.init_transactions(30)
for step in STEPS:
    action, _, values = step.partition(":")
    producer.begin_transaction()
    for value in values.split(","):
        producer.produce(TOPIC, value=f'"{value}"'.encode(), key=value.encode(), partition=0)
    producer.flush(30)
    if action == "commit":
        producer.commit_transaction(30)
    elif action == "abort":
        producer.abort_transaction(30)
    elif action != "open":
        sys.exit(f"unknown step {step!r}")
print("ready", flush=True)
sys.stdin.read()
if STEPS and STEPS[-1].startswith("open:"):
    producer.commit_transaction(30)
    print("committed", flush=True)
