"""Brokers and connectors from elsewhere, run beside the reference cluster: Apache Kafka from Maven Central's
jars (:mod:`.apache_kafka`, :mod:`.maven`), readiness probes (:mod:`.probe`) and Spark's own Kafka connector
(:mod:`.spark_connector`)."""
