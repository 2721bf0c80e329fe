"""Kafka RecordBatch v2: header framing (``batch_header``), record encoding and decoding."""
