"""The run harness: what turns a config into a training, evaluation or prediction run, apart from the model.

train.train(cfg) builds, fits, tests and returns the monitored value; context.run_context(cfg) owns what
surrounds a training run (ckpt_path=last, config_resolved.yaml, the DDP relaunch, W&B, the sweep's job, its
device slot, failure logging); summary.RunFiles writes summary.json, test_metrics.json and test_predictions.tsv.
config_checks.check_config stops a config that cannot run before any data is read (ConfigError). The harness
sits above the builder: it imports attend.builder, never the other way round. Nothing is imported here.
"""
