"""The held-out report (classes, ratings, spans) and the plain-text summaries of runs.
"""
