"""The ground floor of configuration, importable from every room: ``ConfigError`` (errors.py), the start-up checks
of a composed config (checks.py, with option_types.py for the declared types of every option), the options that
were renamed and the migrations of configs saved by older versions (renamed_options.py), and what Hydra chose for
this run (hydra_choices.py). Nothing here imports another room of Attend."""
