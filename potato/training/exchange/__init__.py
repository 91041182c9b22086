"""What goes to a run and what comes back: the bundle and spec, media and the wheel, and the
trust boundary every report from a run passes (intake, boundary, ingest, agent limits).
"""
