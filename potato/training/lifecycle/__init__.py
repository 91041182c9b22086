"""A run's life on the server: the queue, the runs table, admission, restarts, retention,
automatic retraining, the model in use, the run log.
"""
