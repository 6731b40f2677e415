// kafkajs authenticating with SASL: produces 4 records to partition 0 of a topic, then a
// consumer group reads them back; prints {"kafkajs": n}, n the records it saw.
//
// Usage: node kafkajs_sasl.js BOOTSTRAP TOPIC MECHANISM USERNAME PASSWORD [CA_FILE]
//   MECHANISM: plain (an API key id and secret), scram-sha-256 or scram-sha-512 (a
//   principal's name and password). With CA_FILE the listener is SASL_SSL, its certificate
//   signed by that CA; without it, SASL_PLAINTEXT.

const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, topic, mechanism, username, password, caFile] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: "skein-test",
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  sasl: { mechanism, username, password },
  ...(caFile ? { ssl: { ca: [fs.readFileSync(caFile, "utf-8")] } } : {}),
});
const values = [0, 1, 2, 3].map((i) => `kafkajs-${i}`);

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// The principal's ACLs (and credentials) reach the broker a moment after they are made: the
// first write is retried for up to 30 s.
async function produce() {
  const deadline = Date.now() + 30000;
  for (;;) {
    const producer = kafka.producer();
    try {
      await producer.connect();
      await producer.send({
        topic,
        acks: -1,
        messages: values.map((value) => ({ value, partition: 0 })),
      });
      await producer.disconnect();
      return;
    } catch (e) {
      await producer.disconnect().catch(() => {});
      if (Date.now() > deadline) {
        throw e;
      }
      console.error(`produce failed, retrying: ${e.message}`);
      await sleep(500);
    }
  }
}

async function consume() {
  const consumer = kafka.consumer({ groupId: `kafkajs-sasl-${mechanism}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Set();
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`only ${[...seen]} of ${values} arrived`)),
        30000,
      );
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        if (!payload.restart) {
          clearTimeout(timer);
          reject(payload.error);
        }
      });
      consumer
        .run({
          eachMessage: async ({ partition, message }) => {
            const value = message.value.toString();
            if (partition === 0 && values.includes(value)) {
              seen.add(value);
            }
            if (seen.size === values.length) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return seen.size;
}

async function main() {
  await produce();
  console.log(JSON.stringify({ kafkajs: await consume() }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
