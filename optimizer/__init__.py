"""The central ES process: strategy (ask/tell), scheduler, run directory, export and the CLI."""
