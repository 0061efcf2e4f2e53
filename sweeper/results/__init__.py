"""The row schema and durable Parquet files. No torch, no Ray."""
