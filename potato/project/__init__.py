"""A project's things: items and their media, the SQLite store, who sees what next, and
``potato validate``'s checks of a project.
"""
