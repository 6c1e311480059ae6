//! A fake Kafka cluster on the real wire protocol (being built; see docs/src/kafkasim.md).
