"""The config floor: the config file read into typed records (settings), the YAML reader
with its bounds (reader), upstream Potato's keys (upstream), the generic part of backend
configs (backends), and small helpers every layer above may use.
"""
