import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer group of Apache Kafka's Java client for benchmarks/bench_expansion.py: {@code members} consumers, each
 * polling {@code topic} in its own thread, print every record a poll returned as one line
 * {@code key value partition offset member} right after the poll returned; they stop when stdin closes.
 * Arguments: bootstrap topic group auto.offset.reset members.
 */
public final class ExpansionConsumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], reset = args[3];
        int members = Integer.parseInt(args[4]);
        AtomicBoolean stopping = new AtomicBoolean();
        Thread[] threads = new Thread[members];
        for (int n = 0; n < members; n++) {
            String name = "m" + n;
            threads[n] = new Thread(() -> consume(bootstrap, topic, group, reset, name, stopping), name);
            threads[n].start();
        }
        while (System.in.read() != -1) {
            // stdin closed: the benchmark is done
        }
        stopping.set(true);
        for (Thread thread : threads) {
            thread.join();
        }
    }

    private static void consume(String bootstrap, String topic, String group, String reset, String name,
                                AtomicBoolean stopping) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("client.id", name);
        props.put("auto.offset.reset", reset);
        props.put("metadata.max.age.ms", "1000");
        props.put("heartbeat.interval.ms", "100");
        props.put("session.timeout.ms", "3000");
        props.put("max.poll.records", "100");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            while (!stopping.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                StringBuilder lines = new StringBuilder();
                for (ConsumerRecord<String, String> r : records) {
                    lines.append(r.key()).append(' ').append(r.value()).append(' ').append(r.partition())
                         .append(' ').append(r.offset()).append(' ').append(name).append('\n');
                }
                synchronized (System.out) {
                    System.out.print(lines);
                    System.out.flush();
                }
            }
        }
    }
}
