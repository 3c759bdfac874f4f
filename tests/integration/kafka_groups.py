#!/usr/bin/python3
"""kafka_groups.py - consumer groups against a topicfs listener, for test_kafka_groups.sh.

  kafka_groups.py rdk BROKER TOPIC GROUP    librdkafka: members join 1 -> 2 -> 3, one leaves
  kafka_groups.py kp BROKER TOPIC GROUP     kafka-python: 1 -> 2 members, one leaves
  kafka_groups.py rdk_silent BROKER TOPIC GROUP   librdkafka: a member killed -9 is removed
  kafka_groups.py commit BROKER GROUP TOPIC P:OFF...   a simple commit (no members)
  kafka_groups.py committed BROKER GROUP TOPIC N       OffsetFetch of partitions 0..N-1
  kafka_groups.py resume BROKER GROUP TOPIC N          the first offset a member consumes, per partition
  kafka_groups.py admin BROKER GROUP                   ListGroups / DescribeGroups / OffsetFetch (all)

Every wait is for an event (an assignment, a record) with a deadline that only
fails a run that hangs; nothing is timed. Each scenario checks that every
record is consumed exactly once per group, across the rebalances.
"""
import sys
import time

DEADLINE_S = 120          # a run that hangs fails; no result depends on it


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def until(what, cond, step):
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            fail("timed out waiting for " + what)
        step()


# ---- librdkafka (confluent_kafka) ----

