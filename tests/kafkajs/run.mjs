// run.mjs - KafkaJS 2.2.4 against the topicfs Kafka listener, one case per call,
// driven by tests/integration/test_kafkajs.sh, which checks the mount after each.
//
//   node run.mjs BROKER CASE [ARGS...]
//
// Prints what the shell compares; any error exits non-zero with its message.
import { Kafka, CompressionTypes, logLevel } from 'kafkajs';
import { emitirLapide } from './seed000_lapide.mjs';

const [broker, what, ...args] = process.argv.slice(2);

function client(sasl) {
  return new Kafka({
    clientId: 'topicfs-test',
    brokers: [broker],
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    connectionTimeout: 10000,
    ...(sasl ? { sasl } : {}),
  });
}

async function withProducer(kafka, fn, opts = {}) {
  const p = kafka.producer({ allowAutoTopicCreation: false, ...opts });
  await p.connect();
  try {
    return await fn(p);
  } finally {
    await p.disconnect();
  }
}

async function withAdmin(kafka, fn) {
  const a = kafka.admin();
  await a.connect();
  try {
    return await fn(a);
  } finally {
    await a.disconnect();
  }
}

// The error code of a failed call, as KafkaJS reports it (its "type" name).
async function errorOf(fn) {
  try {
    await fn();
    return 'none';
  } catch (e) {
    const first = e.errors && e.errors[0];
    return (first && first.type) || e.type || (e.originalError && e.originalError.type) || e.name;
  }
}

const cases = {
  // TOPIC: one record a codec, gzip being KafkaJS's only built-in one (snappy,
  // lz4 and zstd need codec plugins, which are not KafkaJS itself).
  async produce(topic) {
    await withProducer(client(), async (p) => {
      await p.send({ topic, messages: [{ key: 'plain', value: 'by kafkajs' }] });
      await p.send({ topic, compression: CompressionTypes.GZIP,
                     messages: [{ key: 'gz', value: 'gzip '.repeat(40) }] });
    });
    console.log('sent');
  },
  // TOPIC: an idempotent producer (InitProducerId, acks -1, sequences).
  async idempotent(topic) {
    await withProducer(client(), async (p) => {
      for (let i = 0; i < 3; i++)
        await p.send({ topic, acks: -1, messages: [{ key: 'idem', value: `v${i}` }] });
    }, { idempotent: true, maxInFlightRequests: 1, retry: { retries: 3 } });
    console.log('sent');
  },
  // TOPIC KEY: seed 000's tombstone, as the seed writes it.
  async lapide(topic, key) {
    await withProducer(client(), (p) => emitirLapide(p, topic, key));
    console.log('sent');
  },
  // TOPIC: the high watermark and log start, through ListOffsets.
  async offsets(topic) {
    const o = await withAdmin(client(), (a) => a.fetchTopicOffsets(topic));
    console.log(o.map((x) => `${x.partition}:${x.low}-${x.high}`).join(' '));
  },
  // createTopics, describeConfigs, alterConfigs, deleteTopics on TOPIC.
  async admin(topic) {
    await withAdmin(client(), async (a) => {
      const made = await a.createTopics({
        topics: [{ topic, numPartitions: 2, configEntries: [{ name: 'cleanup.policy', value: 'delete' }] }],
      });
      if (!made) throw new Error('createTopics said the topic existed');
      if ((await a.listTopics()).indexOf(topic) < 0) throw new Error('not listed');
      await a.alterConfigs({
        validateOnly: false,
        resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
      });
      const d = await a.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: 2, name: topic, configNames: ['retention.ms', 'cleanup.policy'] }],
      });
      const r = d.resources[0];
      console.log(r.configEntries.map((c) => `${c.configName}=${c.configValue}`).sort().join(' '));
      console.log(await errorOf(() => a.alterConfigs({
        resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: 'soon' }] }],
      })));
      console.log(await errorOf(() => a.createTopics({
        topics: [{ topic: 'rf2', replicationFactor: 2 }],
      })));
    });
  },
  // TOPIC GROUP N: a consumer of GROUP from the beginning; prints the first N
  // records as "offset key=value" (null for a tombstone), then leaves the group.
  async consume(topic, groupId, n) {
    const consumer = client().consumer({ groupId, allowAutoTopicCreation: false });
    const got = [];
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise((resolve, reject) => {
      // a guard against a hang, not a measurement: the shell's case fails
      const guard = setTimeout(() => reject(new Error(`${got.length} of ${n} records`)), 60000);
      consumer.run({
        eachMessage: async ({ message }) => {
          const v = message.value === null ? 'null' : message.value.toString();
          got.push(`${message.offset} ${message.key}=${v}`);
          if (got.length >= Number(n)) {
            clearTimeout(guard);
            resolve();
          }
        },
      }).catch(reject);
    });
    await consumer.disconnect();
    console.log(got.join('\n'));
  },
  async 'delete-topic'(topic) {
    await withAdmin(client(), (a) => a.deleteTopics({ topics: [topic] }));
    console.log('deleted');
  },
  // MECHANISM USER PASSWORD TOPIC KEY: produce one record through SASL.
  async sasl(mechanism, username, password, topic, key) {
    const kafka = client({ mechanism: mechanism.toLowerCase(), username, password });
    console.log(await errorOf(() => withProducer(kafka, (p) =>
      p.send({ topic, messages: [{ key, value: `by ${username}` }] }))));
  },
};

if (!cases[what]) {
  console.error(`unknown case ${what}`);
  process.exit(2);
}
cases[what](...args).then(() => process.exit(0), (e) => {
  console.error(`${what}: ${e.type || e.name}: ${e.message}`);
  process.exit(1);
});
