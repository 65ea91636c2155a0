"""The reference brokers: data model, controller state, logs, group and transaction coordinators, ACLs,
SASL/TLS, broker configs, ``control()`` fault hooks and the API handlers (:mod:`.apis`)."""
