"""The queue in the database: state transitions, coalescing, the claim, the record, and the idle
and held predicates. The one place that holds the SQL that claims and records work."""
