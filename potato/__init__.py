"""Potato: an annotation server that trains models from its annotators' labels.

Importing this package is cheap on purpose: it imports neither PyYAML nor the server nor
any training library, so remote hosts (which have only the standard library) can import
``potato.training.remote`` from a copy of the shipped files.
"""

from potato.training.remote.protocol import VERSION as __version__

__all__ = ["__version__"]
