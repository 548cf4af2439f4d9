"""The servers a run talks to: one client per server, the scheduler that hands out members, the
replica set kept identical by fingerprints, and the local servers `--local N` starts."""
