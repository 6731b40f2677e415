"""aiokafka against a Skein broker: produce and consume back, then a consumer group that
commits and a second member that resumes after the commit.

Usage: aiokafka_roundtrip.py BOOTSTRAP
"""

import asyncio
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

BOOTSTRAP = sys.argv[1]
TOPIC, GROUP = "aio-topic", "aio-group"


async def take(consumer, n):
    out = []
    while len(out) < n:
        batches = await consumer.getmany(timeout_ms=10000)
        assert batches, f"timed out after {len(out)} of {n}"
        for messages in batches.values():
            out.extend(m.value.decode() for m in messages)
    return out


async def main():
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
    await producer.start()
    for i in range(100):
        await producer.send_and_wait(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    await producer.stop()

    plain = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP, auto_offset_reset="earliest")
    await plain.start()
    plain.assign([TopicPartition(TOPIC, 0)])
    await plain.seek_to_beginning()
    assert await take(plain, 100) == [f"v{i}" for i in range(100)]
    await plain.stop()

    first = AIOKafkaConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP,
        auto_offset_reset="earliest", enable_auto_commit=False,
    )
    await first.start()
    got = await take(first, 100)
    assert got[:100] == [f"v{i}" for i in range(100)], got[:5]
    await first.commit()
    await first.stop()

    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
    await producer.start()
    for i in range(100, 120):
        await producer.send_and_wait(TOPIC, value=f"v{i}".encode(), partition=0)
    await producer.stop()

    second = AIOKafkaConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP,
        auto_offset_reset="earliest", enable_auto_commit=False,
    )
    await second.start()
    rest = await take(second, 20)
    await second.stop()
    assert rest == [f"v{i}" for i in range(100, 120)], rest[:5]
    print("ok")


asyncio.run(main())
