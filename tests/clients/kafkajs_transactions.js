// kafkajs transactions against a Skein broker: a committed and an aborted transaction over
// two partitions; a read_committed consumer sees only the committed records, a
// read_uncommitted one sees both; a transaction with sendOffsets moves a group's offsets only
// when it commits; a second producer with the same transactional id fences the first.
//
// Usage: node kafkajs_transactions.js BOOTSTRAP

const { Kafka, logLevel } = require("kafkajs");

const bootstrap = process.argv[2];
const kafka = new Kafka({ clientId: "skein-txn-test", brokers: [bootstrap], logLevel: logLevel.NOTHING });
const run = Math.random().toString(16).slice(2, 10);
const topic = `kjs-txn-${run}`;

function assert(condition, message) {
  if (!condition) {
    throw new Error(message);
  }
}

async function readAll(readUncommitted, want) {
  const consumer = kafka.consumer({ groupId: `kjs-reader-${run}-${readUncommitted}`, readUncommitted });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await consumer.run({
    eachMessage: async ({ message }) => {
      got.push(message.value.toString());
    },
  });
  const deadline = Date.now() + 30000;
  while (got.length < want && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
  // Anything that should not be there has had time to arrive too.
  await new Promise((r) => setTimeout(r, 1500));
  await consumer.disconnect();
  return got.sort();
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  await admin.disconnect();

  const producer = kafka.producer({ transactionalId: `kjs-${run}`, maxInFlightRequests: 1, idempotent: true });
  await producer.connect();
  const committed = await producer.transaction();
  await committed.send({
    topic,
    messages: [
      { value: "c0", partition: 0 },
      { value: "c1", partition: 1 },
    ],
  });
  await committed.commit();
  const aborted = await producer.transaction();
  await aborted.send({
    topic,
    messages: [
      { value: "a0", partition: 0 },
      { value: "a1", partition: 1 },
    ],
  });
  await aborted.abort();

  const onlyCommitted = await readAll(false, 2);
  assert(JSON.stringify(onlyCommitted) === JSON.stringify(["c0", "c1"]), `read_committed saw ${onlyCommitted}`);
  const everything = await readAll(true, 4);
  assert(JSON.stringify(everything) === JSON.stringify(["a0", "a1", "c0", "c1"]), `read_uncommitted saw ${everything}`);

  // Offsets in a transaction: aborted, they do not move; committed, they do.
  const group = `kjs-copier-${run}`;
  const offsets = { consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: "3" }] }] };
  const withOffsets = await producer.transaction();
  await withOffsets.sendOffsets(offsets);
  await withOffsets.abort();
  const admin2 = kafka.admin();
  await admin2.connect();
  let fetched = await admin2.fetchOffsets({ groupId: group, topics: [topic] });
  const before = fetched[0].partitions.find((p) => p.partition === 0).offset;
  assert(before === "-1", `an aborted transaction moved the offset to ${before}`);
  const again = await producer.transaction();
  await again.sendOffsets(offsets);
  await again.commit();
  // The commit is answered once decided; its marker, which applies the offsets, follows
  // (kafkajs does not ask OffsetFetch for stable offsets).
  let after;
  for (const deadline = Date.now() + 10000; Date.now() < deadline; ) {
    fetched = await admin2.fetchOffsets({ groupId: group, topics: [topic] });
    after = fetched[0].partitions.find((p) => p.partition === 0).offset;
    if (after === "3") break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert(after === "3", `a committed transaction left the offset at ${after}`);
  await admin2.disconnect();

  // A new producer with the same transactional id fences the old one.
  const newer = kafka.producer({ transactionalId: `kjs-${run}`, maxInFlightRequests: 1, idempotent: true });
  await newer.connect();
  // kafkajs sends the transactional id with InitProducerId at the first transaction.
  const first = await newer.transaction();
  await first.send({ topic, messages: [{ value: "newer", partition: 1 }] });
  await first.commit();
  let fenced = false;
  try {
    const zombie = await producer.transaction();
    await zombie.send({ topic, messages: [{ value: "zombie", partition: 0 }] });
    await zombie.commit();
  } catch (e) {
    fenced = /FENCED|EPOCH/.test(`${e.type} ${e.message}`) ? true : `${e.type}: ${e.message}`;
  }
  assert(fenced === true, `the old producer was not fenced (${fenced})`);
  await newer.disconnect();
  await producer.disconnect().catch(() => {});
  console.log("ok");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
