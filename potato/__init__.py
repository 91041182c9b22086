"""Potato: an annotation server that trains models from its annotators' labels.

Importing this package is cheap on purpose: it imports neither PyYAML nor the server nor
any training library, so remote hosts (which have only the standard library) can import
``potato.training`` modules from a copied checkout.
"""

__version__ = "2.14.0"
