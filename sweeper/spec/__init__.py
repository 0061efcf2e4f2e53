"""What to measure: the spec schema, length sources, bucketing policies, trial expansion. No torch."""
