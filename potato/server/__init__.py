"""The annotation server (stdlib http.server + SQLite)."""
