// kafkajs's admin client moving a partition between brokers (AlterPartitionReassignments),
// then watching ListPartitionReassignments until the move completes.
//
// Usage: node kafkajs_reassign.js BOOTSTRAP TOPIC PARTITION REPLICAS_JSON
// Prints one line of JSON: {"error": null or the error's type, "seen": [each distinct
// listing of the partition while it moved], "done": whether the listing emptied in time,
// "ms": how long from the request until it did}.

const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, topic, partitionArg, replicasArg] = process.argv.slice(2);
const partition = Number(partitionArg);
const replicas = JSON.parse(replicasArg);
const kafka = new Kafka({
  clientId: "skein-reassign",
  brokers: bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 3 },
});

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const result = { error: null, seen: [], done: false, ms: null };
  const started = Date.now();
  try {
    await admin.alterPartitionReassignments({
      topics: [{ topic, partitionAssignment: [{ partition, replicas }] }],
    });
  } catch (e) {
    result.error = e.type || e.name;
    console.log(JSON.stringify(result));
    await admin.disconnect();
    return;
  }
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    const { topics } = await admin.listPartitionReassignments({
      topics: [{ topic, partitions: [partition] }],
    });
    const ongoing = topics.flatMap((t) => t.partitions);
    if (ongoing.length === 0) {
      result.done = true;
      result.ms = Date.now() - started;
      break;
    }
    const listed = JSON.stringify(ongoing[0]);
    if (!result.seen.includes(listed)) {
      result.seen.push(listed);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await admin.disconnect();
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
