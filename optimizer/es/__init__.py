"""The ES core: the strategy (ask/tell over seeds), fitness shaping and the seeds of a run.

Pure functions and frozen values, no I/O: everything else in the optimizer feeds or records them.
"""
