from kafka_kip.cli import main

raise SystemExit(main())
