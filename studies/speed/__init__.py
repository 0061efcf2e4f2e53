"""The sweep-cost study: the 24-setting yardstick, a user's models through factory, and their analyses."""
