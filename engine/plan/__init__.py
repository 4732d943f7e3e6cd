"""How this app would run on this machine, decided before anything loads: the cores on
the GPUs, each core's batch, the checks, and the capacity the plan gives."""
