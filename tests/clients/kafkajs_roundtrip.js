// kafkajs against a Skein broker: produce, then a consumer group reads everything back and
// commits; a second member of the group starts after the commit.
//
// Usage: node kafkajs_roundtrip.js BOOTSTRAP

const { Kafka, logLevel } = require("kafkajs");

const bootstrap = process.argv[2];
const kafka = new Kafka({ clientId: "skein-test", brokers: [bootstrap], logLevel: logLevel.WARN });
const topic = "kjs-topic";
const groupId = "kjs-group";

function assert(condition, message) {
  if (!condition) {
    throw new Error(message);
  }
}

async function consumeUntil(consumer, want, timeoutMs) {
  const got = [];
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${want} arrived`)), timeoutMs);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length >= want) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  return got;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  const topics = await admin.listTopics();
  assert(topics.includes(topic), `listTopics: ${topics}`);
  await admin.disconnect();

  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < 100; i++) {
    messages.push({ key: `k${i}`, value: `v${i}` });
  }
  await producer.send({ topic, acks: -1, messages });

  const first = kafka.consumer({ groupId });
  await first.connect();
  const got = await consumeUntil(first, 100, 30000);
  assert(new Set(got).size === 100, `first member got ${got.length} (${new Set(got).size} distinct)`);
  await first.disconnect(); // commits what it consumed

  await producer.send({ topic, acks: -1, messages: [{ key: "late", value: "v100" }] });
  await producer.disconnect();

  const second = kafka.consumer({ groupId });
  await second.connect();
  const rest = await consumeUntil(second, 1, 30000);
  await second.disconnect();
  assert(rest.length === 1 && rest[0] === "v100", `second member got ${rest}`);
  console.log("ok");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
