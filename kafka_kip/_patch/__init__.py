"""The one place kafka_kip reaches past kafka-python's public surface, one module per override.

Nothing here changes kafka-python for code that does not use kafka_kip's clients: every override builds a
function or class that only kafka_kip's own subclasses use, and :mod:`.response_registry` undoes the one
side effect of defining the patched message classes. Each module has an ``install()`` that builds its
override and first checks (the tripwire) that the installed kafka-python still has the hook it relies on,
raising :class:`~kafka_kip._patch.rebind.KafkaPythonChanged` at import time otherwise: that the code still
looks up the names the override relies on (:func:`~kafka_kip._patch.rebind.require_names`) and, where names
say too little, that a small case run through kafka-python's own code comes out as the override needs
(:func:`~kafka_kip._patch.rebind.require_behaviour`).

- :mod:`.consumer_init`: ``KafkaConsumer.__init__`` building kafka_kip's SubscriptionState, Fetcher and
  ConsumerCoordinator;
- :mod:`.producer_init`: ``KafkaProducer.__init__`` building kafka_kip's RecordAccumulator and Sender;
- :mod:`.manager_init`: ``KafkaConnectionManager.__init__`` building kafka_kip's ClusterMetadata;
- :mod:`.manager_connection`: ``KafkaConnectionManager.get_connection`` building kafka_kip's connections;
- :mod:`.manager_transport`: ``KafkaConnectionManager._build_transport`` building kafka_kip's transports (large reads);
- :mod:`.connection_parser`: ``KafkaConnection.connection_made`` building kafka_kip's protocol parser;
- :mod:`.connection_features`: ``KafkaConnection._send_request`` recording each ApiVersionsResponse;
- :mod:`.parser_frame`: a response staged in one join of its received pieces, not copied into a zeroed bytearray;
- :mod:`.parser_response_class`: which class decodes a response on a kafka_kip connection;
- :mod:`.request_header`: a request's header with KIP-1243's consistency state, where kafka-python builds it;
- :mod:`.response_header`: a response keeping its header (KIP-1243's consistency state), which the parser drops;
- :mod:`.response_registry`: defining the patched response classes leaves kafka-python's registry as it was;
- :mod:`.record_bytes`: reading a ``DefaultRecordBatch``'s record bytes for the compiled decoder (read-only);
- :mod:`.fetch_version`: a FetchRequest kafka_kip addresses by topic id may negotiate v13 (kafka-python caps at 12);
- :mod:`.accumulator_append`: ``RecordAccumulator.append`` building the compiled codec's batches;
- :mod:`.record_future`: record futures built and completed in kafka-python's ``__slots__`` by the compiled codec;
- :mod:`.admin_acl_results`: ``KafkaAdminClient``'s ACL answers built with kafka_kip's ACL types (REPLICATOR_WRITE);
- :mod:`.transaction_partitions`: a re-partitioned record's partition joining a transaction that is committing.
"""
