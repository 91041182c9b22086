"""What every part of training reads: the Run record and the runs table, the run log, the
smoothed ETA, agent tokens, which device a local run would use, which trainers fit a project.
"""
