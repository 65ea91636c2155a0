"""MirrorMaker 2 against ``kafka-kip mirror`` on Apache Kafka: one module per scenario (throughput, offsets, crash,
truncation), the two replicators and MirrorMaker 2's launcher (replicators), the clusters' reads and writes
(clusters). ``python -m benchmarks.bench_mirrormaker`` runs them."""
