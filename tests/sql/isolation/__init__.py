"""The state machine of tests/sql/test_isolation_properties.py, one module per area."""
