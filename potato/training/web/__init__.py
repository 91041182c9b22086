"""The training pages and HTTP routes: the admin API, the agent protocol's routes, the
Training page, a run's page, runs, compare, the live card, the chart, model downloads.
"""
