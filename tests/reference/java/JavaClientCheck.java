import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.quota.*;
import org.apache.kafka.common.serialization.*;

/**
 * Apache Kafka's Java client against a broker: one scenario per run, results printed as "key=value" lines
 * that tests/reference/test_java_client.py compares with exact expectations.
 * Usage: JavaClientCheck bootstrap scenario topic
 *   (scenario: produce, group, timestamps, admin, transactions, features, quotas, configs-scram,
 *   offsets-producers; group848 and fenced848 with group.protocol=consumer)
 */
public class JavaClientCheck {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final long BASE_MS = 1_700_000_000_000L;
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String topic = args[2];
        switch (args[1]) {
            case "produce": produce(topic); break;
            case "group": group(topic); break;
            case "timestamps": timestamps(topic); break;
            case "admin": admin(topic); break;
            case "group848": group848(topic); break;
            case "fenced848": fenced848(topic); break;
            case "transactions": transactions(topic); break;
            case "features": features(); break;
            case "quotas": quotas(topic); break;
            case "configs-scram": configsAndScram(topic); break;
            case "offsets-producers": offsetsAndProducers(topic); break;
            default: throw new IllegalArgumentException("unknown scenario " + args[1]);
        }
    }

    static Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    static KafkaProducer<String, String> producer(String codec) {
        Properties p = common();
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("compression.type", codec);
        p.put("linger.ms", "20");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String group) {
        Properties p = common();
        if (group != null) p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "500");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** A KIP-848 member: group.protocol=consumer (the broker dictates heartbeats and assigns). */
    static KafkaConsumer<String, String> consumer848(String group) {
        Properties p = common();
        p.put("group.id", group);
        p.put("group.protocol", "consumer");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(common())) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3))).all().get(30, TimeUnit.SECONDS);
        }
    }

    /** Every codec: 10 keyed records each, idempotent acks=all; then all 50 read back in order. */
    static void produce(String topic) throws Exception {
        createTopic(topic, 1);
        for (String codec : CODECS) {
            try (KafkaProducer<String, String> producer = producer(codec)) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, 0, codec + "-" + i, "value-" + codec + "-" + i)));
                }
                producer.flush();
                StringBuilder offsets = new StringBuilder();
                for (Future<RecordMetadata> f : sent) offsets.append(offsets.length() == 0 ? "" : ",").append(f.get().offset());
                System.out.println("offsets." + codec + "=" + offsets);
            }
        }
        try (KafkaConsumer<String, String> consumer = consumer(null)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (values.size() < 50 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (!r.key().equals(r.value().substring("value-".length()))) throw new AssertionError("key " + r.key());
                    values.add(r.offset() + ":" + r.value());
                }
            }
            System.out.println("consumed=" + values.size());
            System.out.println("first=" + values.get(0));
            System.out.println("last=" + values.get(values.size() - 1));
        }
    }

    /** Three members of {@code group} made by {@code make}, subscribed to {@code topic} (a list they may leave). */
    static List<KafkaConsumer<String, String>> threeMembers(
            String topic, String group, java.util.function.Function<String, KafkaConsumer<String, String>> make) {
        List<KafkaConsumer<String, String>> members = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            KafkaConsumer<String, String> c = make.apply(group);
            c.subscribe(List.of(topic));
            members.add(c);
        }
        return members;
    }

    /** Three members share 3 partitions, commit what they read; one leaves and the others take over. */
    static void group(String topic) throws Exception {
        createTopic(topic, 3);
        String group = topic + "-g";
        List<KafkaConsumer<String, String>> members = threeMembers(topic, group, JavaClientCheck::consumer);
        // Records are produced only once the group is balanced: what a member reads before a rebalance
        // without committing is read again after it (at-least-once), which would blur the counts.
        Set<String> seen = new TreeSet<>();
        pollUntil(members, group, seen, 0, List.of(1, 1, 1));
        produceRange(topic, 0, 30);
        System.out.println("first.assignment=" + pollUntil(members, group, seen, 30, List.of(1, 1, 1)));
        System.out.println("first.records=" + seen.size());
        for (KafkaConsumer<String, String> c : members) c.commitSync();
        members.remove(2).close();  // leaves the group: a rebalance gives its partition to the others
        seen.clear();
        pollUntil(members, group, seen, 0, List.of(1, 2));
        produceRange(topic, 30, 36);
        System.out.println("second.assignment=" + pollUntil(members, group, seen, 6, List.of(1, 2)));
        System.out.println("second.records=" + seen.size());
        for (KafkaConsumer<String, String> c : members) c.commitSync();
        Map<TopicPartition, OffsetAndMetadata> committed = members.get(0).committed(
            Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1), new TopicPartition(topic, 2)));
        Map<Integer, Long> offsets = new TreeMap<>();
        committed.forEach((tp, om) -> offsets.put(tp.partition(), om.offset()));
        System.out.println("committed=" + offsets);
        for (KafkaConsumer<String, String> c : members) c.close();
    }

    static void produceRange(String topic, int from, int to) {
        produceRange(topic, from, to, 3);
    }

    static void produceRange(String topic, int from, int to, int partitions) {
        try (KafkaProducer<String, String> producer = producer("none")) {
            for (int i = from; i < to; i++) producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i));
            producer.flush();
        }
    }

    /** The members' assignments: "disjoint" when no partition is owned twice, then the sorted union. */
    static String partitionsOwned(List<KafkaConsumer<String, String>> members) {
        List<Integer> all = new ArrayList<>();
        for (KafkaConsumer<String, String> m : members) m.assignment().forEach(tp -> all.add(tp.partition()));
        Set<Integer> union = new TreeSet<>(all);
        return (union.size() == all.size() ? "disjoint " : "overlapping ") + union;
    }

    /**
     * KIP-848: three consumer-protocol members over 6 partitions read every record once with disjoint complete
     * assignments, the group is listed with type consumer; one member closes and the two others take its
     * partitions and read exactly the new records from the committed offsets.
     */
    static void group848(String topic) throws Exception {
        createTopic(topic, 6);
        String group = topic + "-g";
        List<KafkaConsumer<String, String>> members = threeMembers(topic, group, JavaClientCheck::consumer848);
        Set<String> seen = new TreeSet<>();
        pollUntil(members, group, seen, 0, List.of(2, 2, 2));
        produceRange(topic, 0, 60, 6);
        System.out.println("first.assignment=" + pollUntil(members, group, seen, 60, List.of(2, 2, 2)));
        System.out.println("first.records=" + seen.size());
        System.out.println("first.partitions=" + partitionsOwned(members));
        try (Admin admin = Admin.create(common())) {
            GroupListing listed = admin.listGroups().all().get().stream()
                .filter(g -> g.groupId().equals(group)).findFirst().orElseThrow();
            System.out.println("listed=" + listed.type().map(Enum::name).orElse("none") + " " + listed.protocol());
        }
        for (KafkaConsumer<String, String> c : members) c.commitSync();
        // Bounded: a leave that cannot reach the coordinator (it moved) gives way to the session timeout.
        members.remove(2).close(CloseOptions.timeout(Duration.ofSeconds(5)));
        seen.clear();
        pollUntil(members, group, seen, 0, List.of(3, 3));
        produceRange(topic, 60, 72, 6);
        System.out.println("second.assignment=" + pollUntil(members, group, seen, 12, List.of(3, 3)));
        System.out.println("second.records=" + seen.size());
        System.out.println("second.partitions=" + partitionsOwned(members));
        for (KafkaConsumer<String, String> c : members) c.commitSync();
        Set<TopicPartition> all = new HashSet<>();
        for (int p = 0; p < 6; p++) all.add(new TopicPartition(topic, p));
        Map<Integer, Long> offsets = new TreeMap<>();
        members.get(0).committed(all).forEach((tp, om) -> offsets.put(tp.partition(), om.offset()));
        System.out.println("committed=" + offsets);
        for (KafkaConsumer<String, String> c : members) c.close();
    }

    /**
     * KIP-848 fencing: one member reads and commits 30 records; the test's control() then answers one of its
     * heartbeats with FENCED_MEMBER_EPOCH. The member loses its partitions, rejoins with epoch 0, gets them
     * back and reads the next 30 records from the committed offsets: nothing lost, nothing read twice.
     */
    static void fenced848(String topic) throws Exception {
        createTopic(topic, 3);
        String group = topic + "-g";
        List<String> events = Collections.synchronizedList(new ArrayList<>());
        try (KafkaConsumer<String, String> member = consumer848(group)) {
            member.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> p) { if (!p.isEmpty()) events.add("revoked" + sorted(p)); }
                public void onPartitionsAssigned(Collection<TopicPartition> p) { if (!p.isEmpty()) events.add("assigned" + sorted(p)); }
                public void onPartitionsLost(Collection<TopicPartition> p) { events.add("lost" + sorted(p)); }
            });
            List<KafkaConsumer<String, String>> members = List.of(member);
            Set<String> seen = new TreeSet<>();
            pollUntil(members, group, seen, 0, List.of(3));
            produceRange(topic, 0, 30);
            pollUntil(members, group, seen, 30, List.of(3));
            member.commitSync();
            System.out.println("first.records=" + seen.size());
            long deadline = System.currentTimeMillis() + 60_000;
            while (events.stream().filter(e -> e.startsWith("assigned")).count() < 2) {
                if (System.currentTimeMillis() > deadline) throw new AssertionError("not fenced and back: " + events);
                member.poll(Duration.ofMillis(100)).forEach(r -> { throw new AssertionError("unexpected " + r); });
            }
            produceRange(topic, 30, 60);
            pollUntil(members, group, seen, 60, List.of(3));
            System.out.println("events=" + events);
            System.out.println("total.records=" + seen.size());
        }
    }

    static List<Integer> sorted(Collection<TopicPartition> partitions) {
        return partitions.stream().map(TopicPartition::partition).sorted().toList();
    }

    /**
     * Polls every member until `count` records arrived and the rebalance is over: the members own `sizes`
     * partitions (sorted), and the coordinator says the group is Stable with exactly those assignments (a
     * member that has not yet heard of a rebalance still owns its old partitions).
     */
    static List<Integer> pollUntil(List<KafkaConsumer<String, String>> members, String group, Set<String> seen,
                                   int count, List<Integer> sizes) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        List<Integer> owned = List.of();
        String coordinator = "not asked";
        try (Admin admin = Admin.create(common())) {
            while (System.currentTimeMillis() < deadline) {
                for (KafkaConsumer<String, String> member : members) {
                    for (ConsumerRecord<String, String> r : member.poll(Duration.ofMillis(100))) {
                        if (!seen.add(r.partition() + ":" + r.offset())) throw new AssertionError("duplicate " + r);
                    }
                }
                owned = members.stream().map(m -> m.assignment().size()).sorted().toList();
                if (seen.size() < count || !owned.equals(sizes)) continue;
                ConsumerGroupDescription described = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                List<Integer> assigned = described.members().stream()
                    .map(m -> m.assignment().topicPartitions().size()).sorted().toList();
                coordinator = described.groupState() + " " + assigned;
                if (described.groupState() == GroupState.STABLE && assigned.equals(sizes)) return owned;
            }
        }
        throw new AssertionError("timed out: " + seen.size() + " records, assignment " + owned + ", coordinator: "
                                 + coordinator);
    }

    /** ListOffsets by timestamp finds the first record at or after the time, none past the last. */
    static void timestamps(String topic) throws Exception {
        createTopic(topic, 1);
        try (KafkaProducer<String, String> producer = producer("none")) {
            for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(topic, 0, BASE_MS + i * 10, "k", "v" + i));
            producer.flush();
        }
        try (KafkaConsumer<String, String> consumer = consumer(null)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            for (long at : new long[] {BASE_MS - 1000, BASE_MS + 5, BASE_MS + 20, BASE_MS + 21}) {
                OffsetAndTimestamp found = consumer.offsetsForTimes(Map.of(tp, at)).get(tp);
                System.out.println("at." + (at - BASE_MS) + "=" + (found == null ? "none" : found.offset() + "@" + (found.timestamp() - BASE_MS)));
            }
            System.out.println("beginning=" + consumer.beginningOffsets(List.of(tp)).get(tp));
            System.out.println("end=" + consumer.endOffsets(List.of(tp)).get(tp));
        }
    }

    /** Create a topic with 2 partitions, grow it to 4, delete it. */
    static void admin(String topic) throws Exception {
        try (Admin admin = Admin.create(common())) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 3))).all().get(30, TimeUnit.SECONDS);
            System.out.println("created.partitions=" + partitions(admin, topic, 2));
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get(30, TimeUnit.SECONDS);
            System.out.println("grown.partitions=" + partitions(admin, topic, 4));
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 30_000;
            while (admin.listTopics().names().get().contains(topic) && System.currentTimeMillis() < deadline) Thread.sleep(50);
            System.out.println("listed.after.delete=" + admin.listTopics().names().get().contains(topic));
        }
    }

    /**
     * The partition count describeTopics reports once it is `expected`: a topic created or grown reaches every
     * broker's metadata a moment after the controller acknowledged it. Another count is printed after a minute.
     */
    static int partitions(Admin admin, String topic, int expected) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                int found = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
                if (found == expected || System.currentTimeMillis() > deadline) return found;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.currentTimeMillis() > deadline) {
                    throw e;
                }
            }
            Thread.sleep(20);
        }
    }

    static KafkaProducer<String, String> transactional(String id) {
        Properties p = common();
        p.put("transactional.id", id);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    /**
     * Three transactions (commit with the group's offsets, abort, commit) over 2 partitions; a read_committed
     * consumer reads what was committed; a second producer with the same transactional.id fences the first.
     */
    static void transactions(String topic) throws Exception {
        createTopic(topic, 2);
        String group = topic + "-g";
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        KafkaProducer<String, String> producer = transactional(topic + "-tx");
        producer.initTransactions();
        producer.beginTransaction();
        for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(topic, 0, null, "a" + i));
        for (int i = 0; i < 2; i++) producer.send(new ProducerRecord<>(topic, 1, null, "b" + i));
        producer.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(3)), new ConsumerGroupMetadata(group));
        producer.commitTransaction();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, null, "aborted0"));
        producer.send(new ProducerRecord<>(topic, 0, null, "aborted1"));
        producer.flush();
        producer.abortTransaction();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, null, "c0"));
        producer.send(new ProducerRecord<>(topic, 1, null, "c1"));
        producer.commitTransaction();
        try (KafkaConsumer<String, String> consumer = committedReader()) {
            consumer.assign(List.of(p0, p1));
            Map<TopicPartition, Long> ends = consumer.endOffsets(List.of(p0, p1));
            System.out.println("end.offsets=" + ends.get(p0) + "," + ends.get(p1));
            Map<Integer, List<String>> read = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while ((consumer.position(p0) < ends.get(p0) || consumer.position(p1) < ends.get(p1))
                    && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    read.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset() + ":" + r.value());
                }
            }
            System.out.println("read.committed=" + read);
        }
        try (Admin admin = Admin.create(common())) {
            System.out.println("group.offsets=" + admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get().entrySet().stream().map(e -> e.getKey() + "=" + e.getValue().offset()).sorted().toList());
        }
        try (KafkaProducer<String, String> successor = transactional(topic + "-tx")) {
            successor.initTransactions();
            String outcome;
            try {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
                producer.commitTransaction();
                outcome = "committed";
            } catch (Exception e) {
                Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
                outcome = cause.getClass().getSimpleName();
            }
            System.out.println("fenced=" + outcome);
        } finally {
            producer.close(Duration.ZERO);
        }
    }

    static KafkaConsumer<String, String> committedReader() {
        Properties p = common();
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /**
     * The Admin client's describeFeatures and updateFeatures on transaction.version: validate-only and real
     * downgrades, refused updates (printed as the exception's class), and the upgrade back to level 2.
     */
    static void features() throws Exception {
        String tv = "transaction.version";
        try (Admin admin = Admin.create(common())) {
            System.out.println("finalized=" + finalizedLevel(admin, tv, "2"));
            System.out.println("supported=" + admin.describeFeatures().featureMetadata().get().supportedFeatures().get(tv));
            System.out.println("validate.downgrade=" + update(admin, tv, (short) 1, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE, true));
            System.out.println("after.validate=" + finalizedLevel(admin, tv, "2"));
            System.out.println("downgrade.as.upgrade=" + update(admin, tv, (short) 1, FeatureUpdate.UpgradeType.UPGRADE, false));
            System.out.println("too.high=" + update(admin, tv, (short) 3, FeatureUpdate.UpgradeType.UPGRADE, false));
            System.out.println("downgrade=" + update(admin, tv, (short) 1, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE, false));
            System.out.println("after.downgrade=" + finalizedLevel(admin, tv, "1"));
            System.out.println("upgrade=" + update(admin, tv, (short) 2, FeatureUpdate.UpgradeType.UPGRADE, false));
            System.out.println("after.upgrade=" + finalizedLevel(admin, tv, "2"));
        }
    }

    static String update(Admin admin, String feature, short level, FeatureUpdate.UpgradeType type, boolean validateOnly) {
        try {
            admin.updateFeatures(Map.of(feature, new FeatureUpdate(level, type)),
                new UpdateFeaturesOptions().validateOnly(validateOnly)).all().get(30, TimeUnit.SECONDS);
            return "ok";
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            return cause.getClass().getSimpleName();
        }
    }

    /** The finalized level once it is `expected` (a change reaches the brokers a moment later); after 30 s, another. */
    static String finalizedLevel(Admin admin, String feature, String expected) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            FinalizedVersionRange range = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get(feature);
            String level = range == null ? "none" : String.valueOf(range.maxVersionLevel());
            if (level.equals(expected) || System.currentTimeMillis() > deadline) return level;
            Thread.sleep(50);
        }
    }

    /**
     * Client quotas altered (validate-only, valid, refused) and described with exact, default and any-name filters,
     * strict and not, then removed. Names start with `id` (the cluster may hold other tests' quotas).
     */
    static void quotas(String id) throws Exception {
        String user = id + "-user", client = id + "-client", ip = "10.1.2.3";
        try (Admin admin = Admin.create(common())) {
            ClientQuotaEntity byClient = entity("client-id", client), byUser = entity("user", user);
            ClientQuotaEntity userDefaultClient = entity("user", user, "client-id", null);
            ClientQuotaEntity userClient = entity("user", user, "client-id", client), byIp = entity("ip", ip);
            alter(admin, "validate.only", true, Map.of(byClient, Map.of("producer_byte_rate", 1048576.0)));
            System.out.println("after.validate.only=" + describe(admin, true, ClientQuotaFilterComponent.ofEntity("client-id", client)));
            Map<ClientQuotaEntity, Map<String, Double>> set = new LinkedHashMap<>();
            set.put(byClient, Map.of("producer_byte_rate", 1048576.0, "consumer_byte_rate", 2097152.0));
            set.put(byUser, Map.of("request_percentage", 50.5));
            set.put(userDefaultClient, Map.of("producer_byte_rate", 4096.0));
            set.put(userClient, Map.of("controller_mutation_rate", 10.0));
            set.put(byIp, Map.of("connection_creation_rate", 7.0));
            set.put(entity("client-id", client + "-bad"), Map.of("bogus", 1.0));
            set.put(entity("user", user + "-frac"), Map.of("producer_byte_rate", 1.5));
            set.put(entity("ip", "10.9.9.9", "user", user), Map.of("connection_creation_rate", 5.0));
            set.put(entity("client-id", client + "-neg"), Map.of("consumer_byte_rate", -1.0));
            set.put(entity("ip", "10.9.9.8"), Map.of("producer_byte_rate", 1.0));
            set.put(entity("user", ""), Map.of("producer_byte_rate", 1.0));
            alter(admin, "alter", false, set);
            long deadline = System.currentTimeMillis() + 30_000;  // other brokers learn the quotas a moment later
            while (describe(admin, false, ClientQuotaFilterComponent.ofEntity("user", user)).split(";").length < 3
                    && System.currentTimeMillis() < deadline) Thread.sleep(50);
            System.out.println("user=" + describe(admin, false, ClientQuotaFilterComponent.ofEntity("user", user)));
            System.out.println("user.strict=" + describe(admin, true, ClientQuotaFilterComponent.ofEntity("user", user)));
            System.out.println("user.default.client=" + describe(admin, true, ClientQuotaFilterComponent.ofEntity("user", user),
                    ClientQuotaFilterComponent.ofDefaultEntity("client-id")));
            System.out.println("user.any.client=" + describe(admin, true, ClientQuotaFilterComponent.ofEntity("user", user),
                    ClientQuotaFilterComponent.ofEntityType("client-id")));
            System.out.println("client=" + describe(admin, false, ClientQuotaFilterComponent.ofEntity("client-id", client)));
            System.out.println("client.strict=" + describe(admin, true, ClientQuotaFilterComponent.ofEntity("client-id", client)));
            System.out.println("ip=" + describe(admin, true, ClientQuotaFilterComponent.ofEntity("ip", ip)));
            System.out.println("ip.and.user=" + describe(admin, false, ClientQuotaFilterComponent.ofEntity("ip", ip),
                    ClientQuotaFilterComponent.ofEntity("user", user)));
            System.out.println("unknown.type=" + describe(admin, false, ClientQuotaFilterComponent.ofEntity("group", id)));
            Map<ClientQuotaEntity, Map<String, Double>> removals = new LinkedHashMap<>();
            for (ClientQuotaEntity entity : List.of(byClient, byUser, userDefaultClient, userClient, byIp)) {
                Map<String, Double> keys = new HashMap<>();
                set.get(entity).keySet().forEach(key -> keys.put(key, null));
                removals.put(entity, keys);
            }
            alter(admin, "remove", false, removals);
            while (!describe(admin, false, ClientQuotaFilterComponent.ofEntity("user", user)).isEmpty()
                    && System.currentTimeMillis() < deadline) Thread.sleep(50);
            System.out.println("user.after.remove=" + describe(admin, false, ClientQuotaFilterComponent.ofEntity("user", user)));
        }
    }

    static ClientQuotaEntity entity(String... typesAndNames) {
        Map<String, String> entries = new HashMap<>();
        for (int i = 0; i < typesAndNames.length; i += 2) entries.put(typesAndNames[i], typesAndNames[i + 1]);
        return new ClientQuotaEntity(entries);
    }

    /** Prints prefix.<entity>=OK or the exception's class for each entity altered. */
    static void alter(Admin admin, String prefix, boolean validateOnly, Map<ClientQuotaEntity, Map<String, Double>> changes) {
        List<ClientQuotaAlteration> alterations = new ArrayList<>();
        changes.forEach((entity, ops) -> alterations.add(new ClientQuotaAlteration(entity, ops.entrySet().stream()
                .map(op -> new ClientQuotaAlteration.Op(op.getKey(), op.getValue())).toList())));
        AlterClientQuotasResult result = admin.alterClientQuotas(alterations, new AlterClientQuotasOptions().validateOnly(validateOnly));
        for (ClientQuotaEntity entity : changes.keySet()) {
            String outcome;
            try {
                result.values().get(entity).get(30, TimeUnit.SECONDS);
                outcome = "OK";
            } catch (Exception e) {
                outcome = e.getCause() == null ? e.getClass().getSimpleName() : e.getCause().getClass().getSimpleName();
            }
            System.out.println(prefix + "." + show(entity) + "=" + outcome);
        }
    }

    /** The entities the filter matches with their quotas, sorted: "type:name,...{key=value,...};..." or the error. */
    static String describe(Admin admin, boolean strict, ClientQuotaFilterComponent... components) throws Exception {
        ClientQuotaFilter filter = strict ? ClientQuotaFilter.containsOnly(List.of(components)) : ClientQuotaFilter.contains(List.of(components));
        try {
            Map<ClientQuotaEntity, Map<String, Double>> found = admin.describeClientQuotas(filter).entities().get(30, TimeUnit.SECONDS);
            List<String> lines = new ArrayList<>();
            found.forEach((entity, values) -> lines.add(show(entity) + new TreeMap<>(values)));
            Collections.sort(lines);
            return String.join(";", lines);
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }

    static String show(ClientQuotaEntity entity) {
        List<String> parts = new ArrayList<>();
        new TreeMap<>(entity.entries()).forEach((type, name) -> parts.add(type + ":" + (name == null ? "<default>" : name)));
        return String.join(",", parts);
    }

    /** "OK" once the future completes, or the simple name of the exception it fails with. */
    static String outcome(KafkaFuture<?> future) {
        try {
            future.get(30, TimeUnit.SECONDS);
            return "OK";
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            return cause.getClass().getSimpleName();
        }
    }

    /** `read` once it returns `expected` (Apache Kafka's brokers apply metadata changes each in turn); after 30 s, another. */
    static String settled(Callable<String> read, String expected) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            String found = read.call();
            if (found.equals(expected) || System.currentTimeMillis() > deadline) return found;
            Thread.sleep(50);
        }
    }

    /**
     * IncrementalAlterConfigs on a topic (validate-only, SET with APPEND, SUBTRACT with DELETE, refusals) with
     * describeConfigs after each; then SCRAM credentials upserted, refused, described and deleted. Users are named
     * `id`-alice and so on (the cluster may hold other tests' users); they are printed without the prefix.
     */
    static void configsAndScram(String id) throws Exception {
        createTopic(id, 1);
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, id);
        AlterConfigOp.OpType set = AlterConfigOp.OpType.SET, delete = AlterConfigOp.OpType.DELETE;
        AlterConfigOp.OpType append = AlterConfigOp.OpType.APPEND, subtract = AlterConfigOp.OpType.SUBTRACT;
        String initial = "cleanup.policy=delete:DEFAULT_CONFIG,retention.ms=604800000:DEFAULT_CONFIG";
        try (Admin admin = Admin.create(common())) {
            System.out.println("configs.initial=" + settled(() -> topicConfigs(admin, topic), initial));
            System.out.println("validate.only=" + alterConfigs(admin, topic, true,
                op("retention.ms", "3600000", set), op("cleanup.policy", "compact", append)));
            System.out.println("after.validate.only=" + topicConfigs(admin, topic));
            System.out.println("set.append=" + alterConfigs(admin, topic, false,
                op("retention.ms", "3600000", set), op("cleanup.policy", "compact", append)));
            System.out.println("after.set.append=" + settled(() -> topicConfigs(admin, topic),
                "cleanup.policy=delete,compact:DYNAMIC_TOPIC_CONFIG,retention.ms=3600000:DYNAMIC_TOPIC_CONFIG"));
            System.out.println("subtract.delete=" + alterConfigs(admin, topic, false,
                op("cleanup.policy", "delete", subtract), op("retention.ms", null, delete)));
            String altered = "cleanup.policy=compact:DYNAMIC_TOPIC_CONFIG,retention.ms=604800000:DEFAULT_CONFIG";
            System.out.println("after.subtract.delete=" + settled(() -> topicConfigs(admin, topic), altered));
            System.out.println("unknown.key=" + alterConfigs(admin, topic, false, op("no.such.config", "1", set)));
            System.out.println("unknown.key.validate.only=" + alterConfigs(admin, topic, true, op("no.such.config", "1", set)));
            System.out.println("append.to.long=" + alterConfigs(admin, topic, false, op("retention.ms", "1", append)));
            System.out.println("bad.value=" + alterConfigs(admin, topic, false, op("retention.ms", "soon", set)));
            System.out.println("unknown.topic=" + alterConfigs(admin, new ConfigResource(ConfigResource.Type.TOPIC,
                "missing-" + id), false, op("retention.ms", "1000", set)));
            System.out.println("after.refusals=" + topicConfigs(admin, topic));

            String alice = id + "-alice", bob = id + "-bob", carol = id + "-carol", dave = id + "-dave";
            ScramMechanism sha256 = ScramMechanism.SCRAM_SHA_256, sha512 = ScramMechanism.SCRAM_SHA_512;
            System.out.println("scram.first=" + alterScram(admin, id,
                upsert(alice, sha512, 8192), upsert(bob, sha256, 4095), upsert(carol, sha256, 16385),
                new UserScramCredentialDeletion(dave, sha256)));
            System.out.println("scram.described=" + settled(() -> describeScram(admin, id, alice, bob),
                "alice=[SCRAM_SHA_512:8192],bob=ResourceNotFoundException"));
            System.out.println("scram.second=" + alterScram(admin, id, upsert(alice, sha256, 4096)));
            String both = "alice=[SCRAM_SHA_256:4096, SCRAM_SHA_512:8192]";
            System.out.println("scram.both=" + settled(() -> describeScram(admin, id, alice), both));
            System.out.println("scram.twice=" + alterScram(admin, id, upsert(alice, sha256, 8192),
                new UserScramCredentialDeletion(alice, sha512)));
            System.out.println("scram.listed=" + settled(() -> describeScram(admin, id), both));
            System.out.println("scram.delete=" + alterScram(admin, id, new UserScramCredentialDeletion(alice, sha512)));
            System.out.println("scram.after.delete=" + settled(() -> describeScram(admin, id, alice),
                "alice=[SCRAM_SHA_256:4096]"));
            System.out.println("scram.delete.last=" + alterScram(admin, id, new UserScramCredentialDeletion(alice, sha256)));
            System.out.println("scram.after.delete.last=" + settled(() -> describeScram(admin, id, alice),
                "alice=ResourceNotFoundException"));
        }
    }

    static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    static String alterConfigs(Admin admin, ConfigResource resource, boolean validateOnly, AlterConfigOp... ops) {
        return outcome(admin.incrementalAlterConfigs(Map.of(resource, List.of(ops)),
            new AlterConfigsOptions().validateOnly(validateOnly)).values().get(resource));
    }

    /** cleanup.policy and retention.ms of the topic: "name=value:SOURCE,...". */
    static String topicConfigs(Admin admin, ConfigResource topic) throws Exception {
        Config config = admin.describeConfigs(List.of(topic)).all().get(30, TimeUnit.SECONDS).get(topic);
        List<String> shown = new ArrayList<>();
        for (String name : List.of("cleanup.policy", "retention.ms")) {
            ConfigEntry entry = config.get(name);
            shown.add(name + "=" + entry.value() + ":" + entry.source());
        }
        return String.join(",", shown);
    }

    static UserScramCredentialUpsertion upsert(String user, ScramMechanism mechanism, int iterations) {
        return new UserScramCredentialUpsertion(user, new ScramCredentialInfo(mechanism, iterations), user + "-pw");
    }

    /** Each user's outcome, sorted: "alice=OK,bob=...", the names without the `id`- prefix. */
    static String alterScram(Admin admin, String id, UserScramCredentialAlteration... alterations) {
        Map<String, String> outcomes = new TreeMap<>();
        admin.alterUserScramCredentials(List.of(alterations)).values()
            .forEach((user, future) -> outcomes.put(user.substring(id.length() + 1), outcome(future)));
        return outcomes.toString().replace(" ", "").replaceAll("^\\{|\\}$", "");
    }

    /** The users' credentials "alice=[MECHANISM:iterations, ...]" or the error; every `id`- user if none named. */
    static String describeScram(Admin admin, String id, String... users) throws Exception {
        DescribeUserScramCredentialsResult result = users.length == 0
            ? admin.describeUserScramCredentials() : admin.describeUserScramCredentials(List.of(users));
        List<String> named = users.length == 0
            ? result.users().get(30, TimeUnit.SECONDS).stream().filter(u -> u.startsWith(id + "-")).toList()
            : List.of(users);
        List<String> shown = new ArrayList<>();
        for (String user : new TreeSet<>(named)) {
            String described;
            try {
                described = result.description(user).get(30, TimeUnit.SECONDS).credentialInfos().stream()
                    .map(info -> info.mechanism() + ":" + info.iterations()).sorted().toList().toString();
            } catch (ExecutionException e) {
                described = e.getCause().getClass().getSimpleName();
            }
            shown.add(user.substring(id.length() + 1) + "=" + described);
        }
        return String.join(",", shown);
    }

    /**
     * OffsetDelete (deleteConsumerGroupOffsets) for an empty group, a group whose member subscribes to the topic, and
     * an unknown group; then the producer state of two partitions written by an idempotent and a transactional
     * producer (describeProducers), the open transaction described and listed, and the same after its commit.
     * Partitions are printed as t-N (the topic) and other-N; producer ids as which producer they are.
     */
    static void offsetsAndProducers(String topic) throws Exception {
        String other = topic + "-other", txid = topic + "-tx";
        try (Admin admin = Admin.create(common())) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 3), new NewTopic(other, 1, (short) 3)))
                .all().get(30, TimeUnit.SECONDS);
        }
        TopicPartition t0 = new TopicPartition(topic, 0), t1 = new TopicPartition(topic, 1);
        TopicPartition o0 = new TopicPartition(other, 0), o7 = new TopicPartition(other, 7);
        java.util.function.Function<TopicPartition, String> label =
            tp -> (tp.topic().equals(topic) ? "t-" : tp.topic().equals(other) ? "other-" : tp.topic() + "-") + tp.partition();
        try (Admin admin = Admin.create(common())) {
            String empty = topic + "-empty", active = topic + "-active";
            admin.alterConsumerGroupOffsets(empty, Map.of(t0, new OffsetAndMetadata(3), t1, new OffsetAndMetadata(4)))
                .all().get(30, TimeUnit.SECONDS);
            System.out.println("empty.delete=" + deleteOffsets(admin, empty, label, t0, o7));
            System.out.println("empty.remaining=" + groupOffsets(admin, empty, label));
            try (KafkaConsumer<String, String> member = consumer(active)) {
                member.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                while (member.assignment().size() < 2 && System.currentTimeMillis() < deadline) member.poll(Duration.ofMillis(100));
                member.commitSync(Map.of(t0, new OffsetAndMetadata(3), t1, new OffsetAndMetadata(4), o0, new OffsetAndMetadata(5)));
                System.out.println("active.delete=" + deleteOffsets(admin, active, label, t0, o0));
                System.out.println("active.remaining=" + groupOffsets(admin, active, label));
            }
            System.out.println("left.delete=" + deleteOffsets(admin, active, label, t0));
            System.out.println("left.remaining=" + groupOffsets(admin, active, label));
            System.out.println("unknown.group.delete=" + deleteOffsets(admin, "no-such-" + active, label, t0));
        }

        try (KafkaProducer<String, String> idempotent = producer("none")) {
            for (int i = 0; i < 3; i++) idempotent.send(new ProducerRecord<>(topic, 0, null, "i" + i));
            idempotent.flush();
        }
        Properties p = common();
        p.put("transactional.id", txid);
        p.put("transaction.timeout.ms", "45000");
        try (KafkaProducer<String, String> transactional = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
             Admin admin = Admin.create(common())) {
            transactional.initTransactions();
            transactional.beginTransaction();
            for (int i = 0; i < 2; i++) transactional.send(new ProducerRecord<>(topic, 0, null, "x" + i));
            transactional.send(new ProducerRecord<>(topic, 1, null, "y0"));
            transactional.flush();
            Set<Integer> brokers = new TreeSet<>();
            admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).forEach(n -> brokers.add(n.id()));
            TransactionDescription ongoing = admin.describeTransactions(List.of(txid)).description(txid).get(30, TimeUnit.SECONDS);
            long pid = ongoing.producerId();
            System.out.println("txn.ongoing=" + transaction(ongoing, brokers, label));
            System.out.println("producers.ongoing=" + producers(admin, pid, label, t0, t1));
            System.out.println("listed.ongoing=" + listed(admin, txid, pid, new ListTransactionsOptions()
                .filterStates(List.of(TransactionState.ONGOING))));
            System.out.println("listed.empty=" + listed(admin, txid, pid, new ListTransactionsOptions()
                .filterStates(List.of(TransactionState.EMPTY))));
            System.out.println("listed.by.pid=" + listed(admin, txid, pid, new ListTransactionsOptions()
                .filterProducerIds(List.of(pid))));
            System.out.println("listed.other.pid=" + listed(admin, txid, pid, new ListTransactionsOptions()
                .filterProducerIds(List.of(pid + 1))));
            System.out.println("unknown.txn=" + outcome(admin.describeTransactions(List.of("no-such-" + txid)).description("no-such-" + txid)));
            transactional.commitTransaction();
            String committed = settled(() -> transaction(
                admin.describeTransactions(List.of(txid)).description(txid).get(30, TimeUnit.SECONDS), brokers, label),
                "COMPLETE_COMMIT epoch=1 timeout=45000 started=true partitions=[] coordinator=broker");
            System.out.println("txn.committed=" + committed);
            System.out.println("producers.committed=" + producers(admin, pid, label, t0, t1));
            System.out.println("listed.committed=" + listed(admin, txid, pid, new ListTransactionsOptions()
                .filterStates(List.of(TransactionState.COMPLETE_COMMIT))));
            System.out.println("listed.ongoing.after.commit=" + listed(admin, txid, pid, new ListTransactionsOptions()
                .filterStates(List.of(TransactionState.ONGOING))));
        }
    }

    /** Each partition's outcome, in the order named: "t-0=OK,other-7=...". */
    static String deleteOffsets(Admin admin, String group, java.util.function.Function<TopicPartition, String> label,
                                TopicPartition... partitions) {
        DeleteConsumerGroupOffsetsResult result = admin.deleteConsumerGroupOffsets(group, new LinkedHashSet<>(List.of(partitions)));
        List<String> shown = new ArrayList<>();
        for (TopicPartition tp : partitions) shown.add(label.apply(tp) + "=" + outcome(result.partitionResult(tp)));
        return String.join(",", shown) + ",all=" + outcome(result.all());
    }

    static String groupOffsets(Admin admin, String group, java.util.function.Function<TopicPartition, String> label) throws Exception {
        return admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)
            .entrySet().stream().map(e -> label.apply(e.getKey()) + "=" + e.getValue().offset()).sorted().toList().toString();
    }

    /** State, epoch, timeout, whether a start time is given, partitions, whether the coordinator is a broker listed. */
    static String transaction(TransactionDescription d, Set<Integer> brokers,
                              java.util.function.Function<TopicPartition, String> label) {
        return d.state().name() + " epoch=" + d.producerEpoch() + " timeout=" + d.transactionTimeoutMs()
            + " started=" + (d.transactionStartTimeMs().orElse(-1) > 0)
            + " partitions=" + d.topicPartitions().stream().map(label).sorted().toList()
            + " coordinator=" + (brokers.contains(d.coordinatorId()) ? "broker" : String.valueOf(d.coordinatorId()));
    }

    /**
     * Each partition's active producers, sorted: "t-0=[idempotent epoch=0 seq=2 txn-start=none coordinator-epoch=none
     * timestamp=true, ...]"; the transactional producer is `pid`, any other is "idempotent".
     */
    static String producers(Admin admin, long pid, java.util.function.Function<TopicPartition, String> label,
                            TopicPartition... partitions) throws Exception {
        DescribeProducersResult result = admin.describeProducers(List.of(partitions));
        List<String> shown = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            List<String> states = result.partitionResult(tp).get(30, TimeUnit.SECONDS).activeProducers().stream()
                .map(s -> (s.producerId() == pid ? "transactional" : "idempotent") + " epoch=" + s.producerEpoch()
                    + " seq=" + s.lastSequence()
                    + " txn-start=" + (s.currentTransactionStartOffset().isPresent() ? s.currentTransactionStartOffset().getAsLong() : "none")
                    + " coordinator-epoch=" + (s.coordinatorEpoch().isPresent() ? "present" : "none")
                    + " timestamp=" + (s.lastTimestamp() > 0))
                .sorted().toList();
            shown.add(label.apply(tp) + "=" + states);
        }
        return String.join(",", shown);
    }

    /** How listTransactions with `options` lists `txid`: "STATE pid" (pid: whether it is `pid`), or "none". */
    static String listed(Admin admin, String txid, long pid, ListTransactionsOptions options) throws Exception {
        return admin.listTransactions(options).all().get(30, TimeUnit.SECONDS).stream()
            .filter(t -> t.transactionalId().equals(txid))
            .map(t -> t.state().name() + " " + (t.producerId() == pid ? "pid" : "other-pid"))
            .findFirst().orElse("none");
    }
}
