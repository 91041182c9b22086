"""The command line (``potato ...``): above the composition root it drives.
"""
