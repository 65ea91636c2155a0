"""``kafka-kip demo`` (:func:`.run.run_demo`): its scenes, and the worker scripts (:mod:`.naive_loop`,
:mod:`.lagging_clients`, :mod:`.expansion_group`) that tests and benchmarks run by path in fresh interpreters
(``Path(kafka_kip_reference.demo.__file__).with_name(...)``); those import nothing of this package."""
