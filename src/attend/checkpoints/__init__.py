"""Checkpoint files and what is read from them: writing and reading a file safely (files.py), a saved run's
model, data and config in today's form (saved_run.py; saved_config.py rewrites the saved config, the one place
that does), the checkpoint a resume continues (resume.py), averaging several (averaging.py) and starting a new run
from another's weights (init_from.py). Below the callbacks and the run harness: it imports neither."""