def rdk(broker, topic, group):
    from confluent_kafka import Consumer, Producer, TopicPartition

    nparts = 6
    seen = {}                              # (partition, offset) -> consumer

    def produce(n, start):
        p = Producer({"bootstrap.servers": broker})
        for i in range(start, start + n):
            p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % nparts)
        if p.flush(30) != 0:
            fail("records left unsent")

    def consumer(name):
        c = Consumer({"bootstrap.servers": broker, "group.id": group, "client.id": name,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                      "topic.metadata.refresh.interval.ms": 1000})
        c.subscribe([topic])
        names[id(c)] = name
        return c

    members = []
    names = {}

    def step():
        for c in members:
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            k = (m.partition(), m.offset())
            if k in seen:
                fail("offset %s consumed twice (by %s and %s)" % (k, seen[k], names[id(c)]))
            seen[k] = names[id(c)]
            c.commit(message=m, asynchronous=False)

    def assigned():
        parts = [sorted(tp.partition for tp in c.assignment()) for c in members]
        return parts

    def balanced():
        parts = assigned()
        flat = sorted(p for ps in parts for p in ps)
        return flat == list(range(nparts)) and all(len(ps) == nparts // len(members) for ps in parts)

    produce(60, 0)
    for n, name in enumerate(["a", "b", "c"]):
        members.append(consumer(name))
        until("%d members to share %d partitions" % (len(members), nparts), balanced, step)
        if n == 0:
            until("60 records", lambda: len(seen) == 60, step)
    print("three members:", assigned())
    produce(30, 60)
    until("90 records", lambda: len(seen) == 90, step)
    if len(set(seen.values())) != 3:
        fail("not every member consumed: %s" % sorted(set(seen.values())))
    gone = members.pop(1)
    gone.close()                           # LeaveGroup
    until("two members to share %d partitions" % nparts, balanced, step)
    print("after one left:", assigned())
    produce(30, 90)
    until("120 records", lambda: len(seen) == 120, step)
    tps = [TopicPartition(topic, p) for p in range(nparts)]
    got = {tp.partition: tp.offset for tp in members[0].committed(tps, timeout=30)}
    if got != {p: 20 for p in range(nparts)}:
        fail("committed offsets %s, want 20 each" % got)
    for c in members:
        c.close()
    print("ok rdk", len(seen))


def rdk_conf(broker, group, name):
    return {"bootstrap.servers": broker, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def rdk_member(broker, topic, group):
    """A member that says when it has partitions, then polls until killed."""
    from confluent_kafka import Consumer

    c = Consumer(rdk_conf(broker, group, "silent"))
    c.subscribe([topic])
    said = False
    while True:
        c.poll(0.1)
        if c.assignment() and not said:
            print("assigned", len(c.assignment()), flush=True)
            said = True


def rdk_silent(broker, topic, group):
    """A member in another process is killed -9: it never leaves, its session
    times out, and the survivor gets every partition."""
    import signal
    import subprocess
    import threading
    from confluent_kafka import Consumer

    nparts = 6
    a = Consumer(rdk_conf(broker, group, "survivor"))
    a.subscribe([topic])
    until("the survivor's assignment", lambda: len(a.assignment()) == nparts, lambda: a.poll(0.1))
    child = subprocess.Popen([sys.executable, __file__, "rdk_member", broker, topic, group],
                             stdout=subprocess.PIPE, text=True)
    said = []                                # the child's line: it has its partitions
    reader = threading.Thread(target=lambda: said.append(child.stdout.readline()), daemon=True)
    reader.start()
    until("the second member's partitions and the survivor's half",
          lambda: said and len(a.assignment()) == nparts // 2, lambda: a.poll(0.1))
    if not said[0].startswith("assigned"):
        fail("the second member did not get partitions: %r" % said[0])
    child.send_signal(signal.SIGKILL)
    child.wait()
    until("the survivor to get every partition back", lambda: len(a.assignment()) == nparts,
          lambda: a.poll(0.1))
    a.close()
    print("ok rdk_silent")


# ---- kafka-python ----

def kp(broker, topic, group):
    """kafka-python's poll blocks until a rebalance ends, so each member polls in a
    thread of its own (as applications run them)."""
    import threading
    from kafka import KafkaConsumer, KafkaProducer

    nparts = 4
    seen = {}
    lock = threading.Lock()
    errors = []

    prod = KafkaProducer(bootstrap_servers=broker)

    def produce(lo, hi):
        for i in range(lo, hi):
            prod.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % nparts)
        prod.flush()

    class Member(threading.Thread):
        def __init__(self, name):
            super().__init__(daemon=True)
            self.name_ = name
            self.stop = threading.Event()
            self.parts = []

        def run(self):
            c = KafkaConsumer(topic, bootstrap_servers=broker, group_id=group, client_id=self.name_,
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              session_timeout_ms=6000, heartbeat_interval_ms=500,
                              metadata_max_age_ms=1000)
            while not self.stop.is_set():
                got = c.poll(timeout_ms=100)
                with lock:
                    for tp, msgs in got.items():
                        for m in msgs:
                            k = (m.partition, m.offset)
                            if k in seen:
                                errors.append("offset %s consumed twice" % (k,))
                            seen[k] = self.name_
                if got:
                    c.commit()
                self.parts = sorted(tp.partition for tp in c.assignment())
            c.close()                  # LeaveGroup

    members = []

    def balanced():
        parts = [m.parts for m in members]
        flat = sorted(p for ps in parts for p in ps)
        return flat == list(range(nparts)) and all(len(ps) == nparts // len(members) for ps in parts)

    def count():
        if errors:
            fail(errors[0])
        with lock:
            return len(seen)

    def wait(what, cond):
        until(what, cond, lambda: time.sleep(0.05))

    produce(0, 40)
    members.append(Member("x"))
    members[0].start()
    wait("one member", balanced)
    wait("40 records", lambda: count() == 40)
    members.append(Member("y"))
    members[1].start()
    wait("two members", balanced)
    produce(40, 60)
    wait("60 records", lambda: count() == 60)
    first = members.pop(0)
    first.stop.set()
    first.join()
    wait("one member again", balanced)
    produce(60, 80)
    wait("80 records", lambda: count() == 80)
    with lock:
        who = set(seen.values())
    if who != {"x", "y"}:
        fail("not every member consumed: %s" % sorted(who))
    members[0].stop.set()
    members[0].join()
    print("ok kp", count())


# ---- positions ----

def commit(broker, group, topic, pairs):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=broker, group_id=group, enable_auto_commit=False)
    offs = {}
    for pair in pairs:
        p, o = pair.split(":")
        offs[TopicPartition(topic, int(p))] = OffsetAndMetadata(int(o), "")
    c.assign(list(offs))
    c.commit(offs)
    c.close()


def committed(broker, group, topic, n):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker, group_id=group, enable_auto_commit=False)
    out = []
    for p in range(int(n)):
        o = c.committed(TopicPartition(topic, p))
        out.append("%d:%s" % (p, -1 if o is None else o))
    c.close(autocommit=False)
    print(" ".join(out))


def resume(broker, group, topic, n):
    """The first offset a new member of group consumes, per partition (each must
    have records past its committed offset)."""
    from kafka import KafkaConsumer

    n = int(n)
    first = {}
    c = KafkaConsumer(topic, bootstrap_servers=broker, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="latest", session_timeout_ms=6000,
                      heartbeat_interval_ms=500)

    def step():
        for tp, msgs in c.poll(timeout_ms=100).items():
            first.setdefault(tp.partition, msgs[0].offset)

    until("records of %d partitions" % n, lambda: len(first) == n, step)
    print(" ".join("%d:%d" % (p, first[p]) for p in sorted(first)))
    c.close(autocommit=False)


def admin(broker, group):
    from kafka import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=broker)
    groups = sorted(g for g, _ in a.list_consumer_groups())
    desc = a.describe_consumer_groups([group])[0]
    offs = a.list_consumer_group_offsets(group)
    print("groups", ",".join(groups))
    print("state", desc.state, "members", len(desc.members))
    print("offsets", " ".join("%s/%d:%d" % (tp.topic, tp.partition, o.offset)
                              for tp, o in sorted(offs.items())))
    a.close()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "rdk":
        rdk(*args)
    elif cmd == "rdk_silent":
        rdk_silent(*args)
    elif cmd == "rdk_member":
        rdk_member(*args)
    elif cmd == "kp":
        kp(*args)
    elif cmd == "commit":
        commit(args[0], args[1], args[2], args[3:])
    elif cmd == "committed":
        committed(*args)
    elif cmd == "resume":
        resume(*args)
    elif cmd == "admin":
        admin(*args)
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
