"""The one exception a request handler raises to answer with an error (``http.Handler`` sends
it: JSON for API paths, a short page otherwise)."""

from typing import Dict, Optional


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: Optional[Dict[str, str]] = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
