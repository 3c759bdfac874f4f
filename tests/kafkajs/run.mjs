// run.mjs - KafkaJS 2.2.4 against the topicfs Kafka listener, one case per call,
// driven by tests/integration/test_kafkajs.sh, which checks the mount after each.
//
//   node run.mjs BROKER CASE [ARGS...]
//
// Prints what the shell compares; any error exits non-zero with its message.
// TFS_KAFKAJS_DEBUG=1 sends KafkaJS's debug log (every request and response) to stderr.
import { Kafka, CompressionTypes, logLevel } from 'kafkajs';
import { writeFileSync } from 'node:fs';
import { emitirLapide } from './seed000_lapide.mjs';

const [broker, what, ...args] = process.argv.slice(2);

function client(sasl) {
  return new Kafka({
    clientId: 'topicfs-test',
    brokers: [broker],
    logLevel: process.env.TFS_KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
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

// A guard against a hang, not a measurement: a wait that never ends fails the
// shell's case; no result depends on how long anything took.
const GUARD_MS = 60000;

// until(what, cond): a promise that resolves once cond() holds, tested again at
// every poke() (each GROUP_JOIN event and each record consumed); what() names
// what was awaited if the guard fires.
const waits = new Set();
function poke() {
  for (const w of waits) if (w.cond()) { waits.delete(w); clearTimeout(w.guard); w.resolve(); }
}
function until(what, cond) {
  return new Promise((resolve, reject) => {
    const w = { cond, resolve };
    w.guard = setTimeout(() => { waits.delete(w); reject(new Error(`waiting for ${what()}`)); }, GUARD_MS);
    waits.add(w);
    poke();
  });
}

// Members heartbeat and fetch often, so that they see a rebalance soon after it starts.
const MEMBER = { allowAutoTopicCreation: false, heartbeatInterval: 200, maxWaitTimeInMs: 100,
                 sessionTimeout: 10000, rebalanceTimeout: 10000 };

// The log end (high watermark) of each partition of TOPIC.
async function partitionsOf(kafka, topic) {
  return withAdmin(kafka, async (a) => {
    const hw = {};
    for (const o of await a.fetchTopicOffsets(topic)) hw[o.partition] = Number(o.high);
    return hw;
  });
}

// GROUP's committed offset of each partition of TOPIC (-1 for none).
async function committedOf(kafka, groupId, topic) {
  return withAdmin(kafka, async (a) => {
    // KafkaJS finds the coordinator among the brokers of its metadata, which a
    // fresh admin has not fetched yet (and retries: 0 leaves it no second try)
    await a.fetchTopicMetadata({ topics: [topic] });
    const [t] = await a.fetchOffsets({ groupId, topics: [topic] });
    const c = {};
    for (const p of t.partitions) c[p.partition] = Number(p.offset);
    return c;
  });
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
  // TOPIC OFFSET: admin.deleteTopicRecords of partition 0 below OFFSET, then the
  // offsets as offsets prints them.
  async 'delete-records'(topic, offset) {
    const o = await withAdmin(client(), async (a) => {
      await a.fetchTopicMetadata({ topics: [topic] });   // KafkaJS wants it loaded
      await a.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset }] });
      return a.fetchTopicOffsets(topic);
    });
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
  // TOPIC GROUP MNT: a group of KafkaJS members growing 1 -> 2 -> 3, then one
  // leaves; after each change (waited for through GROUP_JOIN events: every live
  // member's newest assignment an equal share, together every partition once) one
  // record a partition from a KafkaJS producer and one written as a file in the
  // mount MNT. Members commit after every record (KafkaJS's own autoCommit).
  // Prints each assignment, then the records consumed; fails on a record
  // consumed twice or one never consumed.
  async group(topic, groupId, mnt) {
    const kafka = client();
    const hw0 = await partitionsOf(kafka, topic);
    const nparts = Object.keys(hw0).length;
    const seen = new Map();                 // "partition:offset" -> "member key=value"
    const twice = [];
    const shares = new Map();               // member -> its newest assignment
    const live = [];
    let wanted = 0, sent = 0;
    const out = [];

    async function join(name) {
      const c = kafka.consumer({ groupId, ...MEMBER });
      c.on(c.events.GROUP_JOIN, (e) => {
        shares.set(name, [...(e.payload.memberAssignment[topic] || [])].sort((x, y) => x - y));
        poke();
      });
      await c.connect();
      await c.subscribe({ topics: [topic], fromBeginning: true });
      await c.run({
        autoCommitThreshold: 1,
        eachMessage: async ({ partition, message }) => {
          const k = `${partition}:${message.offset}`;
          if (seen.has(k)) twice.push(`${k} by ${seen.get(k)} and ${name}`);
          else seen.set(k, `${name} ${message.key}=${message.value}`);
          poke();
        },
      });
      live.push({ name, c });
    }
    function balanced() {
      const all = live.map(({ name }) => shares.get(name) || []);
      const flat = all.flat().sort((x, y) => x - y);
      return all.every((ps) => ps.length === nparts / live.length) &&
        flat.length === nparts && flat.every((p, i) => p === i);
    }
    async function settle() {
      await until(() => `${live.length} members sharing ${nparts} partitions: ` +
                  live.map(({ name }) => `${name}=${shares.get(name)}`).join(' '), balanced);
      out.push(`members ${live.length}: ` + live.map(({ name }) => shares.get(name))
        .sort((x, y) => x[0] - y[0]).map((ps) => ps.join(',')).join(' '));
    }
    async function produce() {
      await withProducer(kafka, (p) => p.send({ topic, messages: [...Array(nparts).keys()].map((i) =>
        ({ partition: i, key: `js-${sent}-${i}`, value: `kafkajs ${sent}` })) }));
      for (let i = 0; i < nparts; i++) writeFileSync(`${mnt}/${topic}/${i}/sh-${sent}-${i}`, `shell ${sent}`);
      sent++;
      wanted += 2 * nparts;
      await until(() => `${wanted} records, have ${seen.size}`, () => seen.size >= wanted);
    }

    await join('a'); await settle(); await produce();
    await join('b'); await settle(); await produce();
    await join('c'); await settle(); await produce();
    const gone = live.pop();
    await gone.c.disconnect();
    await settle(); await produce();
    for (const { c } of live) await c.disconnect();

    if (twice.length) throw new Error(`consumed twice: ${twice.join(', ')}`);
    const hw = await partitionsOf(kafka, topic);
    for (let p = 0; p < nparts; p++)
      for (let o = 0; o < hw[p]; o++)
        if (!seen.has(`${p}:${o}`)) throw new Error(`${p}:${o} never consumed`);
    const byMember = {};
    for (const v of seen.values()) byMember[v.split(' ')[0]] = (byMember[v.split(' ')[0]] || 0) + 1;
    out.push(`consumed ${seen.size} once: ` + Object.keys(byMember).sort().map((m) => `${m}=${byMember[m]}`).join(' '));
    console.log(out.join('\n'));
  },
  // GROUP TOPIC: the group's committed offsets, through OffsetFetch (admin.fetchOffsets).
  async 'fetch-offsets'(groupId, topic) {
    const c = await committedOf(client(), groupId, topic);
    console.log(Object.keys(c).sort((x, y) => x - y).map((p) => `${p}:${c[p]}`).join(' '));
  },
  // TOPIC GROUP [P:OFF...]: a new member of GROUP reads every partition from its
  // committed offset to the log end, then commits OFF on each P given. Prints
  // "P:FIRST-LAST" of what it read (P:none when nothing was past the commit);
  // fails when it starts anywhere but the committed offset or skips a record.
  async resume(topic, groupId, ...commits) {
    const kafka = client();
    const hw = await partitionsOf(kafka, topic);
    const committed = await committedOf(kafka, groupId, topic);
    const next = {}, first = {};
    for (const p of Object.keys(hw)) next[p] = committed[p] < 0 ? 0 : committed[p];
    const bad = [];
    const c = kafka.consumer({ groupId, ...MEMBER });
    await c.connect();
    await c.subscribe({ topics: [topic], fromBeginning: true });
    await c.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const o = Number(message.offset);
        if (o !== next[partition]) bad.push(`${partition}:${o} where ${next[partition]} was next`);
        if (!(partition in first)) first[partition] = o;
        next[partition] = o + 1;
        poke();
      },
    });
    await until(() => `the log ends ${JSON.stringify(hw)}, at ${JSON.stringify(next)}`,
                () => bad.length > 0 || Object.keys(hw).every((p) => next[p] >= hw[p]));
    if (bad.length) throw new Error(`read out of order: ${bad.join(', ')}`);
    if (commits.length)
      await c.commitOffsets(commits.map((pc) => {
        const [partition, offset] = pc.split(':');
        return { topic, partition: Number(partition), offset };
      }));
    await c.disconnect();
    console.log(Object.keys(hw).sort((x, y) => x - y).map((p) =>
      (p in first ? `${p}:${first[p]}-${next[p] - 1}` : `${p}:none`)).join(' '));
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
