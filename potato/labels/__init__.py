"""What annotators gave, read together: import, aggregation, agreement, export (ours and
upstream Potato's output format).
"""
